// SPDX-License-Identifier: MIT
/*
 * tests/drivers/metrics-eval.c — the CPU a metrics rule adds to each ingested profile, measured
 * in-process with the thread's CPU clock (the collector's /proc CPU time has 10 ms ticks; a rule
 * costs microseconds). For tests/bench/metrics-bench.sh.
 *
 *   metrics-eval FILE COUNT REPS [RULE]
 *
 * Each rep decodes FILE COUNT times (pprof_read, the validation every upload gets) and, with a
 * rule, evaluates and commits it on each decoded profile as store__ingest does. Prints
 * "decode_us=X rule_us=Y" per profile: medians over REPS of the decode alone and of the rule's
 * eval + commit alone (timed separately, in the same loop).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/clock.h"
#include "port/file.h"
#include "pprof/pprof.h"
#include "store/rules/metrics-rules.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct record_label labels[] = {{"version", "1.4.2"}, {"region", "eu"}};
	struct record_meta meta = {
	    .service = "bench", .type = "cpu", .device = "bench", .labels = labels, .n_labels = 2};
	struct metrics_rules *r = NULL;
	uint64_t *dec, *rule;
	long count, reps;
	char err[512];
	void *data;
	size_t len;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: metrics-eval FILE COUNT REPS [RULE]\n");
		return 2;
	}
	mallopt(M_MMAP_THRESHOLD, 1 << 20); /* as the collector (store/main.c) */
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
	count = atol(argv[2]);
	reps = atol(argv[3]);
	if (port_file_read_all(argv[1], 64 << 20, &data, &len) || count < 1 || reps < 1)
		return 1;
	if (argc == 5) {
		r = metrics_rules__new(0);
		if (!r || metrics_rules__add(r, argv[4], err, sizeof(err))) {
			fprintf(stderr, "%s\n", r ? err : "no memory or no metrics rules");
			return 1;
		}
	}
	dec = calloc((size_t)reps, sizeof(*dec));
	rule = calloc((size_t)reps, sizeof(*rule));
	for (long i = 0; i < reps; i++) {
		for (long j = 0; j < count; j++) {
			struct metrics_pending pend;
			struct pprof_profile *p;
			uint64_t t0 = port_clock_thread_cputime_ns(), t1;

			if (pprof_read(data, len, NULL, &p, err, sizeof(err))) {
				fprintf(stderr, "%s\n", err);
				return 1;
			}
			t1 = port_clock_thread_cputime_ns();
			dec[i] += t1 - t0;
			if (r) {
				metrics_rules__eval(r, &meta, p, &pend);
				metrics_rules__commit(r, &meta, &pend);
				rule[i] += port_clock_thread_cputime_ns() - t1;
			}
			pprof_profile__free(p);
		}
	}
	qsort(dec, (size_t)reps, sizeof(*dec), cmp_u64);
	qsort(rule, (size_t)reps, sizeof(*rule), cmp_u64);
	printf("decode_us=%.2f rule_us=%.2f\n", dec[reps / 2] / 1e3 / (double)count,
	       rule[reps / 2] / 1e3 / (double)count);
	if (r) {
		char *text;

		if (!metrics_rules__text(r, &text, &len)) {
			fputs(strstr(text, "\n# TYPE") ? strstr(text, "# TYPE") : text, stderr);
			free(text);
		}
	}
	metrics_rules__free(r);
	free(dec);
	free(rule);
	free(data);
	return 0;
}
