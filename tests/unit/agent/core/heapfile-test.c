// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/heapfile.c: the heap table the agent reads from a producer. A table that
 * is not whole (bad magic, version, sizes) is refused; only published stacks with a value are
 * collected; objects are kept in thousandths and rounded to whole objects.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/heapfile.h"

#define SLOTS 8
#define DEPTH 4

static void *table(size_t *len)
{
	struct heapfile_hdr *h;

	*len = heapfile__size(SLOTS, DEPTH);
	h = calloc(1, *len);
	assert_non_null(h);
	*h = (struct heapfile_hdr){.magic = HEAPFILE_MAGIC,
				   .version = HEAPFILE_VERSION,
				   .pid = 42,
				   .max_depth = DEPTH,
				   .rate = 524288,
				   .stack_slots = SLOTS};
	return h;
}

static void refuses_what_is_not_a_whole_table(void **state)
{
	struct heapfile_view v;
	size_t len;
	struct heapfile_hdr *h = table(&len);

	assert_int_equal(heapfile__view(h, len, &v), 0);
	assert_int_equal(heapfile__view(h, len - 1, &v), -EINVAL); /* truncated */
	assert_int_equal(heapfile__view(h, sizeof(*h) - 1, &v), -EINVAL);
	h->stack_slots = 6; /* not a power of two */
	assert_int_equal(heapfile__view(h, len, &v), -EINVAL);
	h->stack_slots = SLOTS;
	h->version = HEAPFILE_VERSION + 1;
	assert_int_equal(heapfile__view(h, len, &v), -EINVAL);
	h->version = HEAPFILE_VERSION;
	h->magic ^= 1;
	assert_int_equal(heapfile__view(h, len, &v), -EINVAL);
	h->magic ^= 1;
	h->max_depth = 0;
	assert_int_equal(heapfile__view(h, len, &v), -EINVAL);
	free(h);
}

static void collects_published_stacks_with_values(void **state)
{
	struct heapfile_view v;
	struct output_stack st[SLOTS];
	int64_t vals[SLOTS * 4];
	size_t len;
	struct heapfile_hdr *h = table(&len);

	assert_int_equal(heapfile__view(h, len, &v), 0);
	/* slot 1: a stack of two frames, 2.5 objects allocated, 1.5 in use */
	v.stacks[1] = (struct heapfile_stack){.hash = 1,
					      .n_frames = 2,
					      .alloc_mobjects = 2500,
					      .alloc_bytes = 5000,
					      .inuse_mobjects = 1500,
					      .inuse_bytes = 3000};
	v.frames[1 * DEPTH] = 0x1000;
	v.frames[1 * DEPTH + 1] = 0x2000;
	/* slot 3: published, everything freed and nothing left: not a sample */
	v.stacks[3] = (struct heapfile_stack){.hash = 3, .n_frames = 1};
	/* slot 5: values but not published yet (n_frames 0) */
	v.stacks[5] = (struct heapfile_stack){.hash = 5, .alloc_bytes = 7};
	/* slot 6: a frame count beyond the table's depth: refused */
	v.stacks[6] = (struct heapfile_stack){.hash = 6, .n_frames = DEPTH + 1, .alloc_bytes = 1};
	assert_int_equal(heapfile__collect(&v, st, vals, SLOTS), 1);
	assert_int_equal(st[0].pid, 42);
	assert_int_equal(st[0].n_frames, 2);
	assert_int_equal(st[0].frames[1], 0x2000);
	assert_int_equal(st[0].values[0], 3); /* 2.5 rounds up */
	assert_int_equal(st[0].values[1], 5000);
	assert_int_equal(st[0].values[2], 2);
	assert_int_equal(st[0].values[3], 3000);
	assert_int_equal(heapfile__collect(&v, st, vals, 0), 0); /* bounded by the caller */
	free(h);
}

static void kind_is_the_four_heap_types(void **state)
{
	struct heapfile_view v;
	struct output_kind k;
	size_t len;
	struct heapfile_hdr *h = table(&len);

	assert_int_equal(heapfile__view(h, len, &v), 0);
	heapfile__kind(&v, &k);
	assert_int_equal(k.n_types, 4);
	assert_string_equal(k.types[3], "inuse_space");
	assert_string_equal(k.units[0], "count");
	assert_string_equal(k.default_type, "inuse_space");
	assert_int_equal(k.period, 524288);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(refuses_what_is_not_a_whole_table),
	    cmocka_unit_test(collects_published_stacks_with_values),
	    cmocka_unit_test(kind_is_the_four_heap_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
