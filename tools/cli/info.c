// SPDX-License-Identifier: MIT
/*
 * tools/cli/info.c — `edgeprof info FILE...`: what a profile holds: sample types and totals,
 * period, time range, table sizes, labels, comments and mappings with their build-ids.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tools/cli/cli.h"
#include "pprof/view/units.h"

static void info_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof info FILE...\n"
		"\n"
		"Describes each profile (not merged): sample types with totals, the default\n"
		"type, period, time range and duration, sample/location/function/mapping/string\n"
		"counts, label keys, comments, drop_frames, and every mapping with its address\n"
		"range, file offset, file, build-id and symbol flags.\n");
}

static void print_utc(int64_t nanos)
{
	time_t secs = (time_t)(nanos / 1000000000);
	struct tm tm;
	char buf[64];

	gmtime_r(&secs, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	printf("%s.%03dZ", buf, (int)(nanos % 1000000000 / 1000000));
}

static void print_time(const struct pprof_profile *p)
{
	char dur[48];

	printf("time:           ");
	if (!p->time_nanos) {
		printf("not set");
	} else {
		print_utc(p->time_nanos);
		if (p->duration_nanos) {
			printf(" .. ");
			print_utc(p->time_nanos + p->duration_nanos);
		}
	}
	if (p->duration_nanos)
		printf(" (%s)", units__format(dur, sizeof(dur), p->duration_nanos,
					      units__auto("nanoseconds", p->duration_nanos)));
	putchar('\n');
}

static void print_types(const struct pprof_profile *p)
{
	const char *dflt = pprof_str(p, p->default_sample_type);
	int64_t total;
	size_t i, j;
	char buf[48];

	printf("sample types:\n");
	for (i = 0; i < p->n_sample_type; i++) {
		const char *type = pprof_str(p, p->sample_type[i].type);
		const char *unit = pprof_str(p, p->sample_type[i].unit);
		bool is_default = *dflt ? !strcmp(dflt, type) : i + 1 == p->n_sample_type;

		total = 0;
		for (j = 0; j < p->n_samples; j++)
			total += p->samples[j].values[i];
		printf("  %-2zu %s/%s  total %s%s\n", i, type, unit,
		       units__format(buf, sizeof(buf), total, units__auto(unit, total)),
		       is_default ? "  (default)" : "");
	}
	if (p->period || p->period_type.type)
		printf("period:         %" PRId64 " %s/%s\n", p->period,
		       pprof_str(p, p->period_type.type), pprof_str(p, p->period_type.unit));
}

/* Distinct label keys, in first-seen order (bounded: a profile has few). */
static void print_label_keys(const struct pprof_profile *p)
{
	int64_t keys[32];
	size_t n = 0, i, j, k;

	for (i = 0; i < p->n_samples; i++)
		for (j = 0; j < p->samples[i].n_labels; j++) {
			for (k = 0; k < n && keys[k] != p->samples[i].labels[j].key; k++)
				;
			if (k == n && n < 32)
				keys[n++] = p->samples[i].labels[j].key;
		}
	if (!n)
		return;
	printf("label keys:    ");
	for (k = 0; k < n; k++)
		printf(" %s", pprof_str(p, keys[k]));
	putchar('\n');
}

static void print_mappings(const struct pprof_profile *p)
{
	size_t i;

	printf("mappings:\n");
	for (i = 0; i < p->n_mappings; i++) {
		const struct pprof_mapping *m = &p->mappings[i];
		const char *bid = pprof_str(p, m->build_id);

		printf("  %-3" PRIu64 " 0x%" PRIx64 "-0x%" PRIx64 " +0x%" PRIx64
		       "  %s  build-id %s",
		       m->id, m->memory_start, m->memory_limit, m->file_offset,
		       *pprof_str(p, m->filename) ? pprof_str(p, m->filename) : "(no file)",
		       *bid ? bid : "(none)");
		if (m->has_functions || m->has_filenames || m->has_line_numbers ||
		    m->has_inline_frames)
			printf("  [%s%s%s%s]", m->has_functions ? "+functions" : "",
			       m->has_filenames ? "+files" : "",
			       m->has_line_numbers ? "+lines" : "",
			       m->has_inline_frames ? "+inlines" : "");
		putchar('\n');
	}
}

static void info_one(const char *path, const struct pprof_profile *p)
{
	struct stat st;
	size_t i, n_locs = 0, max_depth = 0;

	if (strcmp(path, "-") && !stat(path, &st))
		printf("file:           %s (%lld bytes)\n", path, (long long)st.st_size);
	else
		printf("file:           %s\n", path);
	print_types(p);
	print_time(p);
	for (i = 0; i < p->n_samples; i++) {
		n_locs += p->samples[i].n_locations;
		if (p->samples[i].n_locations > max_depth)
			max_depth = p->samples[i].n_locations;
	}
	printf("samples:        %zu (stack depth mean %.1f, max %zu)\n", p->n_samples,
	       p->n_samples ? (double)n_locs / (double)p->n_samples : 0.0, max_depth);
	printf("tables:         %zu locations, %zu functions, %zu mappings, %zu strings\n",
	       p->n_locations, p->n_functions, p->n_mappings, p->n_strings);
	print_label_keys(p);
	if (*pprof_str(p, p->drop_frames))
		printf("drop frames:    %s\n", pprof_str(p, p->drop_frames));
	if (*pprof_str(p, p->keep_frames))
		printf("keep frames:    %s\n", pprof_str(p, p->keep_frames));
	for (i = 0; i < p->n_comments; i++)
		printf("comment:        %s\n", pprof_str(p, p->comments[i]));
	if (*pprof_str(p, p->doc_url))
		printf("doc url:        %s\n", pprof_str(p, p->doc_url));
	print_mappings(p);
}

static int info_run(int argc, char **argv)
{
	struct pprof_profile *p;
	int i, ret = CLI_OK;

	if (cli_wants_help(argc, argv)) {
		info_help(stdout);
		return CLI_OK;
	}
	if (argc < 2)
		return cli_usage_error("info", "no profile given");
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) /* no options: '-' is stdin */
		if (argv[i][0] == '-' && argv[i][1])
			return cli_usage_error("info", "unrecognized option '%s'", argv[i]);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			continue;
		if (cli_load_one(argv[i], &p)) {
			ret = CLI_FAIL;
			continue;
		}
		if (i > 1)
			putchar('\n');
		info_one(argv[i], p);
		pprof_profile__free(p);
	}
	return fflush(stdout) ? CLI_FAIL : ret;
}

CLI_COMMAND(info, "what a profile holds: types, totals, time, mappings, build-ids", info_run,
	    info_help);
