// SPDX-License-Identifier: MIT
/*
 * Unit tests of store/symbols/snapunwind.c against hostile but well-formed snapshots: a
 * hand-built 32-bit ARM debug file (one load segment, a .debug_frame whose rules were worked
 * out by hand: `leaf_fn` with CFA = sp + 8 and the return address at CFA - 4, `start_fn` the
 * outermost frame) stored in a real debug-file store, and profiles built in memory.
 *  - a chain of 100 frames is unwound exactly, and a return address seen by 1,000 samples is
 *    one location, not 1,000 (the stored profile stays the size of what it says);
 *  - everything the rewrite allocates is taken from the budget first and given back but for the
 *    output's share; a budget too small refuses the profile (-EFBIG, its words) and holds
 *    nothing after;
 *  - 100,000 mappings and 4,096 snapshots of 127 frames each: unwound, in bounded time (a
 *    pc's mapping is a binary search, not a scan of them all);
 *  - a loop of frames ends at SNAPUNWIND_MAX_DEPTH, counted too_deep; a stack at the top of
 *    the address space reads nothing beyond its copy (the sanitizer build checks).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <cmocka.h>

#include "pprof/pprof.h"
#include "pprof/snapshot.h"
#include "store/symbols/debuginfo.h"
#include "store/symbols/snapunwind.h"

#define BUILD_ID "00112233445566778899aabbccddeeff00112233"
#define VADDR	 0x10000u   /* the load segment's, at file offset 0 */
#define LEAF_FN	 0x10100u   /* [0x10100, 0x10500): CFA = sp + 8, ra at CFA - 4 */
#define START_FN 0x10600u   /* [0x10600, 0x10610): the outermost frame */
#define MAP_AT	 0x400000u  /* where the device mapped it */
#define RT(va)	 ((va) - VADDR + MAP_AT)

static char dir[] = "/tmp/snapunwind-test-XXXXXX";
static struct debuginfo *d;

/* ---- the debug file ---------------------------------------------------------------------- */

static uint8_t frame[256];
static size_t frame_len;

static void frame32(uint32_t v)
{
	memcpy(frame + frame_len, &v, 4);
	frame_len += 4;
}

static void frame_bytes(const uint8_t *b, size_t n)
{
	memcpy(frame + frame_len, b, n);
	frame_len += n;
}

/* gcc's ARM CIE (code 2, data -4, ra r14, CFA = r13 + 0), then the two functions' FDEs. */
static void build_debug_frame(void)
{
	static const uint8_t cie[] = {0xff, 0xff, 0xff, 0xff, 1, 0, 2, 0x7c, 14, 0x0c, 13, 0};
	static const uint8_t leaf[] = {0x0e, 8, 0x8e, 1, 0, 0}; /* cfa_offset 8; r14 at cfa-4 */
	static const uint8_t start[] = {0x07, 14, 0, 0};	    /* undefined r14 */

	frame_len = 0;
	frame32(sizeof(cie));
	frame_bytes(cie, sizeof(cie));
	frame32(12 + sizeof(leaf));
	frame32(0);
	frame32(LEAF_FN);
	frame32(0x400);
	frame_bytes(leaf, sizeof(leaf));
	frame32(12 + sizeof(start));
	frame32(0);
	frame32(START_FN);
	frame32(0x10);
	frame_bytes(start, sizeof(start));
}

/* An ELF32 ARM file: header, one executable load segment, section headers (.shstrtab, .debug_frame). */
static void write_debug_file(const char *path)
{
	static const char names[] = "\0.shstrtab\0.debug_frame";
	uint8_t file[4096] = {0};
	Elf32_Ehdr *eh = (Elf32_Ehdr *)file;
	Elf32_Phdr *ph = (Elf32_Phdr *)(file + sizeof(*eh));
	Elf32_Shdr *sh = (Elf32_Shdr *)(file + 1024);
	FILE *f;

	build_debug_frame();
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS32;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_ARM;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	eh->e_shoff = 1024;
	eh->e_shentsize = sizeof(*sh);
	eh->e_shnum = 3;
	eh->e_shstrndx = 1;
	*ph = (Elf32_Phdr){.p_type = PT_LOAD, .p_offset = 0, .p_vaddr = VADDR, .p_filesz = 0x1000,
			   .p_memsz = 0x1000, .p_flags = PF_R | PF_X};
	memcpy(file + 512, names, sizeof(names));
	sh[1] = (Elf32_Shdr){.sh_name = 1, .sh_type = SHT_STRTAB, .sh_offset = 512,
			     .sh_size = sizeof(names)};
	memcpy(file + 2048, frame, frame_len);
	sh[2] = (Elf32_Shdr){.sh_name = 11, .sh_type = SHT_PROGBITS, .sh_offset = 2048,
			     .sh_size = (Elf32_Word)frame_len};
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(file, 1, sizeof(file), f), sizeof(file));
	fclose(f);
}

