// SPDX-License-Identifier: MIT
/* agent/procmaps.c — see procmaps.h. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/procmaps.h"

/* The file behind a mapping, seen through the process's root when it lives (containers). */
static void map_build_id(uint32_t pid, struct procmap *m)
{
	char p[PROCMAP_PATH + 32];

	m->build_id[0] = 0;
	if (m->path[0] != '/')
		return;
	snprintf(p, sizeof(p), "/proc/%u/root%s", pid, m->path);
	if (pid == 0 || elf__build_id(p, m->build_id, sizeof(m->build_id)) != 0)
		elf__build_id(m->path, m->build_id, sizeof(m->build_id));
}

/* One maps line: an executable, file-backed (or vDSO) mapping into m; false otherwise. */
static bool parse_line(char *line, uint32_t pid, struct procmap *m)
{
	uint64_t start, end, off;
	char perms[8];
	int pos = 0;
	char *path;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*u %n", &start, &end, perms,
		   &off, &pos) < 4 ||
	    !pos || strlen(perms) < 3 || perms[2] != 'x')
		return false;
	path = line + pos;
	path[strcspn(path, "\n")] = 0;
	if (!strcmp(path, "[vsyscall]"))
		return false;
	*m = (struct procmap){.start = start, .limit = end, .offset = off};
	snprintf(m->path, sizeof(m->path), "%s", path);
	map_build_id(pid, m);
	return true;
}

static struct procmaps *procmaps_alloc(uint32_t pid, unsigned int max_maps)
{
	struct procmaps *pm = calloc(1, sizeof(*pm) + max_maps * sizeof(struct procmap));

	if (pm)
		pm->pid = pid;
	return pm;
}

/* Gives back the room of the mappings not used: a cached process costs what it maps. */
static struct procmaps *procmaps_shrink(struct procmaps *pm)
{
	struct procmaps *small = realloc(pm, sizeof(*pm) + pm->n * sizeof(struct procmap));

	return small ? small : pm;
}

int procmaps__parse_file(const char *maps_path, uint32_t pid, unsigned int max_maps,
			 struct procmaps **out)
{
	struct procmaps *pm;
	char line[PROCMAP_PATH + 128];
	FILE *f;

	*out = NULL;
	f = fopen(maps_path, "re");
	if (!f)
		return -errno;
	pm = procmaps_alloc(pid, max_maps);
	if (!pm) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f) && pm->n < max_maps)
		if (parse_line(line, pid, &pm->maps[pm->n]))
			pm->n++;
	fclose(f);
	*out = procmaps_shrink(pm);
	return 0;
}

int procmaps__parse_text(const char *text, uint32_t pid, unsigned int max_maps,
			 struct procmaps **out)
{
	struct procmaps *pm = procmaps_alloc(pid, max_maps);
	char line[PROCMAP_PATH + 128];

	*out = NULL;
	if (!pm)
		return -ENOMEM;
	while (*text && pm->n < max_maps) {
		size_t n = strcspn(text, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)n, text);
		if (parse_line(line, pid, &pm->maps[pm->n]))
			pm->n++;
		text += n + (text[n] == '\n');
	}
	*out = procmaps_shrink(pm);
	return 0;
}

size_t procmaps__exec_lines(const char *text, char *out, size_t max)
{
	size_t len = 0;

	while (*text) {
		size_t n = strcspn(text, "\n");
		const char *sp = memchr(text, ' ', n);

		if (sp && (size_t)(sp - text) + 3 < n && sp[3] == 'x' && len + n + 2 <= max) {
			memcpy(out + len, text, n);
			len += n;
			out[len++] = '\n';
		}
		text += n + (text[n] == '\n');
	}
	if (len < max)
		out[len] = 0;
	return len;
}

int procmaps__read(uint32_t pid, unsigned int max_maps, struct procmaps **out)
{
	char path[64];

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/maps");
	else
		snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	return procmaps__parse_file(path, pid ? pid : (uint32_t)getpid(), max_maps, out);
}

const struct procmap *procmaps__find(const struct procmaps *pm, uint64_t addr)
{
	for (unsigned int i = 0; pm && i < pm->n; i++)
		if (addr >= pm->maps[i].start && addr < pm->maps[i].limit)
			return &pm->maps[i];
	return NULL;
}

