// SPDX-License-Identifier: MIT
/*
 * tests/drivers/collector-load.c — a load client for edgeprof-collector, built on port/tls and
 * port/http (the code the agent and the CLI use): N threads, each on one keep-alive mutual-TLS
 * connection, POST the same profile file to /api/0/profiles with a unique idempotency key.
 *
 *   collector-load --url https://HOST:PORT --ca F --cert F --key F --file P
 *                  [--clients N] [--seconds S | --count N] [--prefix P] [--ack-log F]
 *                  [--service S] [--server-pid PID] [--interval-ms N]
 *   collector-load --url URL [--url URL2 ...] --ca F --cert F --key F --fleet DIR
 *                  --devices N [...]
 *
 * Prints one line: "clients=N profiles=N failed=N seconds=S profiles_per_s=X mb_per_s=Y
 * p50_ms=.. p99_ms=.. connect_s=.." and, with --server-pid, "server_cpu_s=..": the CPU time
 * (user + system) the collector spent during the timed phase.
 * Every client connects (TCP + TLS handshake) before the timed phase starts: what is measured
 * is keep-alive ingest, not 64 ECDHE handshakes (~65 M instructions each on the collector, the
 * cost of about 11 profiles) squeezed into a few seconds.
 * --fleet DIR: a simulated fleet instead of one file: N devices (labels node=gw-NNNNN,
 * version=fwV, region=rR), device d running firmware d % VERSIONS and uploading, in turn,
 * the profiles DIR/fw<d % VERSIONS>-<i>.pb.gz (tests/pprof-tool fleet makes them from real
 * profiles' stacks); each client serves the devices d with d % clients == its number, one
 * upload per device in turn, and talks to the URLs in turn (client c to URL c % URLS).
 * --interval-ms paces each client: one upload every N ms at most (a device's rate, not a flood).
 * --ack-log appends "ID KEY" for every acknowledged upload (written before the next request), the
 * crash test's record of what the collector promised to keep. A failed request ends the thread
 * (and the run's exit status is 1 when nothing was acknowledged).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/file.h"
#include "port/http.h"
#include "port/net.h"
#include "port/tls.h"

#define MAX_LAT (1u << 20)

#define MAX_URLS 8
#define MAX_FILES 4096

static struct {
	const char *url[MAX_URLS], *ca, *cert, *key, *file, *prefix, *service, *fleet;
	char host[MAX_URLS][256], port[MAX_URLS][16];
	unsigned n_urls, devices, versions, per;
	struct { void *data; size_t len; } files[MAX_FILES];	/* fleet: [v * per + i] */
	char (*targets)[256];	/* fleet: each device's request target, made once */
	atomic_llong bytes;
	unsigned clients;
	double seconds;
	long count;
	int ack_fd;
	void *data;
	size_t len;
	struct tls_config *tls;
	uint64_t end_ns;
	atomic_long issued, done, failed;
	atomic_uint n_lat;
	uint32_t *lat_us;
	pthread_barrier_t connected, go;	/* clients + main */
	int server_pid;
	unsigned interval_ms;
} g = { .clients = 1, .seconds = 5, .count = -1, .ack_fd = -1, .prefix = "load",
	.service = "bench" };

struct worker {
	unsigned id, url;
	unsigned long turn;	/* fleet: uploads made (picks the device and the file) */
	int fd;
	struct tls_conn *tc;
	struct http_stream s;
	struct http_message m;
};

static ssize_t w_read(void *ctx, void *buf, size_t len)
{
	return tls_conn__read(((struct worker *)ctx)->tc, buf, len);
}

static int w_write(void *ctx, const void *buf, size_t len)
{
	return tls_conn__write(((struct worker *)ctx)->tc, buf, len);
}

static int w_connect(struct worker *w)
{
	char err[256];
	uint64_t deadline = port_clock_mono_ns() + 10 * NSEC_PER_SEC;

	w->url = w->id % g.n_urls;
	w->fd = net_connect(g.host[w->url], g.port[w->url], deadline, err, sizeof(err));
	if (w->fd < 0) {
		fprintf(stderr, "client %u: %s\n", w->id, err);
		return w->fd;
	}
	w->tc = tls_conn__new(g.tls, w->fd, g.host[w->url]);
	tls_conn__set_deadline(w->tc, deadline);
	if (tls_conn__handshake(w->tc)) {
		fprintf(stderr, "client %u: %s\n", w->id, tls_conn__error(w->tc));
		return -EPROTO;
	}
	http_stream__init(&w->s, w_read, w_write, w);
	return 0;
}

static bool w_more(void)
{
	if (g.count >= 0)
		return atomic_fetch_add(&g.issued, 1) < g.count;
	return port_clock_mono_ns() < g.end_ns;
}

