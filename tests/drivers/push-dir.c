// SPDX-License-Identifier: MIT
/*
 * tests/drivers/push-dir.c — pushes .pb.gz files through agent/transport, as the agent daemon
 * does with each round's profile: upload now, or spool and drain later.
 *
 *   push-dir --upload https://HOST:PORT --tls-ca F --tls-cert F --tls-key F
 *            [--spool PATH --spool-size SIZE] [--service S] [--type T] [--labels k=v,..]
 *            [--device ID] [--round R] [--repeat N] [--no-drain] [--drain-timeout SECONDS]
 *            [--backoff-ms MS] [--timeout-ms MS] [--clock-unset] [--seq-label NAME]
 *            [FILE | DIR]...
 *   push-dir --make-expired-cert CERTDIR ID    (tests: CERTDIR/ID.crt, expired yesterday)
 *
 * Every file (a directory's *.pb.gz in name order) is submitted in turn with the key
 * DEVICE-ROUND-SEQ (DEVICE defaults to the certificate's CN, ROUND to the unix time; with
 * --seq-label also a label NAME=ROUND-SEQ that the collector's list shows);
 * "spooled KEY" / "uploaded KEY" lines (flushed) tell a test what was
 * durably accepted before a kill -9. Then, unless --no-drain, the spool is drained until empty
 * or the drain timeout. The last lines are stats "name=value". Exit 0 when nothing is left in
 * the spool, 3 when something is, 2 for bad usage, 1 for other errors.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/transport/transport.h"
#include "port/clock.h"
#include "port/file.h"
#include "port/log.h"
#include "port/tls.h"
#include "tests/drivers/push-expired.h"

#define PUSH_MAX_FILES 4096
#define PUSH_MAX_FILE  (16u << 20)

struct push_args {
	struct transport_opts t;
	const char *service, *type, *device, *round, *seq_label;
	char seq_value[64];
	char labels_buf[1024];
	struct upload_label labels[UPLOAD_MAX_LABELS];
	size_t n_labels;
	unsigned repeat;
	bool drain, clock_unset, forget_session;
	unsigned drain_timeout_s;
	char *files[PUSH_MAX_FILES];
	size_t n_files;
};

static int push_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (end == s || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int push_parse_labels(struct push_args *a, const char *s)
{
	char *p, *save = NULL;

	snprintf(a->labels_buf, sizeof(a->labels_buf), "%s", s);
	for (p = strtok_r(a->labels_buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(p, '=');

		if (!eq || a->n_labels >= UPLOAD_MAX_LABELS - 3)
			return -EINVAL;
		*eq = '\0';
		a->labels[a->n_labels++] = (struct upload_label){ p, eq + 1 };
	}
	return 0;
}

static int push_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Adds path, or a directory's *.pb.gz files in name order. */
static int push_add(struct push_args *a, const char *path)
{
	size_t first = a->n_files;
	struct dirent *de;
	DIR *d = opendir(path);

	if (!d) {
		if (a->n_files >= PUSH_MAX_FILES)
			return -E2BIG;
		a->files[a->n_files++] = strdup(path);
		return 0;
	}
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char *p;

		if (n < 6 || strcmp(de->d_name + n - 6, ".pb.gz"))
			continue;
		if (a->n_files >= PUSH_MAX_FILES || asprintf(&p, "%s/%s", path, de->d_name) < 0) {
			closedir(d);
			return -E2BIG;
		}
		a->files[a->n_files++] = p;
	}
	closedir(d);
	qsort(a->files + first, a->n_files - first, sizeof(char *), push_cmp);
	return 0;
}

static void push_usage(void)
{
	fprintf(stderr,
		"usage: push-dir --upload https://HOST:PORT --tls-ca F --tls-cert F --tls-key F\n"
		"       [--spool PATH --spool-size SIZE] [--service S] [--type T]\n"
		"       [--labels k=v,..]\n"
		"       [--device ID] [--round R] [--repeat N] [--no-drain] [--drain-timeout S]\n"
		"       [--backoff-ms MS] [--timeout-ms MS] [--clock-unset] [--forget-session]\n"
		"       [FILE|DIR]...\n");
}

