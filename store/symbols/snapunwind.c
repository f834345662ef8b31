// SPDX-License-Identifier: MIT
/* store/symbols/snapunwind.c — stack snapshots unwound with debug files; see snapunwind.h. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "elf/dwcfi.h"
#include "port/file.h"
#include "port/log.h"
#include "pprof/snapshot.h"
#include "store/symbols/snapunwind.h"

#define MAX_LOADS 8
#define MAX_FDES  (1u << 20)
#define MAX_STUBS 2

/* A debug file's .debug_frame and the load segments that place a file offset at its vaddr. */
struct frame_file {
	int64_t build_id; /* string index in the profile; 0: slot unused */
	bool ok;	  /* it has a usable .debug_frame */
	uint8_t *sec;
	struct dwcfi cfi;
	struct frame_load {
		uint32_t off, vaddr, size;
	} load[MAX_LOADS];
	unsigned int n_load;
	struct {
		uint32_t lo, hi;
	} stubs[MAX_STUBS]; /* .plt, .iplt: no FDE, and neither sp nor lr touched */
	unsigned int n_stubs;
};

struct ctx {
	struct snapunwind_call *call;
	const struct pprof_profile *p;
	size_t taken; /* working memory taken from call->b, given back at the end */
	int refused;  /* the budget's answer that ended the rewrite (-EFBIG, -EAGAIN), or 0 */
	struct frame_file files[SNAPUNWIND_MAX_FILES];
	unsigned int n_files;
	const struct pprof_mapping **by_start; /* p's mappings by memory_start */
	size_t n_by_start;
	struct snapunwind_stats st;
	/* the copy being unwound: its stack */
	const struct snapshot *snap;
};

/* bytes from the budget before they are allocated: 0, or the refusal (kept in c->refused) */
static int take(struct ctx *c, size_t bytes)
{
	const struct pprof_budget *b = c->call->b;
	int ret;

	if (!b || !bytes || c->refused)
		return c->refused;
	ret = b->take(b->ctx, bytes, c->call->err, sizeof(c->call->err));
	if (ret)
		c->refused = ret;
	else
		c->taken += bytes;
	return ret;
}

static void give(struct ctx *c, size_t bytes)
{
	const struct pprof_budget *b = c->call->b;

	if (b && bytes) {
		b->give(b->ctx, bytes);
		c->taken -= bytes;
	}
}

static int read_phdrs(int fd, const Elf32_Ehdr *eh, struct frame_file *f)
{
	for (unsigned int i = 0; i < eh->e_phnum && f->n_load < MAX_LOADS; i++) {
		Elf32_Phdr ph;

		if (port_pread_full(fd, &ph, sizeof(ph), (off_t)eh->e_phoff + (off_t)i * eh->e_phentsize))
			return -EINVAL;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			f->load[f->n_load++] = (struct frame_load){ph.p_offset, ph.p_vaddr, ph.p_memsz};
	}
	return f->n_load ? 0 : -ENOENT;
}

/* A section of the stubs that jump through the GOT (.plt, .iplt): [lo, hi) in vaddrs. */
static void note_stubs(struct frame_file *f, const char *name, const Elf32_Shdr *sh)
{
	if ((strcmp(name, ".plt") && strcmp(name, ".iplt")) || f->n_stubs == MAX_STUBS)
		return;
	f->stubs[f->n_stubs].lo = sh->sh_addr;
	f->stubs[f->n_stubs++].hi = sh->sh_addr + sh->sh_size;
}

/* .debug_frame's header (0: *sh found, -ENOENT, -EINVAL); the stubs' sections on the way. */
static int find_debug_frame(int fd, const Elf32_Ehdr *eh, Elf32_Shdr *sh, struct frame_file *f)
{
	Elf32_Shdr strs, cur;
	char name[16];
	bool found = false;

	if (eh->e_shentsize != sizeof(*sh) || eh->e_shstrndx >= eh->e_shnum ||
	    port_pread_full(fd, &strs, sizeof(strs),
			    (off_t)eh->e_shoff + (off_t)eh->e_shstrndx * (off_t)sizeof(strs)))
		return -EINVAL;
	for (unsigned int i = 1; i < eh->e_shnum; i++) {
		if (port_pread_full(fd, &cur, sizeof(cur), (off_t)eh->e_shoff + (off_t)i * sizeof(cur)))
			return -EINVAL;
		memset(name, 0, sizeof(name));
		if (cur.sh_name >= strs.sh_size ||
		    pread(fd, name, sizeof(name) - 1, (off_t)strs.sh_offset + cur.sh_name) <= 0)
			continue;
		note_stubs(f, name, &cur);
		if (cur.sh_type == SHT_PROGBITS && !strcmp(name, ".debug_frame")) {
			*sh = cur;
			found = true;
		}
	}
	return found ? 0 : -ENOENT;
}

