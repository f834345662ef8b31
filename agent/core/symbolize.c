// SPDX-License-Identifier: MIT
/* agent/core/symbolize.c — see symbolize.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/core/symbolize.h"

#define SYM_MAX_FILES 128

struct sym_file {
	char key[PROCMAP_PATH]; /* build-id, or path */
	struct elf_syms *syms;	/* NULL: failed, remembered */
	uint64_t last_used;
};

struct symbolizer {
	size_t max_bytes, bytes;
	uint64_t clock;
	struct sym_file files[SYM_MAX_FILES];
	struct symbolizer_stats st;
};

struct symbolizer *symbolizer__new(size_t max_bytes)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (s)
		s->max_bytes = max_bytes ? max_bytes : (size_t)CONFIG_SYMBOL_CACHE_KB * 1024;
	return s;
}

static void sym_file_drop(struct symbolizer *s, struct sym_file *f)
{
	if (f->syms)
		s->bytes -= elf_syms__bytes(f->syms);
	elf_syms__free(f->syms);
	memset(f, 0, sizeof(*f));
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (int i = 0; i < SYM_MAX_FILES; i++)
		elf_syms__free(s->files[i].syms);
	free(s);
}

/* Evicts least recently used tables until need more bytes fit. */
static void make_room(struct symbolizer *s, size_t need)
{
	while (s->bytes + need > s->max_bytes) {
		struct sym_file *v = NULL;

		for (int i = 0; i < SYM_MAX_FILES; i++)
			if (s->files[i].syms && (!v || s->files[i].last_used < v->last_used))
				v = &s->files[i];
		if (!v)
			return;
		sym_file_drop(s, v);
		s->st.evictions++;
	}
}

static struct sym_file *load(struct symbolizer *s, uint32_t pid, const struct procmap *m,
			     const char *key)
{
	struct sym_file *f = NULL;
	char path[PROCMAP_PATH + 32];
	struct elf_syms *syms = NULL;
	int err;

	for (int i = 0; i < SYM_MAX_FILES; i++) {
		if (!s->files[i].key[0]) {
			f = &s->files[i];
			break;
		}
		if (!f || s->files[i].last_used < f->last_used)
			f = &s->files[i];
	}
	if (f->key[0]) {
		sym_file_drop(s, f);
		s->st.evictions++;
	}
	snprintf(path, sizeof(path), "/proc/%u/root%s", pid, m->path);
	err = pid ? elf_syms__load(path, s->max_bytes, &syms) : -ENOENT;
	if (err && err != -EFBIG)
		err = elf_syms__load(m->path, s->max_bytes, &syms);
	snprintf(f->key, sizeof(f->key), "%s", key);
	f->last_used = ++s->clock;
	if (err) {
		s->st.failed++;
		return f;
	}
	/* the table of a build-id must belong to that build-id: a replaced file is not it */
	if (m->build_id[0]) {
		char id[ELF_BUILD_ID_HEX];

		if ((elf__build_id(path, id, sizeof(id)) &&
		     elf__build_id(m->path, id, sizeof(id))) ||
		    strcmp(id, m->build_id)) {
			elf_syms__free(syms);
			s->st.failed++;
			return f;
		}
	}
	make_room(s, elf_syms__bytes(syms));
	f->syms = syms;
	s->bytes += elf_syms__bytes(syms);
	s->st.loads++;
	return f;
}

const char *symbolizer__name(struct symbolizer *s, uint32_t pid, const struct procmap *m,
			     uint64_t addr)
{
	const char *key = m->build_id[0] ? m->build_id : m->path;
	struct sym_file *f = NULL;
	const char *name;

	if (!s || m->path[0] != '/')
		return NULL;
	for (int i = 0; i < SYM_MAX_FILES && !f; i++)
		if (s->files[i].key[0] && !strcmp(s->files[i].key, key))
			f = &s->files[i];
	if (!f)
		f = load(s, pid, m, key);
	f->last_used = ++s->clock;
	name = f->syms ? elf_syms__lookup(f->syms, addr - m->start + m->offset, NULL) : NULL;
	if (name)
		s->st.hits++;
	else
		s->st.misses++;
	return name;
}

void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *st)
{
	*st = s->st;
	st->bytes = s->bytes;
}
