// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/pprof.h"

/* The inline profile specs below leave trailing fields out on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* A profile description small enough to write inline. */
struct spec {
	const char *types[3]; /* "type/unit" */
	const char *period;   /* "type/unit" */
	int64_t period_value, time_nanos, duration;
	const char *comment;
	uint64_t map_start;   /* one mapping "/bin/app" with build id "b1", size 0x10000 */
	struct {
		const char *funcs[4]; /* leaf first; a frame per function */
		int64_t values[3];
		const char *label;    /* "k=v" or NULL */
		const char *label2;
	} samples[4];
};

static void split(const char *s, char *a, char *b)
{
	const char *sep = s + strcspn(s, "/=");

	if (!*sep) {
		strcpy(a, s);
		b[0] = '\0';
		return;
	}
	memcpy(a, s, sep - s);
	a[sep - s] = '\0';
	strcpy(b, sep + 1);
}

static struct pprof_profile *make(const struct spec *sp)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct pprof_profile *p;
	char t[64], u[64], err[256];
	size_t i, j, n_types = 0;
	uint64_t m = 0;

	for (i = 0; i < 3 && sp->types[i]; i++, n_types++) {
		split(sp->types[i], t, u);
		assert_int_equal(pprof_builder__add_sample_type(b, t, u), 0);
	}
	if (sp->period) {
		split(sp->period, t, u);
		pprof_builder__set_period(b, t, u, sp->period_value);
	}
	pprof_builder__set_time(b, sp->time_nanos, sp->duration);
	if (sp->comment)
		pprof_builder__add_comment(b, sp->comment);
	if (sp->map_start)
		m = pprof_builder__mapping(b, &(struct pprof_mapping_desc){
			sp->map_start, sp->map_start + 0x10000, 0, "/bin/app", "b1", true, true,
			true });
	for (i = 0; i < 4 && sp->samples[i].funcs[0]; i++) {
		struct pprof_label_desc l[2] = { 0 };
		uint64_t locs[4];
		size_t n_labels = 0;

		for (j = 0; j < 4 && sp->samples[i].funcs[j]; j++) {
			const char *name = sp->samples[i].funcs[j];
			uint64_t f = pprof_builder__function(b, name, NULL, "f.c", 0);
			struct pprof_line_desc ln = { f, 1 };

			/* The address is per function, relative to the mapping's start. */
			locs[j] = pprof_builder__location(b, m, sp->map_start + 0x100 * name[0], &ln,
							  1);
		}
		if (sp->samples[i].label) {
			static char k[2][32], v[2][32];

			split(sp->samples[i].label, k[0], v[0]);
			l[n_labels++] = (struct pprof_label_desc){ k[0], v[0], 0, NULL };
			if (sp->samples[i].label2) {
				split(sp->samples[i].label2, k[1], v[1]);
				l[n_labels++] = (struct pprof_label_desc){ k[1], v[1], 0, NULL };
			}
		}
		assert_int_equal(pprof_builder__add_sample(b, locs, j, sp->samples[i].values, l,
							   n_labels), 0);
	}
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	if (pprof_read(buf.data, buf.len, NULL, &p, err, sizeof(err)))
		fail_msg("%s", err);
	free(buf.data);
	(void)n_types;
	return p;
}

static struct pprof_profile *merge2(const struct spec *a, const struct spec *b, int want,
				    char *err, size_t errlen)
{
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *pa = make(a), *pb = make(b), *out = NULL;

	assert_int_equal(pprof_merger__add(m, pa, err, errlen), 0);
	assert_int_equal(pprof_merger__add(m, pb, err, errlen), want);
	if (!want)
		assert_int_equal(pprof_merger__finish(m, &out, err, errlen), 0);
	pprof_merger__free(m);
	pprof_profile__free(pa);
	pprof_profile__free(pb);
	return out;
}

static const char *leaf(const struct pprof_profile *p, const struct pprof_sample *s)
{
	const struct pprof_location *l = &p->locations[s->location_ids[0] - 1];

	return pprof_str(p, p->functions[l->lines[0].function_id - 1].name);
}