static int w_upload(struct worker *w, unsigned long n)
{
	static const char key_hdr[] = "X-Edgeprof-Key: ";
	char target_buf[512], hdr[256], line[256];
	const char *target = target_buf, *key = hdr + sizeof(key_hdr) - 1;
	uint64_t t0 = port_clock_mono_ns();
	const char *id;
	int ret;

	const void *data = g.data;
	size_t len = g.len;

	/* few printf calls per upload: the key goes straight into its header, the fleet's
	 * targets are made once (this tool's CPU counts in fleet-bench's sum) */
	if (!g.fleet)
		snprintf(target_buf, sizeof(target_buf),
			 "/api/0/profiles?service=%s&type=cpu&labels=client=%u", g.service, w->id);
	if (g.fleet) {
		unsigned mine = (g.devices - w->id + g.clients - 1) / g.clients;
		unsigned d = w->id + (unsigned)(w->turn % mine) * g.clients, v = d % g.versions;
		unsigned f = v * g.per + (unsigned)((w->turn / mine + d) % g.per);

		w->turn++;
		data = g.files[f].data;
		len = g.files[f].len;
		target = g.targets[d];
	}
	atomic_fetch_add(&g.bytes, (long long)len);
	snprintf(hdr, sizeof(hdr), "%s%s-%u-%lu\r\nContent-Type: application/octet-stream\r\n",
		 key_hdr, g.prefix, w->id, n);
	tls_conn__set_deadline(w->tc, t0 + 30 * NSEC_PER_SEC);
	ret = http_write_request(&w->s, "POST", g.host[w->url], target, hdr, data, len);
	if (!ret)
		ret = http_read_response(&w->s, &w->m, 1 << 20);
	if (ret)
		return ret;
	if (w->m.status != 200) {
		fprintf(stderr, "client %u: %d %.*s\n", w->id, w->m.status, (int)w->m.body_len,
			(char *)w->m.body);
		return -EPROTO;
	}
	{
		unsigned i = atomic_fetch_add(&g.n_lat, 1);

		if (i < MAX_LAT)
			g.lat_us[i] = (uint32_t)((port_clock_mono_ns() - t0) / 1000);
	}
	if (g.ack_fd >= 0) {
		id = strstr((char *)w->m.body, "\"id\":\"");
		if (!id)
			return -EPROTO;
		id += 6;
		snprintf(line, sizeof(line), "%.*s %.*s\n", (int)strcspn(id, "\""), id,
			 (int)strcspn(key, "\r"), key);
		if (port_write_full(g.ack_fd, line, strlen(line)))
			return -EIO;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned long n = 0;

	int conn = w_connect(w);

	pthread_barrier_wait(&g.connected);
	pthread_barrier_wait(&g.go);
	if (conn) {
		g.failed++;
		if (w->tc)
			tls_conn__free(w->tc);
		if (w->fd >= 0)
			close(w->fd);
		return NULL;
	}
	while (w_more()) {
		uint64_t t0 = port_clock_mono_ns();
		int ret = w_upload(w, n++);

		if (ret) {
			fprintf(stderr, "client %u: request failed: %s\n", w->id, strerror(-ret));
			g.failed++;
			break;
		}
		g.done++;
		if (g.interval_ms) {
			uint64_t next = t0 + (uint64_t)g.interval_ms * 1000000, now;

			while ((now = port_clock_mono_ns()) < next &&
			       (g.count >= 0 || now < g.end_ns))
				usleep((useconds_t)((next - now) / 1000 > 50000 ? 50000
									: (next - now) / 1000));
		}
	}
	tls_conn__close(w->tc);
	tls_conn__free(w->tc);
	close(w->fd);
	http_message__reset(&w->m);
	return NULL;
}

/* utime + stime of a process in seconds, -1 when unknown. */
static double proc_cpu_s(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "url", 1, NULL, 'u' }, { "ca", 1, NULL, 'a' }, { "cert", 1, NULL, 'c' },
		{ "key", 1, NULL, 'k' }, { "file", 1, NULL, 'f' }, { "clients", 1, NULL, 'n' },
		{ "seconds", 1, NULL, 's' }, { "count", 1, NULL, 'N' }, { "prefix", 1, NULL, 'p' },
		{ "ack-log", 1, NULL, 'l' }, { "service", 1, NULL, 'S' },
		{ "server-pid", 1, NULL, 'P' }, { "interval-ms", 1, NULL, 'i' },
		{ "fleet", 1, NULL, 'F' }, { "devices", 1, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			if (g.n_urls == MAX_URLS)
				return -1;
			g.url[g.n_urls++] = optarg;
			break;
		case 'F': g.fleet = optarg; break;
		case 'd': g.devices = (unsigned)atoi(optarg); break;
		case 'a': g.ca = optarg; break;
		case 'c': g.cert = optarg; break;
		case 'k': g.key = optarg; break;
		case 'f': g.file = optarg; break;
		case 'n': g.clients = (unsigned)atoi(optarg); break;
		case 's': g.seconds = atof(optarg); break;
		case 'N': g.count = atol(optarg); break;
		case 'p': g.prefix = optarg; break;
		case 'S': g.service = optarg; break;
		case 'P': g.server_pid = atoi(optarg); break;
		case 'i': g.interval_ms = (unsigned)atoi(optarg); break;
		case 'l':
			g.ack_fd = open(optarg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (g.ack_fd < 0) {
				perror(optarg);
				return -1;
			}
			break;
		default: return -1;
		}
	}
	for (unsigned i = 0; i < g.n_urls; i++)
		if (strncmp(g.url[i], "https://", 8) ||
		    net_split_hostport(g.url[i] + 8, g.host[i], sizeof(g.host[i]), g.port[i],
				       sizeof(g.port[i])))
			return -1;
	if (!g.n_urls || !g.ca || !g.cert || !g.key || (!g.file == !g.fleet) || !g.clients ||
	    g.clients > 4096 || (g.fleet && g.devices < g.clients)) {
		fprintf(stderr, "usage: collector-load --url https://HOST:PORT --ca F --cert F "
			"--key F --file P [--clients N] [--seconds S | --count N] [--ack-log F]\n");
		return -1;
	}
	return 0;
}