/*
 * The section's bytes into f->sec (*len of them): inflated when SHF_COMPRESSED (zlib, as
 * Debian's -dbg packages ship them). 0, -EFBIG, -EINVAL, -ENOMEM.
 */
static int read_section(struct ctx *c, int fd, const Elf32_Shdr *sh, struct frame_file *f,
			size_t *len)
{
	Elf32_Chdr ch = {0};
	uint8_t *raw;
	uLongf out;
	int ret = 0;

	if (sh->sh_size > SNAPUNWIND_MAX_SECTION)
		return -EFBIG;
	if (take(c, sh->sh_size))
		return c->refused;
	raw = malloc(sh->sh_size ? sh->sh_size : 1);
	if (!raw)
		return -ENOMEM;
	if (port_pread_full(fd, raw, sh->sh_size, (off_t)sh->sh_offset)) {
		free(raw);
		return -EINVAL;
	}
	if (!(sh->sh_flags & SHF_COMPRESSED)) {
		f->sec = raw;
		*len = sh->sh_size;
		return 0;
	}
	memcpy(&ch, raw, sh->sh_size >= sizeof(ch) ? sizeof(ch) : 0);
	if (sh->sh_size < sizeof(ch) || ch.ch_type != ELFCOMPRESS_ZLIB)
		ret = -EINVAL;
	else if (ch.ch_size > SNAPUNWIND_MAX_SECTION)
		ret = -EFBIG;
	else if (take(c, ch.ch_size))
		ret = c->refused;
	else if (!(f->sec = malloc(ch.ch_size ? ch.ch_size : 1)))
		ret = -ENOMEM;
	out = ch.ch_size;
	if (!ret && (uncompress(f->sec, &out, raw + sizeof(ch), sh->sh_size - sizeof(ch)) != Z_OK ||
		     out != ch.ch_size))
		ret = -EINVAL;
	*len = out;
	free(raw);
	give(c, sh->sh_size);
	return ret;
}

/*
 * A 32-bit little-endian ARM ELF file's .debug_frame and executable load segments. The FDE
 * index is charged at its bound before it is built: at most one FDE per 16 bytes of section,
 * in an array that at most doubles (elf/dwcfi.c).
 */
static int load_frame_file(struct ctx *c, const char *path, struct frame_file *f)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;
	Elf32_Ehdr eh;
	Elf32_Shdr sh = {0};
	char err[160] = "out of memory";
	size_t len = 0;

	if (fd < 0)
		return -errno;
	ret = port_pread_full(fd, &eh, sizeof(eh), 0) ? -EINVAL : 0;
	if (!ret && (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS32 ||
		     eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_ARM))
		ret = -ENOENT;
	if (!ret)
		ret = read_phdrs(fd, &eh, f);
	if (!ret)
		ret = find_debug_frame(fd, &eh, &sh, f);
	if (!ret)
		ret = read_section(c, fd, &sh, f, &len);
	if (!ret && take(c, len / 16 * 2 * sizeof(struct dwcfi_fde)))
		ret = c->refused;
	if (!ret) {
		ret = dwcfi__open(&f->cfi, f->sec, len, MAX_FDES, err, sizeof(err));
		if (ret)
			pr_warn("snapshots: %s: %s", path, err); /* its snapshots: counted */
	}
	close(fd);
	return ret;
}

/* The frame file of mapping m (loaded on first use), or NULL when it has none (or refused). */
static struct frame_file *file_for(struct ctx *c, const struct pprof_mapping *m)
{
	char path[PATH_MAX];
	struct frame_file *f;