static void identical_stacks_sum(void **state)
{
	struct spec a = { { "samples/count", "cpu/nanoseconds" }, "cpu/nanoseconds", 10, 500, 7,
			  "c1", 0x400000,
			  { { { "a", "main" }, { 1, 10 } }, { { "b", "main" }, { 2, 20 } } } };
	struct spec b = { { "samples/count", "cpu/nanoseconds" }, "cpu/nanoseconds", 30, 300, 5,
			  "c1", 0x800000, /* same binary elsewhere: rebased onto a's mapping */
			  { { { "b", "main" }, { 5, 50 } }, { { "c", "main" }, { 1, 1 } } } };
	char err[256];
	struct pprof_profile *p = merge2(&a, &b, 0, err, sizeof(err));
	size_t i;

	assert_int_equal(p->n_samples, 3);
	assert_int_equal(p->n_mappings, 1);
	assert_int_equal(p->mappings[0].memory_start, 0x400000);
	assert_int_equal(p->n_locations, 4); /* a, b, c, main */
	assert_int_equal(p->n_functions, 4);
	for (i = 0; i < p->n_samples; i++) {
		const char *f = leaf(p, &p->samples[i]);

		if (!strcmp(f, "b")) {
			assert_int_equal(p->samples[i].values[0], 7);
			assert_int_equal(p->samples[i].values[1], 70);
			assert_int_equal(p->locations[p->samples[i].location_ids[0] - 1].address,
					 0x400000 + 0x100 * 'b');
		}
	}
	assert_int_equal(p->time_nanos, 300);     /* earliest */
	assert_int_equal(p->duration_nanos, 12);  /* summed */
	assert_int_equal(p->period, 30);          /* maximum */
	assert_int_equal(p->n_comments, 1);       /* de-duplicated */
	assert_string_equal(pprof_str(p, p->comments[0]), "c1");
	pprof_profile__free(p);
}

static void labels_keep_samples_apart(void **state)
{
	struct spec a = { { "samples/count" }, NULL, 0, 0, 0, NULL, 0,
			  { { { "a" }, { 1 }, "k=v", "z=1" }, { { "a" }, { 1 }, "k=w" } } };
	struct spec b = { { "samples/count" }, NULL, 0, 0, 0, NULL, 0,
			  { { { "a" }, { 4 }, "z=1", "k=v" }, { { "a" }, { 8 } } } };
	char err[256];
	struct pprof_profile *p = merge2(&a, &b, 0, err, sizeof(err));
	int64_t seen = 0;
	size_t i;

	assert_int_equal(p->n_samples, 3);
	for (i = 0; i < p->n_samples; i++) {
		const struct pprof_sample *s = &p->samples[i];

		if (s->n_labels == 2) /* same labels in another order: one sample */
			assert_int_equal(s->values[0], 5);
		seen += s->values[0];
	}
	assert_int_equal(seen, 14);
	pprof_profile__free(p);
}

static void common_sample_types_are_kept(void **state)
{
	struct spec a = { { "samples/count", "cpu/nanoseconds" }, NULL, 0, 0, 0, NULL, 0,
			  { { { "a" }, { 1, 10 } }, { { "z" }, { 3, 0 } } } };
	struct spec b = { { "cpu/nanoseconds" }, NULL, 0, 0, 0, NULL, 0,
			  { { { "a" }, { 5 } } } };
	char err[256];
	struct pprof_profile *p = merge2(&a, &b, 0, err, sizeof(err));

	assert_int_equal(p->n_sample_type, 1);
	assert_string_equal(pprof_str(p, p->sample_type[0].type), "cpu");
	/* z's only kept value is 0: the sample and its location and function are dropped. */
	assert_int_equal(p->n_samples, 1);
	assert_int_equal(p->samples[0].values[0], 15);
	assert_int_equal(p->n_locations, 1);
	assert_int_equal(p->n_functions, 1);
	pprof_profile__free(p);
}

