// SPDX-License-Identifier: MIT
/* pprof/view/stacks.c — profile samples as root-first stacks of named frames. */
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/view/stacks.h"

struct loc_info {
	size_t first, n;    /* frames[first .. first+n), innermost (leaf-most) first */
	bool prune;	    /* drop_frames matched the outermost line: drop the location */
	bool prune_beneath; /* drop_frames matched a line: drop what this location calls */
};

struct stacks {
	const struct pprof_profile *p;
	struct loc_info *locs; /* by location index */
	struct stack_frame *frames;
	size_t n_frames;
	char *text; /* names and modules made here, NUL-separated */
	size_t text_len, text_cap;
	size_t truncated;
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Appends a string to s->text; returns its offset or (size_t)-1 without memory. */
static size_t text_add(struct stacks *s, const char *str, size_t len)
{
	char *nt;
	size_t cap;

	if (s->text_len + len + 1 > s->text_cap) {
		cap = s->text_cap ? s->text_cap * 2 : 4096;
		while (cap < s->text_len + len + 1)
			cap *= 2;
		nt = realloc(s->text, cap);
		if (!nt)
			return (size_t)-1;
		s->text = nt;
		s->text_cap = cap;
	}
	memcpy(s->text + s->text_len, str, len);
	s->text[s->text_len + len] = '\0';
	s->text_len += len + 1;
	return s->text_len - len - 1;
}

/*
 * The colour key of a name: Go's package ("net/http" of "net/http.(*conn).serve"), a C++
 * namespace or class ("std" of "std::sort"), else 0 (no package in the name).
 */
static size_t package_len(const char *name)
{
	const char *slash = strrchr(name, '/'), *start = slash ? slash + 1 : name;
	const char *colons = strstr(name, "::"), *paren = strchr(name, '('), *dot;

	if (colons && (!paren || colons < paren))
		return (size_t)(colons - name);
	dot = strchr(start, '.');
	if (dot && dot > start && (!paren || dot < paren))
		return (size_t)(dot - name);
	return 0;
}

/* pprof's simplifyFunc: drop_frames regexes see names without argument lists. */
static void simplify(const char *name, char *out, size_t len)
{
	size_t n = 0;

	if (*name == '.')
		name++;
	while (name[n] && n < len - 1) {
		if (name[n] == '(' && strncmp(name + n, "(anonymous namespace)", 21) &&
		    strncmp(name + n, "operator()", 10) &&
		    !(n >= 8 && !strncmp(name + n - 8, "operator()", 10)))
			break;
		out[n] = name[n];
		n++;
	}
	out[n] = '\0';
}

static const struct pprof_function *find_function(const struct pprof_profile *p, uint64_t id)
{
	size_t i;

	if (id >= 1 && id <= p->n_functions && p->functions[id - 1].id == id)
		return &p->functions[id - 1];
	for (i = 0; i < p->n_functions; i++) /* ids are dense after pprof_read; be lenient */
		if (p->functions[i].id == id)
			return &p->functions[i];
	return NULL;
}

static const struct pprof_mapping *find_mapping(const struct pprof_profile *p, uint64_t id)
{
	size_t i;

	if (id >= 1 && id <= p->n_mappings && p->mappings[id - 1].id == id)
		return &p->mappings[id - 1];
	for (i = 0; i < p->n_mappings; i++)
		if (p->mappings[i].id == id)
			return &p->mappings[i];
	return NULL;
}

/* Module of a frame whose name has no package: the mapping's file name. */
static const char *mapping_module(const struct pprof_profile *p, const struct pprof_mapping *m)
{
	return m ? base_name(pprof_str(p, m->filename)) : "";
}

static const char *const runtime_names[STACK_RT_N] = {"native", "kernel", "python", "lua",
							"jit"};

const char *stacks__runtime_name(enum stack_runtime rt)
{
	return rt < STACK_RT_N ? runtime_names[rt] : runtime_names[STACK_RT_NATIVE];
}

enum stack_runtime stacks__runtime_of(const char *filename)
{
	const char *base = base_name(filename);
	size_t n = strlen(base);