	if (!m->build_id)
		return NULL;
	for (unsigned int i = 0; i < c->n_files; i++)
		if (c->files[i].build_id == m->build_id)
			return c->files[i].ok ? &c->files[i] : NULL;
	if (c->n_files == SNAPUNWIND_MAX_FILES)
		return NULL;
	f = &c->files[c->n_files++];
	f->build_id = m->build_id;
	f->ok = !debuginfo__file(c->call->d, c->p->strings[m->build_id], path, sizeof(path)) &&
		!load_frame_file(c, path, f);
	return f->ok ? f : NULL;
}

static int by_start(const void *a, const void *b)
{
	uint64_t x = (*(const struct pprof_mapping *const *)a)->memory_start;
	uint64_t y = (*(const struct pprof_mapping *const *)b)->memory_start;

	return x < y ? -1 : x > y;
}

/*
 * p's mappings sorted by start, so that a pc's mapping is a binary search: a walk asks for
 * every frame, and a hostile profile may hold many mappings.
 */
static int index_mappings(struct ctx *c)
{
	if (take(c, c->p->n_mappings * sizeof(*c->by_start)))
		return c->refused;
	c->by_start = malloc(c->p->n_mappings * sizeof(*c->by_start) + 1);
	if (!c->by_start)
		return -ENOMEM;
	for (size_t i = 0; i < c->p->n_mappings; i++)
		c->by_start[i] = &c->p->mappings[i];
	c->n_by_start = c->p->n_mappings;
	qsort(c->by_start, c->n_by_start, sizeof(*c->by_start), by_start);
	return 0;
}

/* The mapping holding pc: the last to start at or below it (mappings do not overlap). */
static const struct pprof_mapping *mapping_of(const struct ctx *c, uint64_t pc)
{
	size_t lo = 0, hi = c->n_by_start;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->by_start[mid]->memory_start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && pc < c->by_start[lo - 1]->memory_limit ? c->by_start[lo - 1] : NULL;
}

static bool to_vaddr(const struct frame_file *f, const struct pprof_mapping *m, uint64_t pc,
		     uint32_t *vaddr)
{
	uint64_t off = pc - m->memory_start + m->file_offset;

	for (unsigned int i = 0; i < f->n_load; i++)
		if (off >= f->load[i].off && off - f->load[i].off < f->load[i].size) {
			*vaddr = (uint32_t)(off - f->load[i].off + f->load[i].vaddr);
			return true;
		}
	return false;
}

static bool read_copy(void *ctx, uint32_t addr, uint32_t *val)
{
	const struct snapshot *s = ctx;
	uint32_t sp = s->regs[DWCFI_ARM_SP];

	if (addr < sp || addr - sp > s->stack_len || s->stack_len - (addr - sp) < 4)
		return false;
	memcpy(val, s->stack + (addr - sp), 4);
	return true;
}

enum walk_end { END_OUTERMOST, END_NO_FILE, END_NO_FDE, END_LEFT, END_UNKNOWN, END_BAD_CFI,
		END_DEEP, END_REFUSED };

static bool in_stubs(const struct frame_file *f, uint32_t vaddr)
{
	for (unsigned int i = 0; i < f->n_stubs; i++)
		if (vaddr >= f->stubs[i].lo && vaddr < f->stubs[i].hi)
			return true;
	return false;
}

/*
 * The rules inside a PLT stub (ARM: `add ip, pc, #..; add ip, ip, #..; ldr pc, [ip, #..]!`,
 * only ip written): the caller's sp and lr as they are. Only for the leaf: a stub calls no one.
 */
static int stub_row(struct dwcfi_row *row)
{
	memset(row, 0, sizeof(*row)); /* DWCFI_SAME everywhere */
	row->cfa_reg = DWCFI_ARM_SP;
	row->ra_reg = DWCFI_ARM_LR;
	return 0;
}

