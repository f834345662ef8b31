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

/* Where a walk of the copied stack words is: the frame at pc, its sp and fp. */
struct walk {
	uint64_t pc, sp, fp;
	bool fp_known; /* fp holds the frame's frame pointer (restored from a word, or the one
			* the sample carries) */
	bool leaf;     /* pc is the interrupted one, not a return address */
};

enum step { STEP_RA, STEP_LINKED, STEP_FAIL };

/* The copied stack word at address a. */
static bool word_at(const struct sample_user_context *u, uint64_t a, uint64_t *v)
{
	if (a < u->sp || (a - u->sp) % 8 || (a - u->sp) / 8 >= u->n_words)
		return false;
	*v = u->words[(a - u->sp) / 8];
	return true;
}

/*
 * One frame up by the rules at w->pc: its return address in *ra, w moved to the caller;
 * STEP_LINKED where the frame is the one whose frame pointer the sample carries (the kernel's
 * frame-pointer walk went on from it: its frames are the rest); STEP_FAIL, counted why, on the
 * leaf (a caller's failure is no loss: the stack ends there).
 */
static enum step step(struct leaf *l, struct proctab *t, const struct agent_sample *s,
		      struct walk *w, uint64_t *ra)
{
	const struct sample_user_context *u = s->user;
	const struct procmap *m = proctab__resolve(t, s->pid, w->leaf ? w->pc : w->pc - 1);
	struct cfi_rules cr;
	uint64_t packed, cfa, at;
	int64_t slot;