/* --fleet DIR: DIR/fw<v>-<i>.pb.gz for v, i from 0 while they exist (every version as many). */
static int fleet_load(void)
{
	char path[4096];

	for (g.versions = 0;; g.versions++) {
		unsigned i;

		for (i = 0; g.versions * g.per + i < MAX_FILES; i++) {
			struct stat st;

			snprintf(path, sizeof(path), "%s/fw%u-%u.pb.gz", g.fleet, g.versions, i);
			if ((g.versions && i == g.per) || stat(path, &st))
				break;
			if (port_file_read_all(path, 64 << 20, &g.files[g.versions * g.per + i].data,
					       &g.files[g.versions * g.per + i].len))
				return -1;
		}
		if (!g.versions)
			g.per = i;
		if (!i || i < g.per)
			break;
	}
	if (!g.versions || !g.per)
		return -1;
	g.targets = calloc(g.devices, sizeof(*g.targets));
	if (!g.targets)
		return -1;
	for (unsigned d = 0; d < g.devices; d++)
		if (snprintf(g.targets[d], sizeof(*g.targets), "/api/0/profiles?service=%s&type=cpu"
			     "&labels=node=gw-%05u,version=fw%u,region=r%u", g.service, d,
			     d % g.versions, d % 4) >= (int)sizeof(*g.targets))
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct worker *w;
	pthread_t *th;
	char err[256];
	uint64_t t0, t1, tc;
	double secs, cpu0 = -1, cpu1 = -1;
	unsigned n;

	if (parse(argc, argv))
		return 2;
	if (g.fleet ? fleet_load() : port_file_read_all(g.file, 64 << 20, &g.data, &g.len)) {
		fprintf(stderr, "%s: cannot read\n", g.fleet ? g.fleet : g.file);
		return 2;
	}
	g.tls = tls_config__new_client(g.ca, g.cert, g.key, err, sizeof(err));
	if (!g.tls) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	/* the collector's answer (head and body, one small record) in one recv, not two */
	tls_config__set_readahead(g.tls, 8 << 10);
	g.lat_us = calloc(MAX_LAT, sizeof(*g.lat_us));
	w = calloc(g.clients, sizeof(*w));
	th = calloc(g.clients, sizeof(*th));
	pthread_barrier_init(&g.connected, NULL, g.clients + 1);
	pthread_barrier_init(&g.go, NULL, g.clients + 1);
	tc = port_clock_mono_ns();
	for (unsigned i = 0; i < g.clients; i++) {
		w[i].id = i;
		w[i].fd = -1;
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	pthread_barrier_wait(&g.connected);
	if (g.server_pid)
		cpu0 = proc_cpu_s(g.server_pid);
	t0 = port_clock_mono_ns();
	g.end_ns = t0 + (uint64_t)(g.seconds * 1e9);
	pthread_barrier_wait(&g.go);
	for (unsigned i = 0; i < g.clients; i++)
		pthread_join(th[i], NULL);
	t1 = port_clock_mono_ns();
	if (g.server_pid)
		cpu1 = proc_cpu_s(g.server_pid);
	secs = (double)(t1 - t0) / 1e9;
	n = g.n_lat < MAX_LAT ? g.n_lat : MAX_LAT;
	qsort(g.lat_us, n, sizeof(*g.lat_us), cmp_u32);
	printf("clients=%u profiles=%ld failed=%ld seconds=%.2f profiles_per_s=%.0f mb_per_s=%.2f "
	       "p50_ms=%.2f p99_ms=%.2f connect_s=%.2f", g.clients, (long)g.done, (long)g.failed,
	       secs, (double)g.done / secs, (double)g.bytes / secs / 1e6,
	       n ? g.lat_us[n / 2] / 1000.0 : 0, n ? g.lat_us[n * 99 / 100] / 1000.0 : 0,
	       (double)(t0 - tc) / 1e9);
	if (cpu0 >= 0 && cpu1 >= 0)
		printf(" server_cpu_s=%.2f", cpu1 - cpu0);
	printf("\n");
	pthread_barrier_destroy(&g.connected);
	pthread_barrier_destroy(&g.go);
	tls_config__free(g.tls);
	free(g.data);
	free(g.lat_us);
	free(w);
	free(th);
	return g.done ? 0 : 1;
}