/* One frame up from pcs[*n - 1]: END_* or -1 to go on (pcs[*n] then added). */
static int walk_step(struct ctx *c, struct dwcfi_regs *regs, uint32_t *pcs, size_t *n)
{
	uint32_t pc = pcs[*n - 1] & ~1u, at = *n > 1 ? pc - 1 : pc, vaddr;
	const struct pprof_mapping *m = mapping_of(c, at);
	struct frame_file *f = m ? file_for(c, m) : NULL;
	struct dwcfi_row row;
	int ret;

	if (c->refused)
		return END_REFUSED;
	if (!f || !to_vaddr(f, m, at, &vaddr))
		return END_NO_FILE;
	ret = dwcfi__row_at(&f->cfi, vaddr, &row);
	if (ret == -ENOENT && *n == 1 && in_stubs(f, vaddr))
		ret = stub_row(&row);
	if (ret)
		return ret == -ENOENT ? END_NO_FDE : END_BAD_CFI;
	switch (dwcfi__step(&row, regs, read_copy, (void *)c->snap)) {
	case DWCFI_STEPPED:
		break;
	case DWCFI_OUTERMOST:
		return END_OUTERMOST;
	case DWCFI_LEFT_COPY:
		return END_LEFT;
	default:
		return END_UNKNOWN;
	}
	if (!regs->r[DWCFI_ARM_PC])
		return END_OUTERMOST; /* a zero return address ends a chain (the start code's lr) */
	if (*n == SNAPUNWIND_MAX_DEPTH)
		return END_DEEP;
	pcs[(*n)++] = regs->r[DWCFI_ARM_PC];
	return -1;
}

/* The walk of snapshot s: pcs[0] its pc, then return addresses; how it ended. */
static enum walk_end walk(struct ctx *c, const struct snapshot *s, uint32_t *pcs, size_t *n)
{
	struct dwcfi_regs regs;
	int end;

	memcpy(regs.r, s->regs, sizeof(regs.r));
	regs.known = (1u << DWCFI_REGS) - 1;
	c->snap = s;
	pcs[0] = s->regs[DWCFI_ARM_PC];
	*n = 1;
	do
		end = walk_step(c, &regs, pcs, n);
	while (end < 0);
	return (enum walk_end)end;
}

static void count_end(struct snapunwind_stats *st, enum walk_end end)
{
	uint64_t *by_end[] = {[END_NO_FILE] = &st->no_debug_file, [END_NO_FDE] = &st->no_fde,
			      [END_LEFT] = &st->left_snapshot,	  [END_UNKNOWN] = &st->unknown_reg,
			      [END_BAD_CFI] = &st->bad_cfi,	  [END_DEEP] = &st->too_deep};

	if (end != END_OUTERMOST && end != END_REFUSED)
		(*by_end[end])++;
}

/*
 * The rewrite goes in two passes, so that its arrays are sized (and charged) once, exactly:
 * the walks first, each sample's outcome and return addresses kept compactly (struct walked,
 * pcs), then the copy of the profile with the chains that replace the devices'.
 */
struct walked {
	uint32_t pcs_at, k; /* its return addresses in pcs[]; k: where the device's chain goes on */
	uint8_t n;	    /* pcs of the walk: the leaf's, then return addresses */
	bool exact;	    /* the walk's chain replaces the device's */
};

/* The copy of the profile that is written: p's tables and what the walks add to them. */
struct rewrite {
	struct pprof_profile q;
	struct walked *walks;
	size_t n_walks, cap_walks;
	uint32_t *pcs;
	size_t n_pcs, cap_pcs;
	uint64_t next_loc_id;
	uint64_t *ids; /* location ids of the rewritten samples */
	size_t n_ids;
	struct pprof_label *labels; /* labels of the samples that had a snapshot */
	size_t n_labels;
	size_t cap_locs;
	uint64_t *new_at; /* open addressing: address + 1 of each location the walks added ... */
	uint64_t *new_id; /* ... and its id (a return address is one location however often seen) */
	size_t new_mask, n_new;
	int64_t k_snapshot, k_unwind_in, k_unwind, s_exact; /* k_unwind_in: p's "unwind" */
	uint8_t buf[SNAPSHOT_ARM_HDR + SNAPSHOT_MAX_STACK]; /* one decoded snapshot */
};