	if (!m || (m->path[0] != '/' && strcmp(m->path, "[vdso]"))) {
		l->st.no_table += w->leaf;
		return STEP_FAIL;
	}
	/* a caller's pc is a return address: the rules of its call instruction */
	packed = rules_at(l, s->pid, m, (w->leaf ? w->pc : w->pc - 1) - m->start + m->offset);
	if (!cfi__unpack(packed, &cr)) {
		if (w->leaf)
			*(packed == RULE_NO_TABLE ? &l->st.no_table : &l->st.no_rule) += 1;
		return STEP_FAIL;
	}
	if (cr.cfa_reg == CFI_REG_FP) {
		if (w->leaf || (w->fp_known && w->fp == u->fp)) {
			l->st.linked += w->leaf;
			return STEP_LINKED;
		}
		if (!w->fp_known)
			return STEP_FAIL;
		cfa = w->fp + (uint64_t)cr.cfa_off;
	} else {
		slot = cr.cfa_off;
		if (cr.cfa_reg == CFI_CFA_PLT && (w->pc & 15) >= cr.plt_min)
			slot += 8; /* the stub pushed its relocation index */
		cfa = w->sp + (uint64_t)slot;
	}
	if (!cr.ra_saved) { /* still in the link register (aarch64): the leaf's only */
		*ra = w->leaf ? u->lr : 0;
		l->st.no_rule += w->leaf && !*ra;
	} else {
		at = cfa + (uint64_t)cr.ra_off;
		/*
		 * aarch64 compilers keep the CFA on sp after linking a frame: the frame pointer
		 * says whether it is linked. If its record holds the slot of the return address,
		 * the kernel's walk read that very slot: found already, with no stack word copied.
		 */
		if (w->leaf && u->fp && u->fp + 8 == at) {
			l->st.linked++;
			return STEP_LINKED;
		}
		if (!word_at(u, at, ra)) {
			l->st.deep += w->leaf;
			return STEP_FAIL;
		}
	}
	if (!*ra)
		return STEP_FAIL;
	if (cr.fp_saved)
		w->fp_known = word_at(u, cfa + (uint64_t)cr.fp_off, &w->fp);
	w->pc = *ra;
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
 * The leaf's callers by their rules, as far as the copied words go: an off-CPU sample carries
 * 64 words (its blocking call's wrapper, the wrapper's callers: libc's nanosleep ->
 * clock_nanosleep has no frame pointer, and its caller's caller was all the kernel's walk
 * found); a CPU sample 8. The kernel's frames are kept from where the walk meets them: the
 * same return address, or the frame it started from (STEP_LINKED). A walk that meets neither
 * (the words end first) is followed by the kernel's frames from 1 on, as one put-back frame
 * always was: the chain of the nearest linked frame, past what the words held.
 */
/*
 * One step of the walk of a copy: the caller of the frame at (*pc, *sp, *fp), looked up at
 * pc - 1 but for the leaf (a return address may be the next function's first byte). 1: it
 * stepped; 0: this is the outermost frame (DW_CFA_undefined return address, or 0); WALK_NO_RULE:
 * no rules, no mapping, or a frame that goes nowhere; WALK_BEYOND: a word beyond the copy.
 */
#define WALK_NO_RULE (-1)
#define WALK_BEYOND  (-2)
static int walk_step(struct leaf *l, struct proctab *t, const struct agent_sample *s, bool leaf,
		     uint64_t *pc, uint64_t *sp, uint64_t *fp)
{
	const struct sample_user_context *u = s->user;
	uint64_t look = leaf ? *pc : *pc - 1, cfa, ra;
	const struct procmap *m = proctab__resolve(t, s->pid, look);
	struct cfi_rules cr;

	if (!m || (m->path[0] != '/' && strcmp(m->path, "[vdso]")))
		return WALK_NO_RULE;
	if (!cfi__unpack(rules_at(l, s->pid, m, look - m->start + m->offset), &cr))
		return WALK_NO_RULE;
	if (cr.ra_undefined)
		return 0;
	if (cr.cfa_reg == CFI_CFA_PLT) /* the stub pushed its relocation index from plt_min on */
		cfa = *sp + (uint64_t)cr.cfa_off + ((*pc & 15) >= cr.plt_min ? 8 : 0);
	else
		cfa = (cr.cfa_reg == CFI_REG_FP ? *fp : *sp) + (uint64_t)cr.cfa_off;
	if (cfa < *sp || (cfa == *sp && !leaf))
		return WALK_NO_RULE; /* a frame that goes nowhere */
	if (!cr.ra_saved) { /* still in the link register: the leaf only (aarch64) */
		if (!leaf || !u->lr)
			return WALK_NO_RULE;
		ra = u->lr;
	} else if (!word_at(u, cfa + (uint64_t)cr.ra_off, &ra)) {
		return WALK_BEYOND;
	}
	if (cr.fp_saved && !word_at(u, cfa + (uint64_t)cr.fp_off, fp))
		return WALK_BEYOND;
	if (!ra)
		return 0;
	*pc = ra;
	*sp = cfa;
	return 1;
}

/* The user stack of s walked whole from its copy (see leaf__fix); false: left as it is. */
static bool leaf_walk(struct leaf *l, struct proctab *t, const struct agent_sample *s,
		      unsigned int max_user, uint64_t *frames, struct agent_sample *out)
{
	uint64_t *user = frames + s->n_kernel, pc = s->frames[s->n_kernel];
	uint64_t sp = s->user->sp, fp = s->user->fp;
	unsigned int n = 0;
	int r = 1;

	l->st.copies++;
	while (r > 0 && n < max_user) {
		user[n++] = pc;
		r = walk_step(l, t, s, n == 1, &pc, &sp, &fp);
	}
	if (r == WALK_NO_RULE && n < s->n_user) {
		/* code without tables (built with frame pointers, JIT): the kernel's walk got further */
		l->st.copies_left++;
		return false;
	}
	l->st.copies_whole += r == 0;
	l->st.copies_cut += r < 0;
	*out = *s;
	memcpy(frames, s->frames, s->n_kernel * sizeof(*frames));
	out->n_user = (uint16_t)n;
	out->frames = frames;
	out->flags |= SAMPLE_F_UNWOUND | (r > 0 ? SAMPLE_F_TRUNCATED : 0);
	return true;
}

bool leaf__fix(struct leaf *l, struct proctab *t, const struct agent_sample *s,
	       unsigned int max_user, uint64_t *frames, struct agent_sample *out)
{
	const uint64_t *user = s->frames + s->n_kernel;
	unsigned int n = s->n_user, k = 0, from = 1, j;
	uint64_t *put = frames + s->n_kernel + 1, ra;
	struct walk w;

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
			  .fp_known = true, .leaf = true};
	for (;;) {
		enum step r = k + 1 < max_user ? step(l, t, s, &w, &ra) : STEP_FAIL;

		if (r == STEP_LINKED)
			break; /* the kernel's frames from 1 on */
		if (r == STEP_FAIL)
			break; /* the kernel's frames from 1 on, as they were (see above) */
		if ((j = in_chain(user, n, ra))) {
			from = j;
			if (!k)
				l->st.linked++; /* the leaf's caller was found by the kernel too */
			break;
		}
		if (!proctab__resolve(t, s->pid, ra - 1)) {
			l->st.implausible += !k;
			break;
		}
		put[k++] = ra;
	}
	if (!k)
		return false;
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
