// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/pprof.h"
#include "pprof/symbolize.h"

/* A stripped binary's profile: mapping with a build-id, three bare addresses, one named frame. */
static struct pprof_profile *stripped_profile(void)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct pprof_mapping_desc md = { .memory_start = 0x400000, .memory_limit = 0x500000,
					 .file_offset = 0, .filename = "/usr/bin/app",
					 .build_id = "c0ffee" };
	struct pprof_profile *p = NULL;
	uint64_t m, l1, l2, l3, lnamed, fk;
	char err[256];

	assert_non_null(b);
	assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	m = pprof_builder__mapping(b, &md);
	l1 = pprof_builder__location(b, m, 0x401010, NULL, 0);
	l2 = pprof_builder__location(b, m, 0x402020, NULL, 0);
	l3 = pprof_builder__location(b, m, 0x4ff000, NULL, 0); /* the resolver does not know it */
	fk = pprof_builder__function(b, "kernel_fn", "kernel_fn", "", 0);
	lnamed = pprof_builder__location(b, 0, 0xffffffff81000000ULL,
					 &(struct pprof_line_desc){ fk, 0 }, 1);
	uint64_t s1[] = { lnamed, l1, l2 }, s2[] = { l3, l2 };
	int64_t v1[] = { 70 }, v2[] = { 30 };
	struct pprof_label_desc lab = { .key = "thread", .str = "worker" };
	assert_int_equal(pprof_builder__add_sample(b, s1, 3, v1, &lab, 1), 0);
	assert_int_equal(pprof_builder__add_sample(b, s2, 2, v2, NULL, 0), 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &p, err, sizeof(err)), 0);
	free(buf.data);
	return p;
}

static int calls;

/* parse_request has file:line (a DWARF line table), main only its name (.symtab). */
static bool resolve(void *ctx, const struct pprof_profile *p, const struct pprof_mapping *m,
		    uint64_t address, struct pprof_resolved *out)
{
	calls++;
	assert_string_equal(pprof_str(p, m->build_id), "c0ffee");
	if (address >= 0x401000 && address < 0x402000)
		*out = (struct pprof_resolved){ "parse_request", "/src/app/req.c", 42 };
	else if (address >= 0x402000 && address < 0x403000)
		out->function = "main";
	return out->function;
}

static const char *frame_name(const struct pprof_profile *p, uint64_t loc_id)
{
	const struct pprof_location *l = &p->locations[loc_id - 1];

	if (!l->n_lines)
		return NULL;
	return pprof_str(p, p->functions[l->lines[l->n_lines - 1].function_id - 1].name);
}

static void names_the_known_addresses_only(void **state)
{
	struct pprof_profile *p = stripped_profile(), *out = NULL;
	size_t n = 0;

	calls = 0;
	assert_int_equal(pprof_symbolize(p, resolve, NULL, &out, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(calls, 3); /* one call per bare location, none for the named one */
	assert_int_equal(out->n_samples, 2);
	assert_string_equal(frame_name(out, out->samples[0].location_ids[0]), "kernel_fn");
	assert_string_equal(frame_name(out, out->samples[0].location_ids[1]), "parse_request");
	assert_string_equal(frame_name(out, out->samples[0].location_ids[2]), "main");
	assert_null(frame_name(out, out->samples[1].location_ids[0]));
	assert_int_equal(out->locations[out->samples[1].location_ids[0] - 1].address, 0x4ff000);
	assert_int_equal(out->samples[0].values[0], 70);
	assert_int_equal(out->samples[1].values[0], 30);
	assert_int_equal(out->samples[0].n_labels, 1);
	assert_string_equal(pprof_str(out, out->samples[0].labels[0].str), "worker");
	/* The build-id and the mapping survive; the mapping now says it has functions. */
	assert_int_equal(out->n_mappings, 1);
	assert_string_equal(pprof_str(out, out->mappings[0].build_id), "c0ffee");
	assert_true(out->mappings[0].has_functions);
	assert_true(out->mappings[0].has_filenames);
	assert_true(out->mappings[0].has_line_numbers);
	pprof_profile__free(out);
	pprof_profile__free(p);
}

static void fills_file_and_line_where_known(void **state)
{
	struct pprof_profile *p = stripped_profile(), *out = NULL;
	const struct pprof_location *req, *main_loc;
	const struct pprof_function *f;

	assert_int_equal(pprof_symbolize(p, resolve, NULL, &out, NULL), 0);
	req = &out->locations[out->samples[0].location_ids[1] - 1];
	main_loc = &out->locations[out->samples[0].location_ids[2] - 1];
	assert_int_equal(req->n_lines, 1);
	assert_int_equal(req->lines[0].line, 42);
	f = &out->functions[req->lines[0].function_id - 1];
	assert_string_equal(pprof_str(out, f->filename), "/src/app/req.c");
	assert_int_equal(main_loc->n_lines, 1);
	assert_int_equal(main_loc->lines[0].line, 0);
	f = &out->functions[main_loc->lines[0].function_id - 1];
	assert_string_equal(pprof_str(out, f->filename), "");
	pprof_profile__free(out);
	pprof_profile__free(p);
}

static bool resolve_nothing(void *ctx, const struct pprof_profile *p,
			    const struct pprof_mapping *m, uint64_t address,
			    struct pprof_resolved *out)
{
	return false;
}

static void unknown_build_id_changes_nothing(void **state)
{
	struct pprof_profile *p = stripped_profile(), *out = NULL;
	size_t n = 9;

	assert_int_equal(pprof_symbolize(p, resolve_nothing, NULL, &out, &n), 0);
	assert_int_equal(n, 0);
	assert_false(out->mappings[0].has_functions);
	assert_false(out->mappings[0].has_line_numbers);
	assert_null(frame_name(out, out->samples[0].location_ids[1]));
	pprof_profile__free(out);
	pprof_profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_the_known_addresses_only),
		cmocka_unit_test(fills_file_and_line_where_known),
		cmocka_unit_test(unknown_build_id_changes_nothing),
	};
	return cmocka_run_group_tests_name("pprof/symbolize", tests, NULL, NULL);
}