static void incompatible_profiles_are_refused(void **state)
{
	struct spec cpu = { { "samples/count", "cpu/nanoseconds" }, "cpu/nanoseconds", 1, 0, 0,
			    NULL, 0, { { { "a" }, { 1, 1 } } } };
	struct spec heap = { { "alloc_space/bytes", "inuse_space/bytes" }, "space/bytes", 1, 0,
			     0, NULL, 0, { { { "a" }, { 1, 1 } } } };
	struct spec ms = { { "cpu/milliseconds" }, "cpu/nanoseconds", 1, 0, 0, NULL, 0,
			   { { { "a" }, { 1 } } } };
	struct spec period = { { "cpu/nanoseconds" }, "wall/nanoseconds", 1, 0, 0, NULL, 0,
			       { { { "a" }, { 1 } } } };
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *p, *out;
	char err[256];

	merge2(&cpu, &heap, -EINVAL, err, sizeof(err));
	assert_non_null(strstr(err, "samples,cpu profiles cannot be combined with "
				    "alloc_space,inuse_space profiles"));
	merge2(&cpu, &ms, -EINVAL, err, sizeof(err));
	assert_non_null(strstr(err, "sample type cpu is in nanoseconds in one profile and in "
				    "milliseconds in another"));
	merge2(&cpu, &period, -EINVAL, err, sizeof(err));
	assert_non_null(strstr(err, "incompatible period types cpu/nanoseconds and "
				    "wall/nanoseconds"));

	/* A refused input changes nothing: the merger goes on. */
	p = make(&cpu);
	assert_int_equal(pprof_merger__add(m, p, err, sizeof(err)), 0);
	pprof_profile__free(p);
	p = make(&heap);
	assert_int_equal(pprof_merger__add(m, p, err, sizeof(err)), -EINVAL);
	pprof_profile__free(p);
	p = make(&cpu);
	assert_int_equal(pprof_merger__add(m, p, err, sizeof(err)), 0);
	pprof_profile__free(p);
	assert_int_equal(pprof_merger__finish(m, &out, err, sizeof(err)), 0);
	assert_int_equal(out->n_sample_type, 2);
	assert_int_equal(out->samples[0].values[1], 2);
	pprof_profile__free(out);
	pprof_merger__free(m);

	m = pprof_merger__new();
	assert_int_equal(pprof_merger__finish(m, &out, err, sizeof(err)), -EINVAL);
	assert_null(out);
	pprof_merger__free(m);
	pprof_merger__free(NULL);
}

/* Memory follows unique stacks: merging the same profile many times adds no samples. */
static void repeated_input_does_not_grow(void **state)
{
	struct spec a = { { "samples/count" }, NULL, 0, 0, 0, NULL, 0x1000,
			  { { { "a", "m" }, { 1 } }, { { "b", "m" }, { 2 } } } };
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *p = make(&a), *out;
	struct pprof_buf buf = { 0 };
	char err[256];
	int i;

	for (i = 0; i < 1000; i++)
		assert_int_equal(pprof_merger__add(m, p, err, sizeof(err)), 0);
	assert_int_equal(pprof_merger__finish(m, &out, err, sizeof(err)), 0);
	assert_int_equal(out->n_samples, 2);
	assert_int_equal(out->n_locations, 3);
	assert_int_equal(out->samples[0].values[0] + out->samples[1].values[0], 3000);
	/* The result is a valid profile. */
	assert_int_equal(pprof_write_profile(out, NULL, pprof_buf_write, &buf), 0);
	pprof_profile__free(out);
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &out, err, sizeof(err)), 0);
	assert_int_equal(out->n_samples, 2);
	pprof_profile__free(out);
	pprof_profile__free(p);
	pprof_merger__free(m);
	free(buf.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(identical_stacks_sum),
		cmocka_unit_test(labels_keep_samples_apart),
		cmocka_unit_test(common_sample_types_are_kept),
		cmocka_unit_test(incompatible_profiles_are_refused),
		cmocka_unit_test(repeated_input_does_not_grow),
	};

	return cmocka_run_group_tests_name("pprof-merge", tests, NULL, NULL);
}