static int push_parse(struct push_args *a, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "upload", required_argument, NULL, 'u' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "spool", required_argument, NULL, 's' },
		{ "spool-size", required_argument, NULL, 'S' },
		{ "service", required_argument, NULL, 'n' },
		{ "type", required_argument, NULL, 't' },
		{ "labels", required_argument, NULL, 'l' },
		{ "device", required_argument, NULL, 'd' },
		{ "round", required_argument, NULL, 'r' },
		{ "repeat", required_argument, NULL, 'R' },
		{ "no-drain", no_argument, NULL, 'N' },
		{ "drain-timeout", required_argument, NULL, 'T' },
		{ "backoff-ms", required_argument, NULL, 'b' },
		{ "timeout-ms", required_argument, NULL, 'o' },
		{ "clock-unset", no_argument, NULL, 'U' },
		{ "forget-session", no_argument, NULL, 'F' },
		{ "seq-label", required_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ 0 },
	};
	int c;

	a->service = "push-dir";
	a->type = "cpu";
	a->device = NULL;	/* default: the certificate's CN */
	a->repeat = 1;
	a->drain = true;
	a->drain_timeout_s = 60;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'u': a->t.upload.url = optarg; break;
		case 'A': a->t.upload.ca_file = optarg; break;
		case 'C': a->t.upload.cert_file = optarg; break;
		case 'K': a->t.upload.key_file = optarg; break;
		case 's': a->t.spool_path = optarg; break;
		case 'S':
			if (push_parse_size(optarg, &a->t.spool_size))
				return -EINVAL;
			break;
		case 'n': a->service = optarg; break;
		case 't': a->type = optarg; break;
		case 'l':
			if (push_parse_labels(a, optarg))
				return -EINVAL;
			break;
		case 'd': a->device = optarg; break;
		case 'r': a->round = optarg; break;
		case 'R': a->repeat = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'N': a->drain = false; break;
		case 'T': a->drain_timeout_s = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'b':
			a->t.backoff_min_ns = strtoull(optarg, NULL, 10) * NSEC_PER_MSEC;
			a->t.backoff_max_ns = 8 * a->t.backoff_min_ns;
			break;
		case 'o': a->t.upload.timeout_ms = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'U': a->clock_unset = true; break;
		case 'F': a->forget_session = true; break;
		case 'q': a->seq_label = optarg; break;
		case 'v': port_log_set_level(PORT_LOG_DEBUG); break;
		default: return -EINVAL;
		}
	}
	for (; optind < argc; optind++)
		if (push_add(a, argv[optind]))
			return -E2BIG;
	return a->t.upload.url ? 0 : -EINVAL;
}

static int push_one(struct transport *t, struct push_args *a, const char *path, const char *key)
{
	struct transport_item it = {
		.service = a->service,
		.type = a->type,
		.labels = a->labels,
		.n_labels = a->n_labels,
		.key = key,
	};
	void *data = NULL;
	size_t len = 0;
	int ret;

	if (a->seq_label) {
		/* the key's ROUND-SEQ tail, as a label the collector's list shows */
		snprintf(a->seq_value, sizeof(a->seq_value), "%s", key + strlen(a->device) + 1);
		a->labels[a->n_labels] = (struct upload_label){ a->seq_label, a->seq_value };
		it.n_labels++;
	}
	ret = port_file_read_all(path, PUSH_MAX_FILE, &data, &len);

	if (ret) {
		fprintf(stderr, "push-dir: %s: %s\n", path, strerror(-ret));
		return ret;
	}
	it.data = data;
	it.len = len;
	if (a->forget_session)
		transport__forget_session(t);
	transport_item__stamp(&it);
	if (a->clock_unset) {
		it.clock_unset = true;
		it.time_ns = port_clock_mono_ns();
	}
	ret = transport__submit(t, &it);
	free(data);
	if (!ret) {
		struct transport_stats st;

		transport__stats(t, &st);
		printf("%s %s\n", st.uploaded ? "accepted" : "spooled", key);
	} else {
		printf("dropped %s %s\n", key, strerror(-ret));
	}
	fflush(stdout);
	return ret;
}

