// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elf.h"
#include "port/file.h"
#include "port/log.h"
#include "pprof/symbolize.h"
#include "store/symbols/debuginfo.h"
#include "store/symbols/dwarf-line.h"

#define CACHE_SLOTS 64

struct cached_syms {
	char build_id[81];
	struct elf_syms *syms;	/* NULL: the file has no symbols (remembered, not retried) */
	struct dwarf_lines *lines; /* NULL: no usable line table; names only */
	uint64_t last_use;
};

struct debuginfo {
	char dir[PATH_MAX - 320]; /* room for "/" + a file name */
	uint64_t max_total, total;
	size_t cache_bytes, cached_bytes;
	uint64_t clock;
	struct cached_syms cache[CACHE_SLOTS];
	struct debuginfo_stats st;
	char **copies; /* names of tables read at lookup (too big to hold), until symbolized */
	size_t n_copies, cap_copies;
	pthread_mutex_t lock;
};

bool debuginfo__valid_build_id(const char *id)
{
	size_t n = strspn(id, "0123456789abcdef");

	return n >= 2 && n <= 80 && !id[n];
}

static int add_to_total(void *ctx, const char *build_id, uint64_t size)
{
	struct debuginfo *d = ctx;

	(void)build_id;
	d->total += size;
	return 0;
}

static int scan_total(struct debuginfo *d)
{
	int n;

	d->total = 0;
	n = debuginfo__list(d, add_to_total, d);
	if (n < 0)
		return n;
	d->st.files = (uint64_t)n;
	return 0;
}

struct debuginfo *debuginfo__open(const struct debuginfo_opts *o, char *err, size_t errlen)
{
	struct debuginfo *d = calloc(1, sizeof(*d));
	int ret;

	if (!d) {
		snprintf(err, errlen, "debuginfo: out of memory");
		return NULL;
	}
	if (snprintf(d->dir, sizeof(d->dir), "%s", o->dir) >= (int)sizeof(d->dir)) {
		snprintf(err, errlen, "debuginfo: directory name too long");
		free(d);
		return NULL;
	}
	d->max_total = o->max_total ? o->max_total
				    : (uint64_t)CONFIG_COLLECTOR_DEBUGINFO_TOTAL_MB << 20;
	d->cache_bytes = o->cache_bytes ? o->cache_bytes
					: (size_t)CONFIG_COLLECTOR_SYMBOL_CACHE_MB << 20;
	pthread_mutex_init(&d->lock, NULL);
	ret = port_mkdir_p(d->dir, 0750);
	if (ret) {
		snprintf(err, errlen, "debuginfo: %s: cannot create it: %s", d->dir, strerror(-ret));
		goto fail;
	}
	ret = scan_total(d);
	if (ret) {
		snprintf(err, errlen, "debuginfo: %s: %s", d->dir, strerror(-ret));
		goto fail;
	}
	return d;
fail:
	pthread_mutex_destroy(&d->lock);
	free(d);
	return NULL;
}

static size_t cached_size(const struct cached_syms *c)
{
	return (c->syms ? elf_syms__bytes(c->syms) : 0) + dwarf_lines__bytes(c->lines);
}

static void cache_drop(struct debuginfo *d, struct cached_syms *c)
{
	d->cached_bytes -= cached_size(c);
	elf_syms__free(c->syms);
	dwarf_lines__free(c->lines);
	memset(c, 0, sizeof(*c));
}