/* Room for more elements in *arr (of size bytes each, *cap of them), charged before it grows. */
static int grow(struct ctx *c, void *arr, size_t *cap, size_t used, size_t more, size_t size)
{
	size_t ncap = *cap ? *cap : 64;
	void *n;

	if (used + more <= *cap)
		return 0;
	while (ncap < used + more)
		ncap *= 2;
	if (ncap > SIZE_MAX / 2 / size)
		return -ENOMEM;
	if (take(c, (ncap - *cap) * size))
		return c->refused;
	n = realloc(*(void **)arr, ncap * size);
	if (!n)
		return -ENOMEM;
	*(void **)arr = n;
	*cap = ncap;
	return 0;
}

/* malloc of n * size bytes (at least one), charged first. */
static void *alloc(struct ctx *c, size_t n, size_t size)
{
	if (n > SIZE_MAX / size - 1 || take(c, n * size))
		return NULL;
	return malloc(n * size + 1);
}

/* The sample's snapshot label, or NULL. */
static const struct pprof_label *snapshot_label(const struct rewrite *rw,
						 const struct pprof_sample *s)
{
	for (size_t i = 0; i < s->n_labels; i++)
		if (s->labels[i].key == rw->k_snapshot && s->labels[i].str)
			return &s->labels[i];
	return NULL;
}

/* Where the device's chain holds return address ra (k >= 1), or 0. */
static size_t device_frame(const struct pprof_profile *p, const struct pprof_sample *s, uint32_t ra)
{
	for (size_t k = 1; k < s->n_locations; k++) {
		uint64_t id = s->location_ids[k];

		/* ids are dense from 1 in what pprof_read() returns; else look it up */
		const struct pprof_location *l = id && id <= p->n_locations &&
							 p->locations[id - 1].id == id
						     ? &p->locations[id - 1]
						     : NULL;
		for (size_t j = 0; !l && j < p->n_locations; j++)
			if (p->locations[j].id == id)
				l = &p->locations[j];
		if (l && l->address == (uint64_t)ra - 1)
			return k;
	}
	return 0;
}

/* Whether the device labelled the sample unwind=inferred. */
static bool inferred(const struct rewrite *rw, const struct pprof_profile *p,
		     const struct pprof_sample *s)
{
	for (size_t i = 0; rw->k_unwind_in && i < s->n_labels; i++)
		if (s->labels[i].key == rw->k_unwind_in && s->labels[i].str &&
		    !strcmp(p->strings[s->labels[i].str], "inferred"))
			return true;
	return false;
}

/*
 * Whether the walk's chain replaces the device's (w->k set). It does when the walk stepped at
 * least once and every frame it gives is exact: it ended at the outermost frame, or at a return
 * address into code without tables here (a module without a debug file, a pc without an FDE:
 * _start, the C library), where the chain is cut, or, when the device's own chain was not
 * inferred and holds that return address, goes on as the device's.
 */
static bool chain_exact(struct ctx *c, const struct rewrite *rw, const struct pprof_sample *in,
			struct walked *w, enum walk_end end)
{
	w->k = 0;
	if (!in->n_locations || (end != END_OUTERMOST && w->n < 2) ||
	    (end != END_OUTERMOST && end != END_NO_FILE && end != END_NO_FDE))
		return false;
	if (end != END_OUTERMOST && !inferred(rw, c->p, in))
		w->k = (uint32_t)device_frame(c->p, in, rw->pcs[w->pcs_at + w->n - 1]);
	c->st.spliced += w->k != 0;
	c->st.cut += end != END_OUTERMOST && !w->k;
	return true;
}

/* The first pass over a sample with a snapshot: its walk, kept in rw, counted. */
static int walk_sample(struct ctx *c, struct rewrite *rw, const struct pprof_sample *in,
		       const struct pprof_label *label)
{
	const char *text = c->p->strings[label->str];
	struct walked *w;
	struct snapshot s;
	size_t n = 0;

	if (grow(c, &rw->walks, &rw->cap_walks, rw->n_walks, 1, sizeof(*rw->walks)) ||
	    grow(c, &rw->pcs, &rw->cap_pcs, rw->n_pcs, SNAPUNWIND_MAX_DEPTH, sizeof(*rw->pcs)))
		return c->refused ? c->refused : -ENOMEM;
	w = &rw->walks[rw->n_walks++];
	*w = (struct walked){.pcs_at = (uint32_t)rw->n_pcs};
	if (++c->st.snapshots > SNAPUNWIND_MAX_SAMPLES) {
		c->st.over_limit++;
	} else if (snapshot__from_text(text, strlen(text), rw->buf, sizeof(rw->buf), &s)) {
		c->st.bad_snapshot++;
	} else {
		enum walk_end end = walk(c, &s, rw->pcs + rw->n_pcs, &n);

		if (end == END_REFUSED)
			return c->refused;
		w->n = (uint8_t)n;
		w->exact = chain_exact(c, rw, in, w, end);
		if (w->exact) {
			c->st.exact++;
			rw->n_pcs += n;
		} else {
			count_end(&c->st, end);
		}
	}
	return 0;
}