	if (!strncmp(filename, "[python", 7))
		return STACK_RT_PYTHON;
	if (!strncmp(filename, "[lua", 4))
		return STACK_RT_LUA;
	if (!strncmp(filename, "[kernel", 7))
		return STACK_RT_KERNEL;
	if (!strcmp(filename, "[jit]") || !strcmp(filename, "[javascript]") || /* V8's (bpf/v8.h) */
	    (!strncmp(base, "perf-", 5) && n > 9 && !strcmp(base + n - 4, ".map")))
		return STACK_RT_JIT;
	return STACK_RT_NATIVE;
}

/* Offsets into s->text of made names (NO_TEXT: none), turned into pointers once text is final. */
#define NO_TEXT ((size_t)-1)
struct frame_text {
	size_t name, module;
};

static bool drop_matches(const char *name, regex_t *drop, regex_t *keep)
{
	char buf[1024];

	if (!drop || !*name)
		return false;
	simplify(name, buf, sizeof(buf));
	return !regexec(drop, buf, 0, NULL, 0) && (!keep || regexec(keep, buf, 0, NULL, 0));
}

static const char *function_name(const struct pprof_profile *p, const struct pprof_location *loc,
				 size_t j)
{
	const struct pprof_function *fn;
	const char *name;

	if (j >= loc->n_lines)
		return "";
	fn = find_function(p, loc->lines[j].function_id);
	if (!fn)
		return "";
	name = pprof_str(p, fn->name);
	return *name ? name : pprof_str(p, fn->system_name);
}

/*
 * A frame without a name: its module and offset in the module's file (libc.so.6+0x27249, as
 * perf shows it and `addr2line -e` takes it for a shared object or a PIE), the same on every
 * run and device with that build, where the absolute address moves with ASLR. An address
 * outside its mapping, or without one, stays absolute. The Location keeps its address.
 */
static void unnamed_frame(char *buf, size_t size, const struct pprof_location *loc,
			  const struct pprof_mapping *m, const char *mfile)
{
	if (m && *mfile && loc->address >= m->memory_start && loc->address < m->memory_limit)
		snprintf(buf, size, "%s+0x%" PRIx64, base_name(mfile),
			 loc->address - m->memory_start + m->file_offset);
	else if (*mfile)
		snprintf(buf, size, "0x%" PRIx64 " (%s)", loc->address, base_name(mfile));
	else
		snprintf(buf, size, "0x%" PRIx64, loc->address);
}

/* Frames of one location; names the profile does not hold are made in s->text. */
static int resolve_location(struct stacks *s, struct frame_text *ft, size_t li, regex_t *drop,
			    regex_t *keep)
{
	const struct pprof_profile *p = s->p;
	const struct pprof_location *loc = &p->locations[li];
	const struct pprof_mapping *m = loc->mapping_id ? find_mapping(p, loc->mapping_id) : NULL;
	const char *mfile = m ? pprof_str(p, m->filename) : "";
	struct loc_info *info = &s->locs[li];
	uint8_t runtime = (uint8_t)stacks__runtime_of(mfile);
	char buf[512];
	size_t j, plen;

	info->first = s->n_frames;
	info->n = loc->n_lines ? loc->n_lines : 1;
	for (j = 0; j < info->n; j++) {
		struct stack_frame *f = &s->frames[s->n_frames];
		struct frame_text *t = &ft[s->n_frames++];
		const char *name = function_name(p, loc, j);

		f->inlined = j + 1 < loc->n_lines;
		f->name = name;
		f->module = mapping_module(p, m);
		f->runtime = runtime;
		t->name = t->module = NO_TEXT;
		if (*name) {
			plen = package_len(name);
			if (plen && (t->module = text_add(s, name, plen)) == NO_TEXT)
				return -ENOMEM;
			continue;
		}
		unnamed_frame(buf, sizeof(buf), loc, m, mfile);
		if ((t->name = text_add(s, buf, strlen(buf))) == NO_TEXT)
			return -ENOMEM;
	}
	/* pprof's Prune: the outermost matching line decides what of the location stays. */
	for (j = info->n; j-- > 0;)
		if (drop_matches(function_name(p, loc, j), drop, keep))
			break;
	if (j != (size_t)-1) {
		info->prune_beneath = true;
		if (j == info->n - 1) {
			info->prune = true;
		} else {
			info->first += j + 1; /* keep only the callers of the matching line */
			info->n -= j + 1;
		}
	}
	return 0;
}

static void fix_text_pointers(struct stacks *s, const struct frame_text *ft)
{
	size_t i;

	for (i = 0; i < s->n_frames; i++) {
		if (ft[i].name != NO_TEXT)
			s->frames[i].name = s->text + ft[i].name;
		if (ft[i].module != NO_TEXT)
			s->frames[i].module = s->text + ft[i].module;
	}
}

static int compile(regex_t *re, const char *src, const char *what, char *err, size_t errlen)
{
	size_t n = strlen(src) + 8;
	char *pat = malloc(n);
	int rc;

	if (!pat)
		return -ENOMEM;
	snprintf(pat, n, "^(%s)$", src);
	rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
	free(pat);
	if (rc) {
		snprintf(err, errlen, "%s regex '%s' does not compile", what, src);
		return -EINVAL;
	}
	return 0;
}

struct stacks *stacks__new(const struct pprof_profile *p, char *err, size_t errlen)
{
	const char *drop_src = pprof_str(p, p->drop_frames),
		   *keep_src = pprof_str(p, p->keep_frames);
	regex_t drop, keep;
	bool has_drop = false, has_keep = false;
	struct stacks *s = calloc(1, sizeof(*s));
	struct frame_text *ft = NULL;
	size_t i, n = 0;

