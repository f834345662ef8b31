// SPDX-License-Identifier: MIT
/*
 * tests/drivers/ch-rows.c — the collector's per-profile work for the ClickHouse store, in-process
 * and alone: the decode (pprof_read, as the store's ingest asks for it) and the sample and
 * profile rows (ch__rows_build). Meant to run under `valgrind --tool=callgrind` or
 * `perf stat -e instructions:u` (load-independent figures on a shared machine).
 *
 *   ch-rows [-u] REPS FILE...
 *   ch-rows -r REPS FILE...
 *   ch-rows -n REPS FILE...
 *
 * Each rep decodes and builds every FILE once. -u: decode without merging samples (as before
 * the store asked for it). Prints the rows made and a hash of their bytes, which must not
 * depend on -u. -r: the batch's hourly rollup instead (ch_rollup__build, REPS times) of the
 * FILEs' rows in one batch, two profiles a device (series) in one hour, as in a busy batch.
 * -n: that batch's sample rows as the Native block the writer sends (one row per profile,
 * ch-native.c), REPS times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/file.h"
#include "port/hash.h"
#include "pprof/pprof.h"
#include "store/ch/ch-store.h"

int main(int argc, char **argv)
{
	struct record_label labels[] = { { "node", "n1" }, { "version", "1.4.2" } };
	struct record_meta meta = { .service = "bench", .type = "cpu", .device = "d1",
				    .labels = labels, .n_labels = 2, .key = "",
				    .time_ns = 1700000000000000000ull };
	struct pprof_read_limits lim = { .merge_samples = true };
	struct ch_batch batch = { 0 };
	bool rollup = false, native = false;
	struct ch_scratch scratch = { 0 };
	size_t rows = 0, samples = 0;
	uint64_t h = HASH_FNV64_BASIS;
	int a = 1;
	long reps;

	if (argc > 1 && !strcmp(argv[1], "-u")) {
		lim.merge_samples = false;
		a++;
	} else if (argc > 1 && !strcmp(argv[1], "-r")) {
		rollup = true;
		a++;
	} else if (argc > 1 && !strcmp(argv[1], "-n")) {
		rollup = native = true;	/* the same batch, built once */
		a++;
	}
	batch.marks = calloc((size_t)argc, sizeof(*batch.marks));
	if (!batch.marks)
		return 1;
	if (argc - a < 2 || (reps = atol(argv[a])) < 1) {
		fprintf(stderr, "usage: ch-rows [-u|-r|-n] REPS FILE...\n");
		return 2;
	}
	for (int f = a + 1; f < argc; f++) {
		void *data;
		size_t len;

		if (port_file_read_all(argv[f], 64 << 20, &data, &len)) {
			fprintf(stderr, "%s: cannot read\n", argv[f]);
			return 1;
		}
		labels[0].value = (char[16]){ 0 };
		snprintf((char *)labels[0].value, 16, "n%d", (f - a - 1) / 2);
		meta.time_ns += 1000000000ull;
		for (long k = 0; k < (rollup ? 1 : reps); k++) {
			struct pprof_profile *p;
			struct put_rows r = { 0 };
			char err[256];

			if (pprof_read(data, len, &lim, &p, err, sizeof(err))) {
				fprintf(stderr, "%s: %s\n", argv[f], err);
				return 1;
			}
			if (ch__rows_build(&meta, p, len, 1, &r)) {
				fprintf(stderr, "%s: rows: out of memory\n", argv[f]);
				return 1;
			}
			if (!k) {
				h = hash_fnv64_add(h, r.samples.p, r.samples.len);
				h = hash_fnv64_add(h, r.profile.p, r.profile.len);
				for (size_t d = 0; d < r.n_distinct; d++)
					h = hash_fnv64_add(h, &r.stack_ids[r.first[d]], 8);
				rows += r.n_samples;
				samples += p->n_samples;
				batch.marks[batch.n_marks++] = (struct pmark){
					.s_off = batch.rows[T_SAMPLES].len, .s_len = r.samples.len };
				rb_put(&batch.rows[T_SAMPLES], r.samples.p, r.samples.len);
			}
			ch__rows_free(&r);
			pprof_profile__free(p);
		}
		free(data);
	}
	for (long k = 0; native && k < reps; k++) {	/* the buffer kept, as the writer's */
		scratch.native.len = 0;
		if (!ch__samples_block(&batch.rows[T_SAMPLES], &scratch.native))
			return 1;
		if (!k) {
			h = hash_fnv64_add(h, scratch.native.p, scratch.native.len);
			printf("native bytes=%zu ", scratch.native.len);
		}
	}
	for (long k = 0; rollup && !native && k < reps; k++) {	/* buffers kept, as the writer's */
		size_t n;

		if (ch_rollup__build(&batch, &scratch, &scratch.native, &n))
			return 1;
		if (!k) {
			h = hash_fnv64_add(h, scratch.native.p, scratch.native.len);
			printf("rollup rows=%zu ", n);
		}
	}
	ch_scratch__free(&scratch);
	printf("files=%d rows=%zu decoded_samples=%zu hash=%016llx\n", argc - a - 1, rows, samples,
	       (unsigned long long)h);
	rb_free(&batch.rows[T_SAMPLES]);
	free(batch.marks);
	return 0;
}