/* The locations' index twice as big, charged first: 0 or the refusal. */
static int rehash(struct ctx *c, struct rewrite *rw)
{
	size_t slots = rw->new_mask ? 2 * (rw->new_mask + 1) : 64, mask = slots - 1;
	uint64_t *at = alloc(c, slots, sizeof(*at)), *id = alloc(c, slots, sizeof(*id));

	if (!at || !id) {
		free(at);
		free(id);
		return c->refused ? c->refused : -ENOMEM;
	}
	memset(at, 0, slots * sizeof(*at));
	for (size_t i = 0; rw->new_mask && i <= rw->new_mask; i++) {
		size_t h;

		if (!rw->new_at[i])
			continue;
		h = (size_t)((rw->new_at[i] * 0x9e3779b97f4a7c15ull) >> 20) & mask;
		while (at[h])
			h = (h + 1) & mask;
		at[h] = rw->new_at[i];
		id[h] = rw->new_id[i];
	}
	if (rw->new_mask)
		give(c, 2 * (rw->new_mask + 1) * sizeof(*at));
	free(rw->new_at);
	free(rw->new_id);
	rw->new_at = at;
	rw->new_id = id;
	rw->new_mask = mask;
	return 0;
}

/*
 * The location of return address ra (stepped back into its call, as the device writes them):
 * one per address, however many samples pass it; added on first sight. 0 when refused.
 */
static uint64_t new_location(struct ctx *c, struct rewrite *rw, uint32_t ra)
{
	uint64_t key = (uint64_t)ra; /* the address + 1: never 0, the empty slot */
	const struct pprof_mapping *m;
	struct pprof_location *l;
	size_t h;

	if ((2 * (rw->n_new + 1) > rw->new_mask + 1 && rehash(c, rw)) ||
	    grow(c, &rw->q.locations, &rw->cap_locs, rw->q.n_locations, 1, sizeof(*l)))
		return 0;
	h = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & rw->new_mask;
	while (rw->new_at[h] && rw->new_at[h] != key)
		h = (h + 1) & rw->new_mask;
	if (rw->new_at[h])
		return rw->new_id[h];
	m = mapping_of(c, key - 1);
	l = &rw->q.locations[rw->q.n_locations++];
	*l = (struct pprof_location){.id = rw->next_loc_id++, .mapping_id = m ? m->id : 0,
				     .address = key - 1};
	rw->new_at[h] = key;
	rw->new_id[h] = l->id;
	rw->n_new++;
	return l->id;
}

/* The walk's chain in out's location ids: the device's leaf, the walk's, maybe the device's. */
static int exact_chain(struct ctx *c, struct rewrite *rw, const struct pprof_sample *in,
		       struct pprof_sample *out, const struct walked *w)
{
	size_t upto = w->k ? w->n - 1u : w->n; /* the device's location for that address follows */
	uint64_t *ids = rw->ids + rw->n_ids;

	out->n_locations = 0;
	ids[out->n_locations++] = in->location_ids[0]; /* the leaf: the device's, the same pc */
	for (size_t i = 1; i < upto; i++) {
		ids[out->n_locations] = new_location(c, rw, rw->pcs[w->pcs_at + i]);
		if (!ids[out->n_locations++])
			return c->refused ? c->refused : -ENOMEM;
	}
	for (size_t i = w->k; w->k && i < in->n_locations; i++)
		ids[out->n_locations++] = in->location_ids[i];
	out->location_ids = ids;
	rw->n_ids += out->n_locations;
	return 0;
}