/* Peak resident set of this process in KiB (VmHWM), 0 when unknown. */
static uint64_t push_vm_hwm_kb(void)
{
	unsigned long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* Bytes this process caused to be sent to the storage layer (/proc/self/io), 0 if unknown. */
static uint64_t push_io_write_bytes(void)
{
	unsigned long long b = 0;
	char line[128];
	FILE *f = fopen("/proc/self/io", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "write_bytes: %llu", &b) == 1)
			break;
	if (f)
		fclose(f);
	return b;
}

static void push_print_stats(struct transport *t)
{
	struct transport_stats st;

	transport__stats(t, &st);
	const struct {
		const char *name;
		uint64_t v;
	} rows[] = {
		{ "submitted", st.submitted },
		{ "uploaded", st.uploaded },
		{ "spooled", st.spooled },
		{ "from_spool", st.from_spool },
		{ "dropped_permanent", st.dropped_permanent },
		{ "dropped_spool_full", st.dropped_spool_full },
		{ "dropped_no_spool", st.dropped_no_spool },
		{ "dropped_too_big", st.dropped_too_big },
		{ "dropped_corrupt", st.dropped_corrupt },
		{ "spool_pending", st.spool_pending },
		{ "spool_bytes", st.spool_bytes },
		{ "connects", st.upload.connects },
		{ "handshakes", st.upload.handshakes },
		{ "resumed", st.upload.resumed },
		{ "reused", st.upload.reused },
		{ "bytes_out", st.upload.bytes_out },
		{ "handshake_cpu_ns", st.upload.handshake_cpu_ns },
		{ "last_status", (uint64_t)st.upload.last_status },
		{ "full_cpu_ns", st.upload.full_cpu_ns },
		{ "resumed_cpu_ns", st.upload.resumed_cpu_ns },
		{ "vm_hwm_kb", push_vm_hwm_kb() },
		{ "io_write_bytes", push_io_write_bytes() },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("%s=%" PRIu64 "\n", rows[i].name, rows[i].v);
	fflush(stdout);
}

/* Polls until the spool is empty or the timeout passes. */
static void push_drain(struct transport *t, unsigned timeout_s)
{
	uint64_t end = port_clock_mono_ns() + (uint64_t)timeout_s * NSEC_PER_SEC;

	while (!transport__idle(t)) {
		uint64_t now = port_clock_mono_ns(), next;

		transport__poll(t, now);
		if (transport__idle(t) || now >= end)
			break;
		next = transport__next_poll_ns(t);
		now = port_clock_mono_ns();
		if (next > now)
			port_sleep_ns(next - now < 100 * NSEC_PER_MSEC ? next - now
								  : 100 * NSEC_PER_MSEC);
	}
}

int main(int argc, char **argv)
{
	static struct push_args a;
	struct transport *t;
	char err[256], round[32], key[256];
	unsigned seq = 0;
	int rc;

	port_log_open("push-dir", false);
	if (argc == 4 && !strcmp(argv[1], "--make-expired-cert"))
		return push_make_expired(argv[2], argv[3]);
	if (push_parse(&a, argc, argv)) {
		push_usage();
		return 2;
	}
	if (!a.round) {
		snprintf(round, sizeof(round), "%" PRIu64,
			 (uint64_t)(port_clock_real_ns() / NSEC_PER_SEC));
		a.round = round;
	}
	t = transport__new(&a.t, err, sizeof(err));
	if (!t) {
		fprintf(stderr, "push-dir: %s\n", err);
		return 1;
	}
	if (!a.device)
		a.device = transport__device(t);
	for (unsigned r = 0; r < a.repeat; r++) {
		for (size_t i = 0; i < a.n_files; i++) {
			snprintf(key, sizeof(key), "%s-%s-%06u", a.device, a.round, seq++);
			push_one(t, &a, a.files[i], key);
		}
	}
	if (a.drain)
		push_drain(t, a.drain_timeout_s);
	push_print_stats(t);
	rc = transport__idle(t) ? 0 : 3;
	transport__free(t);
	for (size_t i = 0; i < a.n_files; i++)
		free(a.files[i]);
	return rc;
}