	if (!s)
		goto out_nomem;
	s->p = p;
	for (i = 0; i < p->n_locations; i++)
		n += p->locations[i].n_lines ? p->locations[i].n_lines : 1;
	s->locs = calloc(p->n_locations ? p->n_locations : 1, sizeof(*s->locs));
	s->frames = calloc(n ? n : 1, sizeof(*s->frames));
	if (!s->locs || !s->frames)
		goto out_nomem;
	if (*drop_src) {
		if (compile(&drop, drop_src, "drop_frames", err, errlen))
			goto out_free;
		has_drop = true;
		if (*keep_src) {
			if (compile(&keep, keep_src, "keep_frames", err, errlen))
				goto out_free;
			has_keep = true;
		}
	}
	ft = calloc(n ? n : 1, sizeof(*ft));
	if (!ft)
		goto out_nomem;
	for (i = 0; i < p->n_locations; i++)
		if (resolve_location(s, ft, i, has_drop ? &drop : NULL, has_keep ? &keep : NULL))
			goto out_nomem;
	fix_text_pointers(s, ft);
	free(ft);
	if (has_keep)
		regfree(&keep);
	if (has_drop)
		regfree(&drop);
	return s;

out_nomem:
	snprintf(err, errlen, "out of memory");
out_free:
	free(ft);
	if (has_keep)
		regfree(&keep);
	if (has_drop)
		regfree(&drop);
	stacks__free(s);
	return NULL;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	free(s->locs);
	free(s->frames);
	free(s->text);
	free(s);
}

static const struct loc_info *loc_of(const struct stacks *s, uint64_t id)
{
	const struct pprof_profile *p = s->p;
	size_t i;

	if (id >= 1 && id <= p->n_locations && p->locations[id - 1].id == id)
		return &s->locs[id - 1];
	for (i = 0; i < p->n_locations; i++)
		if (p->locations[i].id == id)
			return &s->locs[i];
	return NULL;
}

size_t stacks__sample(struct stacks *s, size_t i, const struct stack_frame **frames, size_t max)
{
	const struct pprof_sample *smp = &s->p->samples[i];
	size_t first = 0, n = 0, j, k, total = 0;
	bool user = false;

	/* pprof's Prune: from the root, the first pruned location after a user frame cuts. */
	for (j = smp->n_locations; j-- > 0;) {
		const struct loc_info *li = loc_of(s, smp->location_ids[j]);

		if (!li || (!li->prune && !li->prune_beneath)) {
			user = true;
			continue;
		}
		if (!user)
			continue;
		first = li->prune ? j + 1 : j;
		break;
	}
	for (j = first; j < smp->n_locations; j++) {
		const struct loc_info *li = loc_of(s, smp->location_ids[j]);

		total += li ? li->n : 0;
	}
	/* Too deep: skip the root-most frames, keep the leaf-most max. */
	if (total > max)
		s->truncated++;
	for (j = smp->n_locations; j-- > first;) {
		const struct loc_info *li = loc_of(s, smp->location_ids[j]);

		for (k = li ? li->n : 0; k-- > 0;) {
			if (total-- > max)
				continue;
			frames[n++] = &s->frames[li->first + k];
		}
	}
	return n;
}

size_t stacks__truncated(const struct stacks *s)
{
	return s->truncated;
}

int stacks__sample_index(const struct pprof_profile *p, const char *spec, char *err, size_t errlen)
{
	const char *dflt = pprof_str(p, p->default_sample_type);
	size_t i, off = 0;
	char *end;
	long v;

	if (!p->n_sample_type) {
		snprintf(err, errlen, "profile has no sample types");
		return -EINVAL;
	}
	if (!spec || !*spec) {
		if (!*dflt)
			return (int)p->n_sample_type - 1;
		spec = dflt;
	}
	for (i = 0; i < p->n_sample_type; i++)
		if (!strcmp(spec, pprof_str(p, p->sample_type[i].type)))
			return (int)i;
	v = strtol(spec, &end, 10);
	if (!*end && v >= 0 && (size_t)v < p->n_sample_type)
		return (int)v;
	off = (size_t)snprintf(err, errlen, "no sample type '%s'; the profile has", spec);
	for (i = 0; i < p->n_sample_type && off < errlen; i++)
		off += (size_t)snprintf(err + off, errlen - off, " %s",
					pprof_str(p, p->sample_type[i].type));
	return -EINVAL;
}

static uint64_t hash_stack(const struct pprof_sample *smp)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ smp->n_locations;
	size_t i;