/* out's labels: in's without the snapshot, and unwind=exact in place of any unwind label. */
static void copy_labels(struct rewrite *rw, const struct pprof_sample *in, struct pprof_sample *out,
			bool exact)
{
	struct pprof_label *l = rw->labels + rw->n_labels;

	out->n_labels = 0;
	for (size_t i = 0; i < in->n_labels; i++)
		if (in->labels[i].key != rw->k_snapshot &&
		    (!exact || !rw->k_unwind_in || in->labels[i].key != rw->k_unwind_in))
			l[out->n_labels++] = in->labels[i];
	if (exact)
		l[out->n_labels++] = (struct pprof_label){.key = rw->k_unwind, .str = rw->s_exact};
	out->labels = l;
	rw->n_labels += out->n_labels;
}

static int64_t string_index(const struct pprof_profile *p, const char *s)
{
	for (size_t i = 1; i < p->n_strings; i++)
		if (!strcmp(p->strings[i], s))
			return (int64_t)i;
	return 0;
}

/*
 * The copy's arrays: p's tables (the copy adds to them; its locations grow as the walks add
 * theirs), the ids and labels of the samples with a snapshot, sized by the walks.
 */
static int rewrite_alloc(struct ctx *c, struct rewrite *rw)
{
	const struct pprof_profile *p = c->p;
	size_t n_ids = 0, n_labels = 0, w = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pprof_sample *s = &p->samples[i];
		const struct walked *wk;

		if (!snapshot_label(rw, s))
			continue;
		wk = &rw->walks[w++];
		n_labels += s->n_labels + wk->exact;
		if (wk->exact)
			n_ids += wk->n + (wk->k ? s->n_locations - wk->k : 0);
	}
	rw->q = *p;
	rw->q.blocks = NULL;
	rw->cap_locs = p->n_locations;
	rw->q.samples = alloc(c, p->n_samples, sizeof(*p->samples));
	rw->q.locations = alloc(c, p->n_locations, sizeof(*p->locations));
	rw->q.strings = alloc(c, p->n_strings + 3, sizeof(*p->strings));
	rw->q.comments = alloc(c, p->n_comments + 1, sizeof(*p->comments));
	rw->ids = alloc(c, n_ids, sizeof(*rw->ids));
	rw->labels = alloc(c, n_labels, sizeof(*rw->labels));
	if (c->refused)
		return c->refused;
	if (!rw->q.samples || !rw->q.locations || !rw->q.strings || !rw->q.comments || !rw->ids ||
	    !rw->labels)
		return -ENOMEM;
	memcpy(rw->q.samples, p->samples, p->n_samples * sizeof(*p->samples));
	memcpy(rw->q.locations, p->locations, p->n_locations * sizeof(*p->locations));
	memcpy(rw->q.strings, p->strings, p->n_strings * sizeof(*p->strings));
	if (p->n_comments) /* NULL when none, in a profile not made by pprof_read() */
		memcpy(rw->q.comments, p->comments, p->n_comments * sizeof(*p->comments));
	rw->next_loc_id = 1;
	for (size_t i = 0; i < p->n_locations; i++)
		if (p->locations[i].id >= rw->next_loc_id)
			rw->next_loc_id = p->locations[i].id + 1;
	return 0;
}

static void rewrite_free(struct rewrite *rw)
{
	free(rw->walks);
	free(rw->pcs);
	free(rw->q.samples);
	free(rw->q.locations);
	free(rw->q.strings);
	free(rw->q.comments);
	free(rw->ids);
	free(rw->labels);
	free(rw->new_at);
	free(rw->new_id);
}

/* A string the copy's table ends with: its index. */
static int64_t add_string(struct rewrite *rw, const char *s)
{
	rw->q.strings[rw->q.n_strings] = (char *)s;
	return (int64_t)rw->q.n_strings++;
}

static void files_free(struct ctx *c)
{
	for (unsigned int i = 0; i < c->n_files; i++) {
		dwcfi__close(&c->files[i].cfi);
		free(c->files[i].sec);
	}
}