void procmaps__free(struct procmaps *pm)
{
	free(pm);
}

struct proc_slot {
	struct procmaps *pm;
	uint64_t last_used; /* round number */
	uint64_t refreshed; /* round of the last re-read */
};

struct proctab {
	unsigned int max_procs, max_maps;
	struct proc_slot *slots;
	uint64_t round;
	struct proctab_stats st;
};

struct proctab *proctab__new(unsigned int max_procs, unsigned int max_maps)
{
	struct proctab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->max_procs = max_procs;
	t->max_maps = max_maps;
	t->slots = calloc(max_procs, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	t->round = 1;
	return t;
}

void proctab__free(struct proctab *t)
{
	if (!t)
		return;
	for (unsigned int i = 0; i < t->max_procs; i++)
		procmaps__free(t->slots[i].pm);
	free(t->slots);
	free(t);
}

static struct proc_slot *proctab_find(struct proctab *t, uint32_t pid)
{
	for (unsigned int i = 0; i < t->max_procs; i++)
		if (t->slots[i].pm && t->slots[i].pm->pid == pid)
			return &t->slots[i];
	return NULL;
}

static int proctab_load(struct proctab *t, uint32_t pid, struct proc_slot **out)
{
	struct proc_slot *s = proctab_find(t, pid), *victim = NULL;
	struct procmaps *pm;
	int err = procmaps__read(pid, t->max_maps, &pm);

	if (err)
		return err;
	t->st.reads++;
	if (!s) {
		for (unsigned int i = 0; i < t->max_procs && !s; i++) {
			if (!t->slots[i].pm)
				s = &t->slots[i];
			else if (!victim || t->slots[i].last_used < victim->last_used)
				victim = &t->slots[i];
		}
		if (!s) {
			s = victim;
			procmaps__free(s->pm);
			t->st.evicted++;
		}
	} else {
		procmaps__free(s->pm);
		t->st.refreshes++;
	}
	s->pm = pm;
	s->last_used = s->refreshed = t->round;
	*out = s;
	return 0;
}

void proctab__adopt(struct proctab *t, struct procmaps *pm)
{
	struct proc_slot *s = proctab_find(t, pm->pid), *victim = NULL;

	if (s) {
		procmaps__free(pm);
		return;
	}
	for (unsigned int i = 0; i < t->max_procs && !s; i++) {
		if (!t->slots[i].pm)
			s = &t->slots[i];
		else if (!victim || t->slots[i].last_used < victim->last_used)
			victim = &t->slots[i];
	}
	if (!s) {
		s = victim;
		procmaps__free(s->pm);
		t->st.evicted++;
	}
	s->pm = pm;
	s->last_used = s->refreshed = t->round;
}

int proctab__touch(struct proctab *t, uint32_t pid)
{
	struct proc_slot *s = proctab_find(t, pid);

	if (s) {
		s->last_used = t->round;
		return 0;
	}
	return proctab_load(t, pid, &s);
}

const struct procmap *proctab__resolve(struct proctab *t, uint32_t pid, uint64_t addr)
{
	struct proc_slot *s = proctab_find(t, pid);
	const struct procmap *m = NULL;

	if (s) {
		s->last_used = t->round;
		m = procmaps__find(s->pm, addr);
		if (m || s->refreshed == t->round)
			goto out;
	}
	if (proctab_load(t, pid, &s) == 0)
		m = procmaps__find(s->pm, addr);
out:
	if (!m)
		t->st.unknown_addr++;
	return m;
}

void proctab__new_round(struct proctab *t)
{
	for (unsigned int i = 0; i < t->max_procs; i++) {
		struct proc_slot *s = &t->slots[i];

		if (s->pm && s->last_used < t->round && kill((pid_t)s->pm->pid, 0) < 0 &&
		    errno == ESRCH) {
			procmaps__free(s->pm);
			s->pm = NULL;
		}
	}
	t->round++;
}

void proctab__stats(const struct proctab *t, struct proctab_stats *st)
{
	*st = t->st;
	st->procs = 0;
	for (unsigned int i = 0; i < t->max_procs; i++)
		st->procs += t->slots[i].pm != NULL;
}