	for (i = 0; i < smp->n_locations; i++) {
		h = (h ^ smp->location_ids[i]) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

static bool same_stack(const struct pprof_sample *a, const struct pprof_sample *b)
{
	return a->n_locations == b->n_locations &&
	       (!a->n_locations || !memcmp(a->location_ids, b->location_ids,
					   a->n_locations * sizeof(*a->location_ids)));
}

/* Slot table of indexes into out[] (+1; 0 = empty), rebuilt twice as large when half full. */
static int unique_grow(const struct pprof_profile *p, const struct stacks_unique *u, size_t n,
		       size_t **slots, size_t *cap)
{
	size_t nc = *cap ? *cap * 2 : 1024, i, j;
	size_t *ns = calloc(nc, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		for (j = hash_stack(&p->samples[u[i].sample]) & (nc - 1); ns[j];
		     j = (j + 1) & (nc - 1))
			;
		ns[j] = i + 1;
	}
	free(*slots);
	*slots = ns;
	*cap = nc;
	return 0;
}

int stacks__unique(const struct pprof_profile *p, int vi, struct stacks_unique **out, size_t *n)
{
	struct stacks_unique *u = NULL, *nu;
	size_t *slots = NULL, cap = 0, n_u = 0, u_cap = 0, i, j, k;
	const struct pprof_sample *smp;
	int ret = -ENOMEM;

	if (unique_grow(p, u, 0, &slots, &cap))
		goto out;
	for (i = 0; i < p->n_samples; i++) {
		smp = &p->samples[i];
		if (!smp->values[vi])
			continue;
		for (j = hash_stack(smp) & (cap - 1); (k = slots[j]); j = (j + 1) & (cap - 1))
			if (same_stack(&p->samples[u[k - 1].sample], smp))
				break;
		if (k) {
			u[k - 1].value += smp->values[vi];
			continue;
		}
		if (n_u == u_cap) {
			u_cap = u_cap ? u_cap * 2 : 256;
			nu = realloc(u, u_cap * sizeof(*u));
			if (!nu)
				goto out;
			u = nu;
		}
		u[n_u] = (struct stacks_unique){.sample = i, .value = smp->values[vi]};
		slots[j] = ++n_u;
		if (n_u * 2 > cap && unique_grow(p, u, n_u, &slots, &cap))
			goto out;
	}
	/* values that cancelled out (negative samples) leave nothing to draw */
	for (i = j = 0; i < n_u; i++)
		if (u[i].value)
			u[j++] = u[i];
	*out = u;
	*n = j;
	u = NULL;
	ret = 0;
out:
	free(u);
	free(slots);
	return ret;
}