/* The second pass: the copy's samples, each with a snapshot rewritten by its walk. */
static int rewrite_samples(struct ctx *c, struct rewrite *rw)
{
	size_t w = 0;

	rw->k_unwind = add_string(rw, "unwind");
	rw->s_exact = add_string(rw, "exact");
	for (size_t i = 0; i < c->p->n_samples; i++) {
		const struct pprof_sample *in = &c->p->samples[i];
		const struct walked *wk;
		int ret;

		if (!snapshot_label(rw, in))
			continue;
		wk = &rw->walks[w++];
		ret = wk->exact ? exact_chain(c, rw, in, &rw->q.samples[i], wk) : 0;
		if (ret)
			return ret;
		copy_labels(rw, in, &rw->q.samples[i], wk->exact);
	}
	return 0;
}

static void add_comment(struct ctx *c, struct rewrite *rw, char *comment, size_t len)
{
	const struct snapunwind_stats *now = &c->st;

	snprintf(comment, len,
		 "edgeprof snapshots (unwound at the collector): snapshots=%llu exact=%llu "
		 "spliced=%llu cut=%llu bad_snapshot=%llu no_debug_file=%llu no_fde=%llu left_snapshot=%llu "
		 "unknown_reg=%llu bad_cfi=%llu too_deep=%llu over_limit=%llu",
		 (unsigned long long)now->snapshots, (unsigned long long)now->exact,
		 (unsigned long long)now->spliced, (unsigned long long)now->cut,
		 (unsigned long long)now->bad_snapshot,
		 (unsigned long long)now->no_debug_file, (unsigned long long)now->no_fde,
		 (unsigned long long)now->left_snapshot, (unsigned long long)now->unknown_reg,
		 (unsigned long long)now->bad_cfi, (unsigned long long)now->too_deep,
		 (unsigned long long)now->over_limit);
	rw->q.comments[rw->q.n_comments++] = add_string(rw, comment);
}

/* pprof_write_fn into call->out, each growth of it charged (at twice what is written). */
static int charged_write(void *ctx, const void *buf, size_t len)
{
	struct ctx *c = ctx;
	size_t before = c->taken;

	if (take(c, 2 * len))
		return c->refused;
	c->call->out_held += c->taken - before;
	c->taken = before; /* the caller gives it back, with the output */
	return pprof_buf_write(c->call->out, buf, len);
}

static int unwind_all(struct ctx *c, struct rewrite *rw)
{
	char comment[400];
	int ret = index_mappings(c);

	for (size_t i = 0; !ret && i < c->p->n_samples; i++) {
		const struct pprof_label *l = snapshot_label(rw, &c->p->samples[i]);

		if (l)
			ret = walk_sample(c, rw, &c->p->samples[i], l);
	}
	if (!ret)
		ret = rewrite_alloc(c, rw);
	if (!ret)
		ret = rewrite_samples(c, rw);
	if (ret)
		return ret;
	add_comment(c, rw, comment, sizeof(comment));
	/* the builder's fixed cost: zlib's deflate state and its staging buffers */
	ret = take(c, 320 << 10);
	if (!ret)
		ret = pprof_write_profile(&rw->q, NULL, charged_write, c);
	return c->refused ? c->refused : ret;
}

int snapunwind__profile(struct snapunwind_call *call, const struct pprof_profile *p)
{
	struct ctx *c;
	struct rewrite *rw;
	size_t n = 0;
	int ret;
	int64_t key = string_index(p, SNAPSHOT_LABEL);

	call->out_held = 0;
	for (size_t i = 0; key && i < p->n_samples; i++)
		for (size_t j = 0; j < p->samples[i].n_labels; j++)
			n += p->samples[i].labels[j].key == key;
	if (!n)
		return 0;
	c = calloc(1, sizeof(*c));
	rw = calloc(1, sizeof(*rw));
	ret = c && rw ? 0 : -ENOMEM;
	if (ret)
		goto out;
	c->call = call;
	c->p = p;
	rw->k_snapshot = key;
	rw->k_unwind_in = string_index(p, "unwind");
	ret = unwind_all(c, rw);
	if (!ret) {
		ret = 1;
		for (size_t i = 0; i < sizeof(c->st) / sizeof(uint64_t); i++)
			((uint64_t *)call->st)[i] += ((uint64_t *)&c->st)[i];
	}
out:
	if (c) {
		files_free(c);
		free(c->by_start);
		give(c, c->taken);
	}
	if (rw)
		rewrite_free(rw);
	free(c);
	free(rw);
	return ret;
}