static int setup(void **state)
{
	char path[sizeof(dir) + 64], err[200];
	struct debuginfo_opts o = {0};

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, BUILD_ID);
	write_debug_file(path);
	o.dir = dir;
	d = debuginfo__open(&o, err, sizeof(err));
	return d ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[sizeof(dir) + 16];

	(void)state;
	debuginfo__free(d);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* ---- profiles in memory ------------------------------------------------------------------ */

/* A snapshot's text: pc in leaf_fn, the stack of `frames` return addresses (ras[i], or the
 * same one), then 0 (the end of the chain), each 8-byte frame [pad, ra]. */
static char *snapshot_text(uint32_t sp, const uint32_t *ras, size_t frames, uint32_t same)
{
	uint32_t regs[SNAPSHOT_ARM_REGS] = {0};
	size_t stack = 8 * (frames + 1), len = SNAPSHOT_ARM_HDR + stack;
	uint8_t *blob = calloc(1, len);
	char *text;

	regs[13] = sp;
	regs[15] = RT(LEAF_FN + 0x10) | 1;
	snapshot__arm_header(regs, blob);
	for (size_t i = 0; i < frames; i++) {
		uint32_t ra = ras ? ras[i] : same;

		memcpy(blob + SNAPSHOT_ARM_HDR + 8 * i + 4, &ra, 4);
	}
	text = malloc(snapshot__text_len(len) + 1);
	snapshot__to_text(blob, len, text);
	free(blob);
	return text;
}

struct fixture {
	struct pprof_profile p;
	struct pprof_mapping *maps;
	struct pprof_location *locs;
	struct pprof_sample *samples;
	uint64_t *ids;
	struct pprof_label *labels;
	char **strings;
	int64_t *values;
};

enum { S_EMPTY, S_SNAPSHOT, S_BUILD_ID, S_FILE, S_CPU, S_NS, S_TEXT, N_STRINGS };
static struct pprof_value_type cpu_ns = {.type = S_CPU, .unit = S_NS};

/*
 * n_samples samples, each with its own leaf location (so none merge) and the snapshot text;
 * extra_maps mappings besides the debug file's (each 4 KiB, below it, no build-id).
 */
static void fixture_init(struct fixture *f, size_t n_samples, size_t extra_maps, char *text)
{
	size_t n_maps = extra_maps + 1;

	memset(f, 0, sizeof(*f));
	f->strings = calloc(N_STRINGS, sizeof(char *));
	f->strings[S_EMPTY] = "";
	f->strings[S_SNAPSHOT] = SNAPSHOT_LABEL;
	f->strings[S_BUILD_ID] = BUILD_ID;
	f->strings[S_FILE] = "/usr/bin/app";
	f->strings[S_CPU] = "cpu";
	f->strings[S_NS] = "nanoseconds";
	f->strings[S_TEXT] = text;
	f->maps = calloc(n_maps, sizeof(*f->maps));
	for (size_t i = 0; i < extra_maps; i++)
		f->maps[i] = (struct pprof_mapping){.id = i + 2, .memory_start = 0x1000 + 0x1000 * i,
						    .memory_limit = 0x2000 + 0x1000 * i};
	f->maps[extra_maps] = (struct pprof_mapping){.id = 1, .memory_start = MAP_AT,
						     .memory_limit = MAP_AT + 0x1000,
						     .filename = S_FILE, .build_id = S_BUILD_ID};
	f->locs = calloc(n_samples, sizeof(*f->locs));
	f->samples = calloc(n_samples, sizeof(*f->samples));
	f->ids = calloc(n_samples, sizeof(*f->ids));
	f->labels = calloc(n_samples, sizeof(*f->labels));
	f->values = calloc(n_samples, sizeof(*f->values));
	for (size_t i = 0; i < n_samples; i++) {
		f->locs[i] = (struct pprof_location){.id = i + 1, .mapping_id = 1,
						     .address = RT(LEAF_FN) + (i % 0x100)};
		f->ids[i] = i + 1;
		f->labels[i] = (struct pprof_label){.key = S_SNAPSHOT, .str = S_TEXT};
		f->values[i] = 1;
		f->samples[i] = (struct pprof_sample){.location_ids = &f->ids[i], .n_locations = 1,
						      .values = &f->values[i],
						      .labels = &f->labels[i], .n_labels = 1};
	}
	f->p = (struct pprof_profile){.sample_type = &cpu_ns, .n_sample_type = 1, .strings = f->strings, .n_strings = N_STRINGS,
				      .mappings = f->maps, .n_mappings = n_maps,
				      .locations = f->locs, .n_locations = n_samples,
				      .samples = f->samples, .n_samples = n_samples};
}

