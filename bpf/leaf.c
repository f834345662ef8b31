// SPDX-License-Identifier: MIT
/* bpf/leaf.c — the leaf frame of BPF samples by .eh_frame rules; see leaf.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf/cfi.h"
#include "elf/elf.h"
#include "bpf/leaf.h"

/*
 * Lookups in a table between two releases of its pages (elf__eh_frame_release): each lookup
 * maps its binary search's and its FDE's pages and, by fault-around, their neighbours (64
 * KiB each); kept until the second's trim, a build machine's libLLVM and libclickhouse held
 * 2-6 MiB of the agent's peak RSS (tests/bench/bpf-rss.sh). The price is the next lookup's
 * faults: beside a build (~700 lookups a second, three agents side by side) a release after
 * every lookup cost 27-37 us a lookup (+37-51% of the agent's CPU), after every fourth 7-15
 * us (+14-15%). On a device lookups are rare once its programs' leaf pcs are known.
 */
#define LEAF_RELEASE_LOOKUPS 4

/* One file's mapped unwind table; failed opens are remembered too (!ok). */
struct leaf_table {
	uint64_t key; /* 0: free */
	uint64_t used_at;
	bool ok;
	unsigned int lookups; /* since its pages were last released */
	struct elf_eh_frame eh;
	struct cfi_table cfi;  /* the mapping, in the pointer space cfi reads */
	struct cfi_fde *index; /* FDEs by pc where the file has no .eh_frame_hdr */
	size_t n_index;
};

/* A cached outcome for one file offset: packed rules, or one of the failures below. */
struct leaf_rule {
	uint64_t key, off, packed;
};

#define RULE_NO_TABLE 2 /* bit 0 clear: cfi__unpack refuses it, like CFI_PACKED_NONE */

struct leaf {
	unsigned int max_tables, max_rules, max_fdes;
	uint64_t clock;
	struct leaf_stats st;
	struct leaf_table *tables;
	struct leaf_rule *rules;
};

static void table_drop(struct leaf_table *t)
{
	if (t->eh.map)
		elf__unmap_eh_frame(&t->eh);
	free(t->index);
	memset(t, 0, sizeof(*t));
	t->eh.fd = -1;
}

/* The vDSO's table: the agent's own copy of the same image (elf__vdso_eh_frame). */
static bool vdso_table(struct leaf_table *t)
{
	if (elf__vdso_eh_frame(&t->eh))
		return false;
	t->cfi = (struct cfi_table){(uintptr_t)t->eh.seg, (uintptr_t)t->eh.seg + t->eh.seg_len,
				    t->eh.seg + t->eh.hdr_vaddr};
	return true;
}

struct leaf *leaf__new(unsigned int max_tables, unsigned int max_rules, unsigned int max_fdes)
{
	struct leaf *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->max_tables = max_tables;
	l->max_rules = max_rules;
	l->max_fdes = max_fdes;
	l->tables = calloc(max_tables, sizeof(*l->tables));
	l->rules = calloc(max_rules, sizeof(*l->rules));
	if (!l->tables || !l->rules) {
		leaf__free(l);
		return NULL;
	}
	for (unsigned int i = 0; i < max_tables; i++)
		table_drop(&l->tables[i]);
	return l;
}

void leaf__trim(struct leaf *l)
{
	for (unsigned int i = 0; l && i < l->max_tables; i++) {
		if (l->tables[i].lookups)
			elf__eh_frame_release(&l->tables[i].eh);
		l->tables[i].lookups = 0;
	}
}

void leaf__free(struct leaf *l)
{
	if (!l)
		return;
	for (unsigned int i = 0; l->tables && i < l->max_tables; i++)
		table_drop(&l->tables[i]);
	free(l->tables);
	free(l->rules);
	free(l);
}

void leaf__stats(const struct leaf *l, struct leaf_stats *st)
{
	*st = l->st;
}

/* A file by its build-id when it has one (a rewritten file gets a new one), else its path. */
static uint64_t file_key(const struct procmap *m)
{
	return procmaps__hash(m->build_id[0] ? m->build_id : m->path) | 1; /* 0: a free slot */
}

/*
 * A file without .eh_frame_hdr (a static program): its FDEs sorted once, at most max_fdes
 * (an FDE takes 20 bytes or more of .eh_frame, so its size bounds the count first).
 */
static bool table_index(struct leaf *l, struct leaf_table *t)
{
	const uint8_t *frame = t->eh.seg + (t->eh.frame_vaddr - t->eh.seg_vaddr);
	size_t max = t->eh.frame_len / 20 + 1;

	if (max > l->max_fdes)
		max = l->max_fdes;
	t->index = malloc(max * sizeof(*t->index));
	if (!t->index)
		return false;
	t->n_index = cfi__index(&t->cfi, frame, t->eh.frame_len, t->index, max);
	l->st.fdes_indexed += t->n_index;
	return t->n_index > 0;
}

