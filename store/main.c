// SPDX-License-Identifier: MIT
/*
 * store/main.c — edgeprof-collector: options, signals, then the wiring: the server
 * (store/server/) answers with the API's handler (store/api/), which holds the store; the
 * scraper stores through the API too.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/log.h"
#include "store/api/api.h"
#include "store/rules/metrics-rules.h"
#include "store/scrape/scrape.h"
#include "store/server/server.h"

/* The command line: the server's options (listeners, limits) and the API's (the store's). */
struct collector_opts {
	struct server_opts srv;
	struct api_opts api;
};

static struct server *the_server;
static struct coll_scraper *the_scraper;
static struct coll_scrape_opts scrape_opts;

#ifdef CONFIG_COLLECTOR_ROLLUP_BUCKET_S
#define ROLLUP_DEFAULT_S CONFIG_COLLECTOR_ROLLUP_BUCKET_S
#else
#define ROLLUP_DEFAULT_S 0
#endif

#ifdef CONFIG_COLLECTOR_METRICS_SERIES
#define METRICS_SERIES CONFIG_COLLECTOR_METRICS_SERIES
#define METRICS_SERIES_IDLE_S CONFIG_COLLECTOR_METRICS_SERIES_IDLE_S
#else
#define METRICS_SERIES 0
#define METRICS_SERIES_IDLE_S 0
#endif

#ifdef CONFIG_COLLECTOR_DUTY_DEVICES
#define DUTY_DEVICES_DEFAULT CONFIG_COLLECTOR_DUTY_DEVICES
#define DUTY_USAGE \
	"       edgeprof-collector ... --duty-percent N [--duty-window S] [--duty-group-by K,..]\n" \
	"                          [--duty-devices N]   (fleet-wide duty cycling)\n"
#else
#define DUTY_DEVICES_DEFAULT 0
#define DUTY_USAGE ""	/* the flags give "not built in" */
#endif

static const char usage_text[] =
	"usage: edgeprof-collector --listen HOST:PORT --tls-ca F --tls-cert F --tls-key F\n"
	"                          --ring PATH [--ring-size SIZE] [--fsync-ms N]\n"
	"                          [--http-listen HOST:PORT [--http-token TOKEN]]\n"
	"                          [--max-body SIZE] [--max-debuginfo SIZE] [--max-conns N]\n"
	"                          [--max-handshakes N] [--decode-mem SIZE] [--request-mem SIZE]\n"
	"                          [--query-mem SIZE] [--query-timeout-ms N]\n"
	"                          [--request-timeout-ms N] [--idle-timeout-ms N]\n"
	"                          [--index-entries N] [--debuginfo-dir DIR] [--syslog] [-v]\n"
	"                          [--rollup-seconds N] [--metrics-rule 'NAME=SELECTOR ...']...\n"
	"                          [--metrics-series N] [--metrics-series-idle S]\n"
	"                          [--regression-rule 'NAME=SELECTOR by LABEL']...\n"
	"                          [--regression-interval S]\n"
	"                          [--scrape-targets FILE [--scrape-interval S] [--scrape-seconds S]\n"
	"                           [--scrape-types LIST] [--scrape-tls-cert F --scrape-tls-key F]]\n"
	"       edgeprof-collector ... --clickhouse http://HOST:PORT/DATABASE --debuginfo-dir DIR\n"
	"                          [--ch-batch-ms N] [--retention-days N] [--ch-queue SIZE]\n"
	"                          [--ch-spool FILE [--ring-size SIZE]]\n"
	"                          [--ch-cluster NAME [--ch-shard-urls URL,...]]\n"
	"                          [--ch-rollup-without LABEL,...] [--ch-backfill-days N]\n"
	"                          (instead of --ring)\n"
	DUTY_USAGE
	"\n"
	"Receives profiles over mutual TLS (client certificates signed by --tls-ca are\n"
	"required; their CN becomes the device label) and keeps them in one preallocated\n"
	"ring file of SIZE bytes (K/M/G suffixes; default %d MiB; the oldest are\n"
	"overwritten). A profile is acknowledged once durable: fsync per record, or every N\n"
	"ms with --fsync-ms (group commit). --http-listen adds a plain-HTTP listener for SDKs\n"
	"without client certificates: loopback only unless --http-token is set, and with a\n"
	"token every request needs 'Authorization: Bearer TOKEN' (or Basic, token as\n"
	"password). --scrape-targets pulls profiles from the targets of a Prometheus file_sd\n"
	"JSON file (reread on change or SIGHUP) every --scrape-interval (60) s: the CPU\n"
	"profile for --scrape-seconds (10) and --scrape-types (cpu,heap); __scheme__ https\n"
	"targets (devices in pull mode) with the operator certificate --scrape-tls-cert/key.\n"
	"--rollup-seconds sets the rollup bucket (0 = no rollups; default %d; with\n"
	"--clickhouse only 0 counts: merges read raw rows, not the hourly rollup).\n"
	"--max-debuginfo bounds debug-file uploads (POST /api/0/debuginfo/ID) apart from\n"
	"--max-body, which bounds every other request. Each listener holds up to\n"
	"--max-conns authenticated and --max-handshakes unauthenticated connections (the\n"
	"one silent longest is closed when a new one needs its slot). Decoding a profile may\n"
	"take --request-mem with its body (413 beyond), all uploads together --decode-mem\n"
	"(503 and Retry-After while it is full). A query's merge or render of stored profiles\n"
	"may take --query-mem of that (413 beyond) and --query-timeout-ms (503 beyond; 0 = no\n"
	"bound). With --clickhouse the\n"
	"profiles go to ClickHouse (decoded into rows, stacks stored once) instead of a ring\n"
	"file, and an upload is acknowledged once ClickHouse accepted its batch, or with\n"
	"--ch-spool once it is durable in that local ring file, sent to ClickHouse from there.\n"
	"--metrics-rule 'NAME=SELECTOR [function=\"F\"] [by (label, ...)]' (repeatable) counts\n"
	"the stored profiles that match into NAME_seconds_total (CPU time), NAME_bytes_total\n"
	"(bytes allocated) or NAME_total at /metrics, in at most N series (--metrics-series,\n"
	"default and most %d; a series without a profile for --metrics-series-idle S is\n"
	"freed, 0 = never), e.g.\n"
	"  --metrics-rule 'checksum_cpu=gateway{region=\"eu\"} function=\"checksum\" by (version)'\n"
	"--regression-rule 'fw=fw{region=\"eu\"} by version' (repeatable) compares, every\n"
	"--regression-interval (3600) s, the newest value of the label (by first profile)\n"
	"against the previous one since the newest appeared (GET /api/0/regressions's\n"
	"statistics): edgeprof_regression{rule,function,...} at /metrics.\n"
	"To start: edgeprof certs init pki && edgeprof certs device pki gw-1, then\n"
	"  edgeprof-collector --listen 127.0.0.1:8443 --tls-ca pki/ca.crt \\\n"
	"    --tls-cert pki/server.crt --tls-key pki/server.key --ring /tmp/edgeprof/ring\n"
	"Reading needs an operator's certificate: edgeprof certs operator pki NAME.\n"
	"API: store/README.md.\n";

