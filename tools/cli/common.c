// SPDX-License-Identifier: MIT
/* tools/cli/common.c — file loading, merging and output helpers shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/file.h"
#include "pprof/folded.h"
#include "tools/cli/cli.h"
#include "pprof/view/stacks.h"
#include "pprof/view/tree.h"

bool cli_wants_help(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

bool cli_usage_hinted;

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	cli_usage_hinted = true;
	fprintf(stderr, "edgeprof %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'edgeprof %s --help'.\n", cmd);
	return CLI_USAGE;
}

/* stdin has no size to ask for: read it in chunks up to CLI_MAX_FILE. */
static int read_stdin(void **data, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	unsigned char *buf = malloc(cap), *nb;
	ssize_t r;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap >= CLI_MAX_FILE) {
				free(buf);
				return -EFBIG;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(STDIN_FILENO, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*data = buf;
	*len = n;
	return 0;
}

/* Reads and decodes path ("-" = stdin) without printing: 0, or -errno with err filled. */
static int load_quiet(const char *path, struct pprof_profile **out, char *err, size_t errlen)
{
	void *data = NULL;
	size_t len = 0;
	int ret;

	*out = NULL;
	if (!strcmp(path, "-"))
		ret = read_stdin(&data, &len);
	else
		ret = port_file_read_all(path, CLI_MAX_FILE, &data, &len);
	if (ret) {
		snprintf(err, errlen, "%s", ret == -EFBIG ? "larger than 256 MiB" : strerror(-ret));
		return ret;
	}
	ret = pprof_read_any(data, len, NULL, out, err, errlen); /* pprof or folded text */
	free(data);
	if (ret && !err[0])
		snprintf(err, errlen, "%s", strerror(-ret));
	return ret;
}

int cli_load_one(const char *path, struct pprof_profile **out)
{
	char err[256] = "";
	int ret = load_quiet(path, out, err, sizeof(err));

	if (ret)
		fprintf(stderr, "edgeprof: %s: %s\n", path, err);
	return ret;
}

static int load_nth(void *ctx, size_t i, const struct pprof_budget *b, struct pprof_profile **p,
		    char *err, size_t errlen)
{
	(void)b; /* no budget: a file on the desktop */
	char *const *paths = ctx;

	return load_quiet(paths[i], p, err, errlen);
}

int cli_load(char *const *paths, size_t n, struct pprof_profile **out)
{
	struct pprof_merger *m;
	char err[256] = "";
	size_t failed = 0;
	int ret;

	*out = NULL;
	if (n == 1)
		return cli_load_one(paths[0], out);
	m = pprof_merger__new();
	if (!m) {
		fprintf(stderr, "edgeprof: out of memory\n");
		return -ENOMEM;
	}
	/* Inputs decode in parallel, merge in order: memory is the merged tables plus a window. */
	ret = pprof_merger__add_all(m, n, 0, load_nth, (void *)paths, &failed, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "edgeprof: %s: %s\n", failed < n ? paths[failed] : "merge",
			err[0] ? err : strerror(-ret));
		goto out_free_merger;
	}
	ret = pprof_merger__finish(m, out, err, sizeof(err));
	if (ret)
		fprintf(stderr, "edgeprof: merge: %s\n", err[0] ? err : strerror(-ret));
out_free_merger:
	pprof_merger__free(m);
	return ret;
}

int cli_write_profile(const struct pprof_profile *p, const char *path)
{
	/* A large output (a merge of many profiles) is deflated on every CPU. */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct pprof_builder_opts opts = { .threads = cpus > 1 ? (unsigned)cpus : 1 };
	struct pprof_buf buf = {0};
	int ret;

	ret = pprof_write_profile(p, &opts, pprof_buf_write, &buf);
	if (ret) {
		fprintf(stderr, "edgeprof: encoding: %s\n", strerror(-ret));
		goto out;
	}
	if (!strcmp(path, "-")) {
		ret = fwrite(buf.data, 1, buf.len, stdout) == buf.len && !fflush(stdout) ? 0 : -EIO;
	} else {
		ret = port_file_write_atomic(path, buf.data, buf.len, 0644);
	}
	if (ret)
		fprintf(stderr, "edgeprof: %s: %s\n", path, strerror(-ret));
out:
	free(buf.data);
	return ret;
}

FILE *cli_open_output(const char *path)
{
	FILE *f;

	if (!strcmp(path, "-"))
		return stdout;
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "edgeprof: %s: %s\n", path, strerror(errno));
	return f;
}

int cli_close_output(FILE *f, const char *path)
{
	int bad = ferror(f);

	if (f == stdout)
		bad |= fflush(f);
	else
		bad |= fclose(f);
	if (bad) {
		fprintf(stderr, "edgeprof: %s: write failed\n", path);
		return -EIO;
	}
	return 0;
}

int cli_profile_tree(const struct pprof_profile *p, const char *spec, struct ftree *t, int slot,
		     const char *cmd)
{
	struct stacks *s;
	char err[256] = "";
	int vi, ret;

	vi = stacks__sample_index(p, spec, err, sizeof(err));
	if (vi < 0) {
		fprintf(stderr, "edgeprof %s: %s\n", cmd, err);
		return vi;
	}
	s = stacks__new(p, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "edgeprof %s: %s\n", cmd, err);
		return -EINVAL;
	}
	ret = ftree__add_profile(t, s, p, vi, slot);
	if (!ret)
		ret = ftree__sort(t);
	if (ret)
		fprintf(stderr, "edgeprof %s: out of memory\n", cmd);
	if (stacks__truncated(s))
		fprintf(stderr, "edgeprof %s: %zu stacks deeper than %d frames lost their roots\n",
			cmd, stacks__truncated(s), STACKS_MAX_DEPTH);
	if (t->dropped_stacks)
		fprintf(stderr, "edgeprof %s: tree full: %zu stacks cut short\n", cmd,
			t->dropped_stacks);
	stacks__free(s);
	return ret < 0 ? ret : vi;
}