/* Maps the table of m's file, seen through the process's root first (containers). */
static void table_fill(struct leaf *l, struct leaf_table *t, uint64_t key, uint32_t pid,
		       const struct procmap *m)
{
	char path[PROCMAP_PATH + 32];

	table_drop(t);
	t->key = key;
	t->used_at = ++l->clock;
	if (m->path[0] != '/') {
		t->ok = vdso_table(t);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%u/root%s", pid, m->path);
	if (elf__map_eh_frame(path, &t->eh) && elf__map_eh_frame(m->path, &t->eh))
		return;
	t->cfi = (struct cfi_table){
	    .lo = (uintptr_t)t->eh.seg,
	    .hi = (uintptr_t)t->eh.seg + t->eh.seg_len,
	    .eh_hdr = t->eh.hdr_vaddr ? t->eh.seg + (t->eh.hdr_vaddr - t->eh.seg_vaddr) : NULL,
	};
	t->ok = t->eh.hdr_vaddr || table_index(l, t);
	elf__eh_frame_release(&t->eh); /* the index read all of .eh_frame */
	l->st.tables_mapped += t->ok;
}

/* The table of m's file, mapped on first use; the least recently used one makes room. */
static struct leaf_table *table_get(struct leaf *l, uint32_t pid, const struct procmap *m,
				    uint64_t key)
{
	struct leaf_table *oldest = &l->tables[0];

	for (unsigned int i = 0; i < l->max_tables; i++) {
		struct leaf_table *t = &l->tables[i];

		if (t->key == key) {
			t->used_at = ++l->clock;
			return t;
		}
		if (t->used_at < oldest->used_at)
			oldest = t;
	}
	if (oldest->key)
		l->st.tables_evicted++;
	table_fill(l, oldest, key, pid, m);
	return oldest;
}

/* The rules at file offset off of m's file: packed, or CFI_PACKED_NONE / RULE_NO_TABLE. */
static uint64_t rules_at(struct leaf *l, uint32_t pid, const struct procmap *m, uint64_t off)
{
	uint64_t key = file_key(m);
	/*
	 * Two ways (a walk looks up a frame's rules and its callers': one slot each collided),
	 * the one used last first.
	 */
	size_t at = ((key ^ off) * 0x9E3779B97F4A7C15ull >> 32) % l->max_rules & ~(size_t)1;
	struct leaf_rule *r = &l->rules[at], *other = &l->rules[(at + 1) % l->max_rules], tmp;
	struct leaf_table *t;
	struct cfi_rules cr;
	uint64_t vaddr;
	uintptr_t pc;
	bool found;

	if (other->key == key && other->off == off && other != r) {
		tmp = *r;
		*r = *other;
		*other = tmp;
	}
	if (r->key == key && r->off == off) {
		l->st.rule_hits++;
		return r->packed;
	}
	l->st.rule_misses++;
	if (other != r)
		*other = *r; /* the older one goes */
	*r = (struct leaf_rule){.key = key, .off = off, .packed = RULE_NO_TABLE};
	t = table_get(l, pid, m, key);
	if (!t->ok)
		return r->packed;
	if (t->eh.map &&
	    !elf__eh_frame_intact(&t->eh)) { /* truncated in place: its pages may be gone */
		table_drop(t);
		return r->packed;
	}
	vaddr = elf__eh_frame_vaddr(&t->eh, off);
	pc = (uintptr_t)(vaddr - t->eh.seg_vaddr) + t->cfi.lo; /* in the mapping's pointer space */
	found = vaddr && (t->index ? cfi__rules_indexed(&t->cfi, t->index, t->n_index, pc, &cr)
				   : cfi__rules_at(&t->cfi, pc, &cr));
	if (!found || !cfi__pack(&cr, &r->packed))
		r->packed = CFI_PACKED_NONE;
	/* the rule is kept: the pages its search read (and their neighbours) are not */
	if (++t->lookups >= LEAF_RELEASE_LOOKUPS) {
		elf__eh_frame_release(&t->eh);
		t->lookups = 0;
	}
	return r->packed;
}

/*
 * Where a walk of the copied stack words is: the frame at pc, its sp and fp. Two walks take
 * the same steps and differ only in what ends them: a CPU or off-CPU sample's few words
 * (leaf__fix) end where they meet the kernel's frame-pointer walk (chain: its user frames,
 * the leaf first), a copy of the whole stack (leaf_walk) at its outermost frame.
 */
struct walk {
	uint64_t pc, sp, fp;
	bool fp_known; /* fp holds the frame's frame pointer (restored from a word, or the one
			* the sample carries) */
	bool leaf;     /* pc is the interrupted one, not a return address */
	const uint64_t *chain; /* NULL: the walk goes to the outermost frame */
	unsigned int n_chain;
	unsigned int met; /* STEP_MET: the index in chain of the return address met */
};

/* How a step (or a walk) went: STEP_RA, it stepped; the rest end a walk. */
enum step {
	STEP_RA,
	STEP_END,	 /* the outermost frame: DW_CFA_undefined return address, or 0 */
	STEP_LINKED,	 /* (chain) the frame the kernel's walk went on from: its frames are the rest */
	STEP_MET,	 /* (chain) a return address the kernel's walk found too (met) */
	STEP_NO_TABLE,	 /* no mapping with a table at pc */
	STEP_NO_RULE,	 /* no rules for pc, rules this reader does not follow, a frame to nowhere */
	STEP_BEYOND,	 /* a word beyond the copy */
	STEP_IMPLAUSIBLE, /* a return address in no executable mapping */
	STEP_DEPTH,	 /* the room for frames is full */
};

/* The copied stack word at address a. */
static bool word_at(const struct sample_user_context *u, uint64_t a, uint64_t *v)
{
	if (a < u->sp || (a - u->sp) % 8 || (a - u->sp) / 8 >= u->n_words)
		return false;
	*v = u->words[(a - u->sp) / 8];
	return true;
}

/*
 * One frame up by the rules at w->pc, looked up at pc - 1 but for the leaf (a return address
 * may be the next function's first byte): STEP_RA and w moved to the caller, or why not.
 */
static enum step step(struct leaf *l, struct proctab *t, const struct agent_sample *s,
		      struct walk *w)
{
	const struct sample_user_context *u = s->user;
	uint64_t look = w->leaf ? w->pc : w->pc - 1, packed, cfa, at, ra;
	const struct procmap *m = proctab__resolve(t, s->pid, look);
	struct cfi_rules cr;

	if (!m || (m->path[0] != '/' && strcmp(m->path, "[vdso]")))
		return STEP_NO_TABLE;
	packed = rules_at(l, s->pid, m, look - m->start + m->offset);
	if (!cfi__unpack(packed, &cr))
		return packed == RULE_NO_TABLE ? STEP_NO_TABLE : STEP_NO_RULE;
	if (cr.ra_undefined)
		return STEP_END;
	if (cr.cfa_reg == CFI_REG_FP) {
		if (w->chain && (w->leaf || (w->fp_known && w->fp == u->fp)))
			return STEP_LINKED;
		if (!w->fp_known)
			return STEP_BEYOND; /* its slot was beyond the copy */
		cfa = w->fp + (uint64_t)cr.cfa_off;
	} else if (cr.cfa_reg == CFI_CFA_PLT) {
		/* the stub pushed its relocation index from plt_min on */
		cfa = w->sp + (uint64_t)cr.cfa_off + ((w->pc & 15) >= cr.plt_min ? 8 : 0);
	} else {
		cfa = w->sp + (uint64_t)cr.cfa_off;
	}
	if (cfa < w->sp || (cfa == w->sp && !w->leaf))
		return STEP_NO_RULE; /* a frame that goes nowhere */
	if (!cr.ra_saved) { /* still in the link register: the leaf only (aarch64) */
		if (!w->leaf || !u->lr)
			return STEP_NO_RULE;
		ra = u->lr;
	} else {
		at = cfa + (uint64_t)cr.ra_off;
		/*
		 * aarch64 compilers keep the CFA on sp after linking a frame: the frame pointer
		 * says whether it is linked. If its record holds the slot of the return address,
		 * the kernel's walk read that very slot: found already, with no stack word copied.
		 */
		if (w->chain && w->leaf && u->fp && u->fp + 8 == at)
			return STEP_LINKED;
		if (!word_at(u, at, &ra))
			return STEP_BEYOND;
	}
	if (cr.fp_saved)
		w->fp_known = word_at(u, cfa + (uint64_t)cr.fp_off, &w->fp);
	if (!ra)
		return STEP_END;
	w->pc = ra;
	w->sp = cfa;
	w->leaf = false;
	return STEP_RA;
}

/* The index of ra among the kernel's user frames after the leaf, or 0. */
static unsigned int in_chain(const uint64_t *user, unsigned int n, uint64_t ra)
{
	for (unsigned int j = 1; j < n; j++)
		if (user[j] == ra)
			return j;
	return 0;
}

/*
 * The walk: the callers of the frame at w into ras (at most max, *n of them) until a step or
 * the frame it reaches ends it (enum step). A return address in no executable mapping is a
 * word misread, not a caller: it ends the walk, not taken.
 */
static enum step walk(struct leaf *l, struct proctab *t, const struct agent_sample *s,
		      struct walk *w, uint64_t *ras, unsigned int max, unsigned int *n)
{
	enum step r;

	for (*n = 0; *n < max; (*n)++) {
		r = step(l, t, s, w);
		if (r != STEP_RA)
			return r;
		if (w->chain && (w->met = in_chain(w->chain, w->n_chain, w->pc)))
			return STEP_MET;
		if (!proctab__resolve(t, s->pid, w->pc - 1))
			return STEP_IMPLAUSIBLE;
		ras[*n] = w->pc;
	}
	return STEP_DEPTH;
}

/*
 * The user stack of s walked whole from its copy (see leaf__fix); false: left as it is, where
 * code without tables (built with frame pointers, JIT) ended the walk before the kernel's
 * frame-pointer walk ended.
 */
static bool leaf_walk(struct leaf *l, struct proctab *t, const struct agent_sample *s,
		      unsigned int max_user, uint64_t *frames, struct agent_sample *out)
{
	uint64_t *user = frames + s->n_kernel;
	struct walk w = {.pc = s->frames[s->n_kernel], .sp = s->user->sp, .fp = s->user->fp,
			 .fp_known = true, .leaf = true};
	unsigned int k;
	enum step r;

	l->st.copies++;
	user[0] = w.pc;
	r = walk(l, t, s, &w, user + 1, max_user - 1, &k);
	if ((r == STEP_NO_TABLE || r == STEP_NO_RULE || r == STEP_IMPLAUSIBLE) &&
	    1 + k < s->n_user) {
		l->st.copies_left++;
		return false;
	}
	l->st.copies_whole += r == STEP_END;
	l->st.copies_cut += r != STEP_END && r != STEP_DEPTH;
	*out = *s;
	memcpy(frames, s->frames, s->n_kernel * sizeof(*frames));
	out->n_user = (uint16_t)(1 + k);
	out->frames = frames;
	out->flags |= SAMPLE_F_UNWOUND | (r == STEP_DEPTH ? SAMPLE_F_TRUNCATED : 0);
	return true;
}

/* Counts why the walk from the leaf found not even its caller (leaf__fix). */
static void count_leaf_end(struct leaf_stats *st, enum step r)
{
	st->linked += r == STEP_LINKED || r == STEP_MET; /* the kernel found the caller too */
	st->no_table += r == STEP_NO_TABLE;
	st->no_rule += r == STEP_NO_RULE;
	st->deep += r == STEP_BEYOND;
	st->implausible += r == STEP_IMPLAUSIBLE;
}

/*
 * The leaf's callers by their rules, as far as the copied words go: an off-CPU sample carries
 * 64 words (its blocking call's wrapper, the wrapper's callers: libc's nanosleep ->
 * clock_nanosleep has no frame pointer, and its caller's caller was all the kernel's walk
 * found); a CPU sample 8. The kernel's frames are kept from where the walk meets them: the
 * same return address, or the frame it started from (STEP_LINKED). A walk that meets neither
 * (the words end first) is followed by the kernel's frames from 1 on, as one put-back frame
 * always was: the chain of the nearest linked frame, past what the words held.
 */
bool leaf__fix(struct leaf *l, struct proctab *t, const struct agent_sample *s,
	       unsigned int max_user, uint64_t *frames, struct agent_sample *out)
{
	const uint64_t *user = s->frames + s->n_kernel;
	unsigned int n = s->n_user, k, from;
	uint64_t *put = frames + s->n_kernel + 1;
	struct walk w;
	enum step r;

	/* a copy of the whole stack (a process not walked by tables yet): walked whole */
	if (s->user && s->user->stack && s->n_user && max_user &&
	    leaf_walk(l, t, s, max_user, frames, out))
		return true;
	if (s->flags & SAMPLE_F_UNWOUND)
		return false; /* every frame came from the tables, the leaf's caller too */
	if (!s->user || n == 0 || max_user < 2) {
		l->st.no_context += n != 0;
		return false;
	}
	w = (struct walk){.pc = user[0], .sp = s->user->sp, .fp = s->user->fp,
			  .fp_known = true, .leaf = true, .chain = user, .n_chain = n};
	r = walk(l, t, s, &w, put, max_user - 1, &k);
	if (!k) {
		count_leaf_end(&l->st, r);
		return false;
	}
	from = r == STEP_MET ? w.met : 1;
	l->st.fixed++;
	l->st.callers += k - 1;
	*out = *s;
	memcpy(frames, s->frames, (s->n_kernel + 1) * sizeof(*frames));
	n = from < n ? n - from : 0;
	if (1 + k + n > max_user) {
		n = max_user > 1 + k ? max_user - 1 - k : 0;
		out->flags |= SAMPLE_F_TRUNCATED;
	}
	memcpy(put + k, user + from, n * sizeof(*frames));
	out->n_user = (uint16_t)(1 + k + n);
	out->frames = frames;
	return true;
}