void debuginfo__free(struct debuginfo *d)
{
	if (!d)
		return;
	for (int i = 0; i < CACHE_SLOTS; i++)
		cache_drop(d, &d->cache[i]);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static struct cached_syms *cache_find(struct debuginfo *d, const char *build_id)
{
	for (int i = 0; i < CACHE_SLOTS; i++)
		if (d->cache[i].build_id[0] && !strcmp(d->cache[i].build_id, build_id))
			return &d->cache[i];
	return NULL;
}

int debuginfo__put(struct debuginfo *d, const char *build_id, const void *data, size_t len,
		   char *err, size_t errlen)
{
	char tmp[PATH_MAX], path[PATH_MAX], got[ELF_BUILD_ID_HEX];
	struct stat old;
	uint64_t old_size = 0;
	int ret;

	err[0] = '\0';
	if (!debuginfo__valid_build_id(build_id)) {
		snprintf(err, errlen, "build-id must be 2..80 lowercase hex digits");
		return -EINVAL;
	}
	if (len < 16 || memcmp(data, "\177ELF", 4)) {
		snprintf(err, errlen, "not an ELF file");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", d->dir, build_id);
	snprintf(tmp, sizeof(tmp), "%s/.upload-%s", d->dir, build_id);
	pthread_mutex_lock(&d->lock);
	if (!stat(path, &old))
		old_size = (uint64_t)old.st_size;
	if (d->total - old_size + len > d->max_total) {
		pthread_mutex_unlock(&d->lock);
		snprintf(err, errlen, "debug-file store full (%llu of %llu bytes used)",
			 (unsigned long long)d->total, (unsigned long long)d->max_total);
		d->st.rejected++;
		return -EDQUOT;
	}
	/* Written under a temporary name and checked there: a bad upload never replaces a file. */
	ret = port_file_write_atomic(tmp, data, len, 0640);
	if (!ret) {
		ret = elf__build_id(tmp, got, sizeof(got));
		if (ret == -ENOENT || (!ret && strcmp(got, build_id))) {
			snprintf(err, errlen, ret ? "the ELF file has no GNU build-id note"
						  : "the file's build-id is %s, not %s", got, build_id);
			ret = -EINVAL;
		} else if (ret) {
			snprintf(err, errlen, "not a readable ELF file: %s", strerror(-ret));
			ret = -EINVAL;
		}
	}
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		d->st.rejected++;
		if (!err[0])
			snprintf(err, errlen, "storing the debug file: %s", strerror(-ret));
	} else {
		struct cached_syms *c = cache_find(d, build_id);

		if (c)
			cache_drop(d, c); /* a replaced file must be read again */
		d->total = d->total - old_size + len;
		d->st.files += old_size ? 0 : 1;
		d->st.uploads++;
		port_fsync_parent_dir(path);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int debuginfo__list(struct debuginfo *d,
		    int (*cb)(void *ctx, const char *build_id, uint64_t size), void *ctx)
{
	DIR *dir = opendir(d->dir);
	struct dirent *e;
	int n = 0, ret;

	if (!dir)
		return -errno;
	while ((e = readdir(dir))) {
		char path[PATH_MAX];
		struct stat sb;

		if (!debuginfo__valid_build_id(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", d->dir, e->d_name);
		if (stat(path, &sb) || !S_ISREG(sb.st_mode))
			continue;
		ret = cb(ctx, e->d_name, (uint64_t)sb.st_size);
		if (ret < 0) {
			closedir(dir);
			return ret;
		}
		n++;
	}
	closedir(dir);
	return n;
}

/* Makes room for need bytes: least recently used tables go first. Called locked. */
static struct cached_syms *cache_slot(struct debuginfo *d, size_t need)
{
	struct cached_syms *free_slot = NULL;

	for (;;) {
		struct cached_syms *lru = NULL;

		for (int i = 0; i < CACHE_SLOTS; i++) {
			struct cached_syms *c = &d->cache[i];

			if (!c->build_id[0])
				free_slot = free_slot ? free_slot : c;
			else if (!lru || c->last_use < lru->last_use)
				lru = c;
		}
		if (free_slot && d->cached_bytes + need <= d->cache_bytes)
			return free_slot;
		if (!lru)
			return free_slot;
		cache_drop(d, lru);
		d->st.cache_evictions++;
	}
}

/*
 * The line table of a debug file, within what the cache has left after its symbols. A bad one
 * is counted and logged once (the entry is cached): its functions keep their names.
 */
static struct dwarf_lines *lines_load(struct debuginfo *d, const char *build_id,
				      const char *path, size_t syms_bytes)
{
	struct dwarf_lines *lines = NULL;
	char err[256] = "";
	int ret;

	if (syms_bytes >= d->cache_bytes)
		return NULL;
	ret = dwarf_lines__load(path, d->cache_bytes - syms_bytes, &lines, err, sizeof(err));
	if (ret == -ENOENT)
		return NULL;
	if (ret) {
		d->st.line_errors++;
		pr_warn("debuginfo: %s: no file:line, names only: %s", build_id, err);
		return NULL;
	}
	d->st.line_tables++;
	return lines;
}

/* The cached tables of build_id, loading them on first use; NULL without a file. Locked. */
int debuginfo__file(struct debuginfo *d, const char *build_id, char *path, size_t len)
{
	if (!debuginfo__valid_build_id(build_id))
		return -EINVAL;
	snprintf(path, len, "%s/%s", d->dir, build_id);
	return access(path, R_OK) ? -ENOENT : 0;
}

static const struct cached_syms *entry_for(struct debuginfo *d, const char *build_id)
{
	struct cached_syms *c = cache_find(d, build_id);
	struct elf_syms *syms = NULL;
	struct dwarf_lines *lines;
	char path[PATH_MAX];

	if (c) {
		c->last_use = ++d->clock;
		d->st.cache_hits++;
		return c;
	}
	if (!debuginfo__valid_build_id(build_id))
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", d->dir, build_id);
	if (access(path, R_OK))
		return NULL;
	if (elf_syms__load(path, d->cache_bytes, &syms))
		pr_warn("debuginfo: %s has no usable symbol table", build_id);
	lines = syms ? lines_load(d, build_id, path, elf_syms__bytes(syms)) : NULL;
	d->st.cache_loads++;
	c = cache_slot(d, (syms ? elf_syms__bytes(syms) : 0) + dwarf_lines__bytes(lines));
	if (!c) {
		elf_syms__free(syms);
		dwarf_lines__free(lines);
		return NULL;
	}
	snprintf(c->build_id, sizeof(c->build_id), "%s", build_id);
	c->syms = syms;
	c->lines = lines;
	c->last_use = ++d->clock;
	d->cached_bytes += cached_size(c);
	return c;
}

static const struct elf_syms *syms_for(struct debuginfo *d, const char *build_id)
{
	const struct cached_syms *c = entry_for(d, build_id);

	return c ? c->syms : NULL;
}

/*
 * name as it may be kept until pprof_symbolize() returns: a table too big to hold (its names
 * are read at lookup, into one buffer) gives a copy, freed by copies_free(). NULL: no memory.
 */
static const char *stable_name(struct debuginfo *d, const struct elf_syms *syms, const char *name)
{
	if (elf_syms__names_stable(syms))
		return name;
	if (d->n_copies == d->cap_copies) {
		size_t cap = d->cap_copies ? 2 * d->cap_copies : 256;
		char **c = realloc(d->copies, cap * sizeof(*c));

		if (!c)
			return NULL;
		d->copies = c;
		d->cap_copies = cap;
	}
	name = strdup(name);
	if (name)
		d->copies[d->n_copies++] = (char *)name;
	return name;
}

static void copies_free(struct debuginfo *d)
{
	for (size_t i = 0; i < d->n_copies; i++)
		free(d->copies[i]);
	free(d->copies);
	d->copies = NULL;
	d->n_copies = d->cap_copies = 0;
}

static bool resolve(void *ctx, const struct pprof_profile *p, const struct pprof_mapping *m,
		    uint64_t address, struct pprof_resolved *out)
{
	struct debuginfo *d = ctx;
	const struct cached_syms *c;
	/* A file offset, as /proc/<pid>/maps arithmetic gives it: what elf_syms wants. */
	uint64_t off = address - m->memory_start + m->file_offset, vaddr;
	uint32_t line;

	if (!m->build_id || address < m->memory_start)
		return false;
	c = entry_for(d, pprof_str(p, m->build_id));
	if (!c || !c->syms)
		return false;
	out->function = elf_syms__lookup(c->syms, off, NULL);
	if (!out->function || !(out->function = stable_name(d, c->syms, out->function)))
		return false;
	vaddr = elf_syms__vaddr(c->syms, off);
	if (vaddr && dwarf_lines__lookup(c->lines, vaddr, &out->filename, &line))
		out->line = line;
	return true;
}

/* Under d->lock. */
static bool names_any(struct debuginfo *d, const struct pprof_profile *p)
{
	for (size_t i = 0; i < p->n_mappings; i++)
		if (p->mappings[i].build_id && !p->mappings[i].has_functions &&
		    syms_for(d, pprof_str(p, p->mappings[i].build_id)))
			return true;
	return false;
}

bool debuginfo__names_any(struct debuginfo *d, const struct pprof_profile *p)
{
	bool any;

	if (!d)
		return false;
	pthread_mutex_lock(&d->lock);
	any = names_any(d, p);
	pthread_mutex_unlock(&d->lock);
	return any;
}

int debuginfo__symbolize(struct debuginfo *d, const struct pprof_profile *p,
			 struct pprof_profile **out, size_t *n_resolved)
{
	bool any = false;
	size_t n = 0;
	int ret;

	*out = NULL;
	if (n_resolved)
		*n_resolved = 0;
	if (!d)
		return 0;
	pthread_mutex_lock(&d->lock);
	/* Cheap check first: most queries touch no build-id that has a debug file. */
	any = names_any(d, p);
	ret = any ? pprof_symbolize(p, resolve, d, out, &n) : 0;
	copies_free(d);
	pthread_mutex_unlock(&d->lock);
	if (!ret && out && *out && !n) {
		pprof_profile__free(*out);
		*out = NULL;
	}
	if (n_resolved)
		*n_resolved = n;
	return ret;
}

void debuginfo__stats(struct debuginfo *d, struct debuginfo_stats *st)
{
	pthread_mutex_lock(&d->lock);
	*st = d->st;
	st->bytes = d->total;
	pthread_mutex_unlock(&d->lock);
}