static void fixture_free(struct fixture *f)
{
	free(f->strings[S_TEXT]);
	free(f->strings);
	free(f->maps);
	free(f->locs);
	free(f->samples);
	free(f->ids);
	free(f->labels);
	free(f->values);
}

/* A budget that counts what is held, its peak, and refuses beyond a limit. */
struct counter {
	size_t held, peak, limit;
};

static int counter_take(void *ctx, size_t bytes, char *err, size_t errlen)
{
	struct counter *c = ctx;

	if (c->held + bytes > c->limit) {
		snprintf(err, errlen, "needs %zu bytes more than the test's %zu", bytes, c->limit);
		return -EFBIG;
	}
	c->held += bytes;
	if (c->held > c->peak)
		c->peak = c->held;
	return 0;
}

static void counter_give(void *ctx, size_t bytes)
{
	struct counter *c = ctx;

	assert_true(bytes <= c->held);
	c->held -= bytes;
}

struct run {
	struct counter count;
	struct pprof_budget b;
	struct pprof_buf out;
	struct snapunwind_stats st;
	struct snapunwind_call call;
	struct pprof_profile *q;
};

static int run(struct run *r, const struct pprof_profile *p, size_t limit)
{
	char err[200];
	int ret;

	memset(r, 0, sizeof(*r));
	r->count.limit = limit;
	r->b = (struct pprof_budget){.take = counter_take, .give = counter_give, .ctx = &r->count};
	r->call = (struct snapunwind_call){.d = d, .b = &r->b, .out = &r->out, .st = &r->st};
	ret = snapunwind__profile(&r->call, p);
	/* all that is held after the call is the output's, given back by the caller */
	assert_int_equal(r->count.held, ret == 1 ? r->call.out_held : 0);
	if (ret == 1)
		assert_int_equal(pprof_read(r->out.data, r->out.len, NULL, &r->q, err, sizeof(err)),
				 0);
	return ret;
}

static void run_free(struct run *r)
{
	pprof_profile__free(r->q);
	free(r->out.data);
}

/* The walk's 100 return addresses: distinct, inside leaf_fn (after a call: odd, Thumb). */
static void distinct_ras(uint32_t *ras, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ras[i] = RT(LEAF_FN + 0x20 + 2 * (uint32_t)i) | 1;
}