static void usage(FILE *out)
{
	fprintf(out, usage_text, CONFIG_COLLECTOR_RING_MB, ROLLUP_DEFAULT_S, METRICS_SERIES);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		coll_scrape__reload(the_scraper);
	else if (the_server)
		server__stop(the_server);
}

/*
 * --metrics-rule (texts gathered in rules[]) and --metrics-series: the rules live as long as the
 * process (the store points at them).
 */
static int make_rules(struct api_opts *o, char **rules, size_t n, uint64_t series,
		      uint64_t idle_s)
{
	char err[512];

	if (!n)
		return 0;
	if (IS_ENABLED(CONFIG_COLLECTOR_METRICS_RULES) && (series < 1 || series > METRICS_SERIES)) {
		fprintf(stderr, "edgeprof-collector: --metrics-series: 1..%d "
			"(CONFIG_COLLECTOR_METRICS_SERIES)\n", METRICS_SERIES);
		return -EINVAL;
	}
	o->store.rules = metrics_rules__new(series);
	if (!o->store.rules && IS_ENABLED(CONFIG_COLLECTOR_METRICS_RULES)) {
		fprintf(stderr, "edgeprof-collector: out of memory\n");
		return -ENOMEM;
	}
	if (o->store.rules)
		metrics_rules__set_idle_ms(o->store.rules, idle_s * 1000);
	for (size_t i = 0; i < n; i++)
		if (metrics_rules__add(o->store.rules, rules[i], err, sizeof(err))) {
			fprintf(stderr, "edgeprof-collector: %s\n", err);
			return -EINVAL;
		}
	return 0;
}