static void test_chain_exact_and_locations_shared(void **state)
{
	uint32_t ras[100];
	struct fixture f;
	struct run r;

	(void)state;
	distinct_ras(ras, 100);
	fixture_init(&f, 1000, 0, snapshot_text(0x7f000000, ras, 100, 0));
	assert_int_equal(run(&r, &f.p, SIZE_MAX), 1);
	assert_int_equal(r.st.snapshots, 1000);
	assert_int_equal(r.st.exact, 1000);
	assert_int_equal(r.q->n_samples, 1000);
	for (size_t i = 0; i < r.q->n_samples; i++) {
		const struct pprof_sample *s = &r.q->samples[i];

		assert_int_equal(s->n_locations, 101); /* the leaf, 100 return addresses */
		assert_int_equal(s->n_labels, 1);      /* unwind=exact, no snapshot */
		assert_string_equal(r.q->strings[s->labels[0].key], "unwind");
		assert_string_equal(r.q->strings[s->labels[0].str], "exact");
		for (size_t k = 1; k < s->n_locations; k++) {
			const struct pprof_location *l = &r.q->locations[s->location_ids[k] - 1];

			assert_int_equal(l->address, (uint64_t)(ras[k - 1] - 1));
		}
	}
	/* 1,000 leaves and 100 return addresses: not 100,000 locations */
	assert_int_equal(r.q->n_locations, 1100);
	run_free(&r);
	fixture_free(&f);
}

static void test_budget(void **state)
{
	uint32_t ras[100];
	struct fixture f;
	struct run r;
	size_t peak;

	(void)state;
	distinct_ras(ras, 100);
	fixture_init(&f, 4096, 0, snapshot_text(0x7f000000, ras, 100, 0));
	assert_int_equal(run(&r, &f.p, SIZE_MAX), 1);
	peak = r.count.peak;
	print_message("4,096 snapshots of 100 frames: %zu bytes taken at the peak, %zu held by "
		      "the output\n", peak, r.call.out_held);
	/* the copy's tables: at least the 4,096 x 101 location ids it wrote */
	assert_true(peak >= 4096 * 101 * sizeof(uint64_t));
	run_free(&r);
	assert_int_equal(run(&r, &f.p, peak / 2), -EFBIG);
	assert_non_null(strstr(r.call.err, "more than the test's"));
	assert_null(r.out.data);
	fixture_free(&f);
}

static void test_many_mappings(void **state)
{
	uint32_t ras[126];
	struct fixture f;
	struct run r;

	(void)state;
	distinct_ras(ras, 126);
	fixture_init(&f, 4096, 100000, snapshot_text(0x7f000000, ras, 126, 0));
	assert_int_equal(run(&r, &f.p, SIZE_MAX), 1);
	assert_int_equal(r.st.exact, 4096);
	assert_int_equal(r.q->samples[0].n_locations, 127);
	run_free(&r);
	fixture_free(&f);
}

static void test_loop_too_deep(void **state)
{
	struct fixture f;
	struct run r;

	(void)state;
	/* 1,000 frames returning into leaf_fn: the walk stops at its bound */
	fixture_init(&f, 10, 0, snapshot_text(0x7f000000, NULL, 1000, RT(LEAF_FN + 0x41)));
	assert_int_equal(run(&r, &f.p, SIZE_MAX), 1);
	assert_int_equal(r.st.too_deep, 10);
	assert_int_equal(r.st.exact, 0);
	assert_int_equal(r.q->samples[0].n_locations, 1); /* the device's chain, kept */
	assert_int_equal(r.q->samples[0].n_labels, 0);	  /* the snapshot stripped */
	run_free(&r);
	fixture_free(&f);
}

static void test_top_of_address_space(void **state)
{
	uint32_t ras[4];
	struct fixture f;
	struct run r;

	(void)state;
	distinct_ras(ras, 4);
	/* the CFA wraps past 2^32 on the walk: every read stays inside the copy or ends it */
	fixture_init(&f, 4, 0, snapshot_text(0xffffffe8u, ras, 4, 0));
	assert_int_equal(run(&r, &f.p, SIZE_MAX), 1);
	assert_int_equal(r.st.snapshots, 4);
	print_message("at the top: exact %llu, left the copy %llu, unknown %llu, bad %llu\n",
		      (unsigned long long)r.st.exact, (unsigned long long)r.st.left_snapshot,
		      (unsigned long long)r.st.unknown_reg, (unsigned long long)r.st.bad_snapshot);
	assert_int_equal(r.st.exact + r.st.left_snapshot + r.st.unknown_reg + r.st.bad_snapshot, 4);
	run_free(&r);
	fixture_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chain_exact_and_locations_shared),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_many_mappings),
	    cmocka_unit_test(test_loop_too_deep),
	    cmocka_unit_test(test_top_of_address_space),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