static int parse_args(int argc, char **argv, struct collector_opts *o)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "tls-ca", required_argument, NULL, 'C' },
		{ "tls-cert", required_argument, NULL, 'c' },
		{ "tls-key", required_argument, NULL, 'k' },
		{ "ring", required_argument, NULL, 'r' },
		{ "ring-size", required_argument, NULL, 's' },
		{ "fsync-ms", required_argument, NULL, 'f' },
		{ "http-listen", required_argument, NULL, 'H' },
		{ "http-token", required_argument, NULL, 'T' },
		{ "max-body", required_argument, NULL, 'b' },
		{ "max-debuginfo", required_argument, NULL, 'g' },
		{ "max-conns", required_argument, NULL, 'm' },
		{ "max-handshakes", required_argument, NULL, 'a' },
		{ "request-timeout-ms", required_argument, NULL, 't' },
		{ "idle-timeout-ms", required_argument, NULL, 'i' },
		{ "index-entries", required_argument, NULL, 'x' },
		{ "debuginfo-dir", required_argument, NULL, 'D' },
		{ "rollup-seconds", required_argument, NULL, 'R' },
		{ "clickhouse", required_argument, NULL, 'K' },
		{ "ch-batch-ms", required_argument, NULL, 'B' },
		{ "retention-days", required_argument, NULL, 'J' },
		{ "metrics-rule", required_argument, NULL, 'M' },
		{ "metrics-series", required_argument, NULL, 'N' },
		{ "metrics-series-idle", required_argument, NULL, 1012 },
		{ "regression-rule", required_argument, NULL, 1000 },
		{ "regression-interval", required_argument, NULL, 1001 },
		{ "scrape-targets", required_argument, NULL, 'P' },
		{ "scrape-interval", required_argument, NULL, 'I' },
		{ "scrape-seconds", required_argument, NULL, 'E' },
		{ "scrape-types", required_argument, NULL, 'Y' },
		{ "scrape-tls-cert", required_argument, NULL, 'U' },
		{ "scrape-tls-key", required_argument, NULL, 'V' },
		{ "ch-spool", required_argument, NULL, 'Q' },
		{ "ch-queue", required_argument, NULL, 'q' },
		{ "ch-cluster", required_argument, NULL, 'X' },
		{ "ch-shard-urls", required_argument, NULL, 'u' },
		{ "ch-rollup-without", required_argument, NULL, 'O' },
		{ "ch-backfill-days", required_argument, NULL, 1013 },
		{ "duty-percent", required_argument, NULL, 'p' },
		{ "duty-window", required_argument, NULL, 'W' },
		{ "duty-group-by", required_argument, NULL, 'G' },
		{ "duty-devices", required_argument, NULL, 'e' },
		{ "decode-mem", required_argument, NULL, 'j' },
		{ "request-mem", required_argument, NULL, 'o' },
		{ "query-mem", required_argument, NULL, 1010 },
		{ "query-timeout-ms", required_argument, NULL, 1011 },
		{ "syslog", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *rules[METRICS_RULES_MAX + 1];
	size_t n_rules = 0;
	uint64_t v, series = METRICS_SERIES, series_idle = METRICS_SERIES_IDLE_S;
	int c;

	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'l': o->srv.listen = optarg; break;
		case 'C': o->srv.tls_ca = optarg; break;
		case 'c': o->srv.tls_cert = optarg; break;
		case 'k': o->srv.tls_key = optarg; break;
		case 'r': o->api.store.path = optarg; break;
		case 'H': o->srv.http_listen = optarg; break;
		case 'T': o->srv.http_token = optarg; break;
		case 'D': o->api.debuginfo_dir = optarg; break;
		case 'Q': o->api.store.ch_spool = optarg; break;
		case 'X': o->api.store.ch_cluster = optarg; break;
		case 'u': o->api.store.ch_shard_urls = optarg; break;
		case 'O': o->api.store.ch_rollup_without = optarg; break;
		case 'G': o->api.duty.group_by = optarg; break;
		case 'K':
			o->api.store.backend = STORE_CLICKHOUSE;
			o->api.store.clickhouse = optarg;
			break;
		case 'M':
			if (n_rules <= METRICS_RULES_MAX) /* one more: __add says "too many" */
				rules[n_rules++] = optarg;
			break;
		case 1000: /* one more than allowed: regress_rules__new says "at most" */
			if (o->api.regress.n <= REGRESS_RULES_MAX)
				o->api.regress.rules[o->api.regress.n++] = optarg;
			break;
		case 1001:
			if (parse_size(optarg, &v) || v < 1 || v > 7 * 86400)
				return fprintf(stderr, "edgeprof-collector: --regression-interval: "
					       "1..604800 seconds\n"), -EINVAL;
			o->api.regress.interval_s = (unsigned)v;
			break;
		case 'P': scrape_opts.file = optarg; break;
		case 'Y': scrape_opts.types = optarg; break;
		case 'U': scrape_opts.cert_file = optarg; break;
		case 'V': scrape_opts.key_file = optarg; break;
		case 'I': case 'E':
			if (parse_size(optarg, &v) || v < 1 || v > 86400) {
				fprintf(stderr, "edgeprof-collector: --scrape-%s: 1..86400 seconds\n",
					c == 'I' ? "interval" : "seconds");
				return -EINVAL;
			}
			if (c == 'I')
				scrape_opts.interval_s = (unsigned)v;
			else
				scrape_opts.seconds = (unsigned)v;
			break;
		case 'S': port_log_open("edgeprof-collector", true); break;
		case 'v': port_log_set_level(PORT_LOG_DEBUG); break;
		case 'h': usage(stdout); exit(0);
		case 'R':
			if (parse_size(optarg, &v) || (v && (v < 10 || v > 86400))) {
				fprintf(stderr, "edgeprof-collector: --rollup-seconds: 0 or "
					"10..86400\n");
				return -EINVAL;
			}
			o->api.store.rollup.bucket_s = (unsigned)v;
			o->api.store.ch_no_rollup = !v;
			break;
		case 's': case 'f': case 'b': case 'g': case 'm': case 't': case 'i': case 'x':
		case 'a': case 'B': case 'J': case 'N': case 'q': case 'p': case 'W': case 'e':
		case 'j': case 'o': case 1010: case 1011: case 1012: case 1013:
			if (parse_size(optarg, &v)) {
				fprintf(stderr, "edgeprof-collector: '%s' is not a size\n", optarg);
				return -EINVAL;
			}
			if (c == 's') o->api.store.size = v;
			else if (c == 'f') o->api.store.fsync_ms = (unsigned)v;
			else if (c == 'b') o->srv.max_body = v;
			else if (c == 'g') o->srv.max_debuginfo_body = v;
			else if (c == 'm') o->srv.max_conns = (unsigned)v;
			else if (c == 'a') o->srv.max_handshakes = (unsigned)v;
			else if (c == 't') o->srv.request_timeout_ms = (unsigned)v;
			else if (c == 'i') o->srv.idle_timeout_ms = (unsigned)v;
			else if (c == 'B') o->api.store.ch_batch_ms = (unsigned)v;
			else if (c == 'J') o->api.store.retention_days = (unsigned)v;
			else if (c == 'N') series = v;
			else if (c == 'q') o->api.store.ch_queue_bytes = v;
			else if (c == 'p') o->api.duty.budget_percent = (unsigned)v;
			else if (c == 'W') o->api.duty.window_s = (unsigned)v;
			else if (c == 'e') o->api.duty.max_devices = v;
			else if (c == 'j') o->srv.mem_total = v;
			else if (c == 'o') o->srv.mem_request = v;
			else if (c == 1010) o->srv.mem_query = v;
			else if (c == 1011) o->srv.query_timeout_ms = (unsigned)v;
			else if (c == 1012) series_idle = v;
			else if (c == 1013) o->api.store.ch_backfill_days = (unsigned)v;
			else o->api.store.index_entries = v;
			break;
		default:
			return -EINVAL;
		}
	}
	if (o->srv.mem_total < (1u << 20) || o->srv.mem_request < (1u << 20) ||
	    o->srv.mem_query < (1u << 20)) {
		fprintf(stderr, "edgeprof-collector: --decode-mem, --request-mem and --query-mem: "
			"1M at least\n");
		return -EINVAL;
	}
	if (make_rules(&o->api, rules, n_rules, series, series_idle))
		return -EINVAL;
	if ((o->api.store.ch_spool || o->api.store.ch_queue_bytes || o->api.store.ch_cluster ||
	     o->api.store.ch_shard_urls || o->api.store.ch_rollup_without ||
	     o->api.store.ch_backfill_days) && !o->api.store.clickhouse) {
		fprintf(stderr, "edgeprof-collector: --ch-spool, --ch-queue, --ch-cluster, "
			"--ch-rollup-without and --ch-backfill-days are for --clickhouse\n");
		return -EINVAL;
	}
	if (o->api.store.ch_backfill_days > 3660) {
		fprintf(stderr, "edgeprof-collector: --ch-backfill-days: 0..3660 (ten years)\n");
		return -EINVAL;
	}
	if (o->api.store.retention_days && !o->api.store.clickhouse) {
		fprintf(stderr, "edgeprof-collector: --retention-days is for --clickhouse (a ring "
			"file keeps what fits: --ring-size)\n");
		return -EINVAL;
	}
	if (o->api.store.clickhouse && (o->api.store.path || !o->api.debuginfo_dir)) {
		fprintf(stderr, "edgeprof-collector: --clickhouse replaces --ring and needs "
			"--debuginfo-dir\n");
		return -EINVAL;
	}
	if (optind != argc || (!o->api.store.path && !o->api.store.clickhouse) ||
	    (!o->srv.listen && !o->srv.http_listen) ||
	    (o->srv.listen && (!o->srv.tls_ca || !o->srv.tls_cert || !o->srv.tls_key))) {
		fprintf(stderr, "edgeprof-collector: needs --ring and --listen with --tls-ca, "
			"--tls-cert, --tls-key (or --http-listen)\n");
		return -EINVAL;
	}
	if (o->srv.http_token && !o->srv.http_listen) {
		fprintf(stderr, "edgeprof-collector: --http-token without --http-listen\n");
		return -EINVAL;
	}
	if (o->srv.http_token &&
	    (strlen(o->srv.http_token) < 8 || strlen(o->srv.http_token) > 128)) {
		fprintf(stderr, "edgeprof-collector: --http-token must be 8 to 128 characters\n");
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct collector_opts o = {
		.srv = { .max_body = (size_t)CONFIG_COLLECTOR_MAX_BODY_KB << 10,
			 .max_conns = CONFIG_COLLECTOR_MAX_CONNS,
			 .request_timeout_ms = 30000,
			 .idle_timeout_ms = 60000,
			 .handshake_timeout_ms = 10000,
			 .mem_total = (size_t)CONFIG_COLLECTOR_DECODE_MEM_MB << 20,
			 .mem_request = (size_t)CONFIG_COLLECTOR_REQUEST_MEM_MB << 20,
			 .mem_query = (size_t)CONFIG_COLLECTOR_QUERY_MEM_MB << 20,
			 .query_timeout_ms = CONFIG_COLLECTOR_QUERY_TIMEOUT_MS },
		.api = { .store = { .size = 0, .fsync_ms = CONFIG_COLLECTOR_FSYNC_MS,
				    .rollup = { .bucket_s = ROLLUP_DEFAULT_S } },
			 .duty = { .window_s = 60, .group_by = "version,region",
				   .max_devices = DUTY_DEVICES_DEFAULT } },
	};
	struct server_handler h;
	struct api *api;
	struct sigaction sa = { .sa_handler = on_signal };
	char err[512] = "";
	int ret;

	port_log_open("edgeprof-collector", false);
	if (parse_args(argc, argv, &o)) {
		metrics_rules__free(o.api.store.rules);
		usage(stderr);
		return 2;
	}
	if (o.srv.request_timeout_ms < o.srv.handshake_timeout_ms)
		o.srv.handshake_timeout_ms = o.srv.request_timeout_ms;
	signal(SIGPIPE, SIG_IGN);
	/*
	 * Every upload allocates and frees the same few buffers (body, decoded profile). glibc's
	 * default gives small heaps back to the kernel at each free and faults them in again at the
	 * next request (~10% of the CPU in page faults at 1,000 profiles/s): keep up to 8 MiB per
	 * arena instead. A fixed mmap threshold also stops it from creeping up to 32 MiB.
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
	o.api.max_body = o.srv.max_body;
	/* the listeners first, then the store (as ever: a busy port leaves the ring untouched) */
	the_server = server__new(&o.srv, err, sizeof(err));
	api = the_server ? api__new(&o.api, server__metrics(the_server), err, sizeof(err)) : NULL;
	if (!api) {
		pr_err("%s", err);
		server__free(the_server);
		return 1;
	}
	h = api__handler(api);
	server__set_handler(the_server, &h); /* frees api with itself */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (scrape_opts.file) {
		scrape_opts.ca_file = o.srv.tls_ca;
		the_scraper = coll_scrape__new(&scrape_opts, api, err, sizeof(err));
		if (!the_scraper) {
			pr_err("--scrape-targets: %s", err);
			server__free(the_server);
			return 1;
		}
		sigaction(SIGHUP, &sa, NULL);
	}
	if (o.srv.listen)
		pr_info("listening on %s (mutual TLS, port %d)", o.srv.listen,
			server__port(the_server, true));
	if (o.srv.http_listen)
		pr_info("listening on %s (plain HTTP%s, port %d)", o.srv.http_listen,
			o.srv.http_token ? ", token required" : "",
			server__port(the_server, false));
	ret = server__run(the_server);
	pr_info("shutting down");
	coll_scrape__free(the_scraper);
	server__free(the_server);
	metrics_rules__free(o.api.store.rules);
	return ret ? 1 : 0;
}
