// SPDX-License-Identifier: MIT
/* bpf/cfitab.c — CFI rows for the BPF program's user-stack walk; see cfitab.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agent/core/procmaps.h"
#include "bpf/cfitab.h"
#include "elf/cfi.h"
#include "elf/elf.h"
#include "port/clock.h"
#include "port/log.h"

#define CFI_PID_SLOTS     4096 /* pids tried lately (direct-mapped) */
#define CFI_WANT_RETRY_NS (10 * NSEC_PER_SEC) /* a process that did not fit: tried again */
#define CFI_STALE_RETRY_NS NSEC_PER_SEC
/*
 * Samples a process has before it is listed: a process sampled a few times (a fork before its
 * exec, a short shell command) would cost the tables of all its files for nothing (perf's 40
 * libraries in tests/bench/bpf-icount.sh: 0.9 s of the agent's CPU in the VM; a shell loop of
 * /bin/true beside others' builds: 0.53 s in 6 s at 2, against 0.07 without tables).
 */
#define CFI_WANT_SAMPLES  PROFILE_CFI_WANT_SAMPLES
/*
 * A program built with frame pointers keeps the kernel's walk (cheaper than a search per
 * frame, and its leaf repaired by bpf/leaf.c): one whose rows put the CFA on the frame
 * pointer (x86_64) or save it (aarch64) this often, in percent (x86_64: bpf-work 31%,
 * Debian's libc 1.3%, python3 0.0%).
 */
#define CFI_FP_BUILT      20
/*
 * Against thrashing: a file may take at most CFI_FILE_SHARE percent of the array (a compiler's
 * cc1 would take it all, and each new cc1 would push every other file out), and a process
 * leaves the map for another's rows only once listed this long. A quarter: libcrypto's 126 659
 * entries were over it before the 4-byte rows, 83 695 now. A file over it (node: 403 573
 * entries, 217 636 of them its dense page index) is listed without rows (CFI_MAP_NO_ROWS): its
 * frames are walked by frame pointers, which end where it was built without them. Half the array let the builder's buffer of 8-byte
 * rows grow to 3 MiB for a big file before it was found too big (the agent's peak RSS 15.6
 * MiB against 10.9 beside 200 short tools on this machine): a file's rows are built in a
 * buffer of at most as many rows as its share has entries (768 KiB), as before.
 */
#define CFI_FILE_SHARE    25
#define CFI_EVICT_AGE_NS  (10 * NSEC_PER_SEC)
/*
 * A process that found no room (rows or file slots held by listed processes) is tried again
 * once its samples have doubled, not 10 s later (sqlite3 beside a build ran 1 s and was never
 * listed); it may then take the room of listed processes sampled less than 1/CFI_FAIR_MARGIN
 * as often lately (samples halved every sweep), whatever their age: the margin keeps two
 * processes sampled about as often from taking each other's rows in turn.
 */
#define CFI_FAIR_MARGIN   2
#define CFI_MAX_MAPS      256 /* code mappings read per process (more: does not fit) */
/*
 * Rows per page of the index, about: the index costs 2/CFI_PAGE_ROWS entries a row against the
 * rows' 1/2 (two rows an entry), and a search among ~CFI_PAGE_ROWS + 1 rows replaces one among
 * all the file's rows (x86_64 libc: 3 steps instead of 15, each an array lookup;
 * tests/bench/bpf-icount.sh).
 */
#define CFI_PAGE_ROWS     2
#define CFI_PAGE_SHIFT_MAX 16
#define CFI_WRITE_BATCH   4096
/*
 * Rules read between two releases of the table's pages while its rows are built: the agent's
 * RSS then holds ~100 KiB of a file's .eh_frame at a time, not all it read (python3's: 2 MiB
 * more at the peak, with fault-around's neighbours; tests/bench/bpf-rss.sh).
 */
#define CFI_RELEASE_ROWS  4096

/*
 * One file's rows in the array, by its build-id (or path); its load segments place its
 * mappings. refs: listed processes that map it; a file no one maps is evicted first when rows
 * are needed (least recently used), then processes listed longest ago make room.
 */
struct cfi_file {
	uint64_t key; /* 0: free */
	bool unfit;   /* its rows do not fit: now (no room), or for good (too_big) */
	bool too_big; /* over its share of the array: its mappings are listed as CFI_MAP_NO_ROWS */
	bool fp_built; /* built with frame pointers (see CFI_FP_BUILT) */
	/* cfi_rows[first, + pages) its page index, then n rows two an entry; n 0: no table */
	uint32_t first, pages, n;
	uint32_t shift, base; /* pages of 1 << shift bytes from vaddr base (the first row's) */
	uint32_t refs;
	uint64_t used_at;
	unsigned int n_load;
	struct elf_load load[ELF_EH_MAX_LOADS];
};

/* A pid seen or tried lately (direct-mapped): an exec changes its comm, and starts over. */
struct cfi_pid {
	uint32_t pid;
	uint32_t seen;     /* samples walked by frame pointers */
	uint32_t lately;   /* samples, either walk, halved at each sweep: its share lately */
	uint32_t retry_at; /* no room at its last try: tried again at this many seen */
	uint64_t comm;
	uint64_t tried_ns; /* 0: not tried */
};

/* A listed process: the files its entry in the map refers to. */
struct cfi_listed {
	uint32_t pid; /* 0: free */
	uint64_t listed_at, listed_ns;
	uint16_t n;
	uint16_t files[PROFILE_CFI_MAPS];
};

/*
 * The rules of every file, each once, in the array's first entries (struct cfi_page, row_n 0):
 * a row names its rule by index (16 bits). Hashed by value to find one's index; never evicted
 * (a system has a few thousand: libcrypto 365).
 */
struct cfi_dict {
	uint32_t n, max;
	uint32_t *slots; /* 2 * max, open addressing: index + 1, 0 free */
	struct cfi_rule *rules;
};

struct cfitab {
	int rows_fd, procs_fd, slots_fd, maybe_fd;
	struct cfi_dict dict;
	struct cfi_maybe maybe; /* what the program's copy holds */
	bool mmapable; /* the rows array can be mapped */
	uint32_t self;
	unsigned int max_rows, max_procs, max_files;
	uint64_t clock;
	uint32_t gen; /* of the last listing (cfi_proc.gen) */
	bool no_room; /* the listing under way found no room (rather than a file too big) */
	struct cfi_file *files;
	struct cfi_listed *listed;
	struct cfi_pid pids[CFI_PID_SLOTS];
	cfitab_maps_fn maps_fn; /* the agent's maps of a process (cfitab__set_maps), or NULL */
	void *maps_ctx;
	struct cfitab_stats st;
};

/* ---- rows ---------------------------------------------------------------------------------- */

/*
 * A row as built: its pc (the file's vaddr, then from its first row), its rule, and the rule's
 * index among the array's first entries (rules_index()).
 */
struct brow {
	uint32_t pc;
	struct cfi_rule rule;
	uint16_t idx;
};

struct builder {
	struct brow *rows;
	size_t n, max;
	uintptr_t lo;
	uint64_t seg_vaddr;
	const struct elf_eh_frame *eh; /* the table read (its pages released as rows are built) */
	size_t read; /* rules read */
	bool overflow;
	size_t limit; /* rows a file may have: as many as its share has entries (RSS) */
	uint64_t unfit;
	size_t fp_rows, rules; /* rows whose CFA is the frame pointer, of rows with rules */
};

static bool fits8(int64_t off, int8_t *out)
{
	if (off % 8 || off / 8 < -128 || off / 8 > 127 || off == 0)
		return false;
	*out = (int8_t)(off / 8);
	return true;
}

/* r as a rule; false: rules a row cannot say. */
static bool rule_pack(const struct cfi_rules *r, struct cfi_rule *row)
{
	*row = (struct cfi_rule){0};
	if (!r)
		return true; /* CFI_CFA_NONE */
	if (r->ra_undefined) {
		row->cfa = CFI_CFA_SPECIAL | CFI_SPECIAL_STOP << 2;
		return true;
	}
	if (r->cfa_reg == CFI_CFA_PLT) {
		if (r->plt_min != 11) /* the program's PLT rule knows binutils' 11th byte only */
			return false;
		row->cfa = CFI_CFA_SPECIAL | CFI_SPECIAL_PLT << 2;
		return true;
	}
	if ((r->cfa_reg != CFI_REG_SP && r->cfa_reg != CFI_REG_FP) || r->cfa_off < 0 ||
	    r->cfa_off % 8 || r->cfa_off / 8 >= (1 << 14))
		return false;
	if (r->fp_saved && !fits8(r->fp_off, &row->fp_off8))
		return false;
	if (r->ra_saved && !fits8(r->ra_off, &row->ra_off8))
		return false;
	/* a return address in a register: aarch64's link register only, for a leaf */
	if (!r->ra_saved && CFI_REG_RA != 30)
		return false;
	row->cfa = (uint16_t)((r->cfa_reg == CFI_REG_SP ? CFI_CFA_SP : CFI_CFA_FP) |
			      (r->cfa_off / 8) << 2);
	return true;
}

static uint32_t rule_key(const struct cfi_rule *r)
{
	return r->cfa | (uint32_t)(uint8_t)r->fp_off8 << 16 | (uint32_t)(uint8_t)r->ra_off8 << 24;
}

static bool same_rule(const struct brow *a, const struct brow *b)
{
	return rule_key(&a->rule) == rule_key(&b->rule);
}

static bool add_row(void *ctx, uintptr_t pc, const struct cfi_rules *r)
{
	struct builder *b = ctx;
	uint64_t vaddr = (uint64_t)(pc - b->lo) + b->seg_vaddr;
	struct brow row, *last = b->n ? &b->rows[b->n - 1] : NULL;

	if (vaddr > UINT32_MAX) {
		b->overflow = true;
		return false;
	}
	if (++b->read % CFI_RELEASE_ROWS == 0)
		elf__eh_frame_release(b->eh);
	if (!rule_pack(r, &row.rule)) {
		b->unfit++;
		row.rule = (struct cfi_rule){0};
	}
	b->rules += r != NULL;
	/* built with frame pointers: x86_64 moves the CFA to rbp after each prologue; aarch64
	 * keeps it on sp but saves x29 (a frame record) in most functions */
	b->fp_rows += r && (CFI_REG_SP == 31 ? r->fp_saved : r->cfa_reg == CFI_REG_FP);
	row.pc = (uint32_t)vaddr;
	if (last && row.pc < last->pc)
		return true; /* overlapping FDEs: the first one's rows stand */
	if (last && row.pc == last->pc) {
		*last = row; /* the row that starts here wins over the one that ends here */
		if (b->n > 1 && same_rule(&b->rows[b->n - 2], last))
			b->n--;
		return true;
	}
	if (last && same_rule(last, &row))
		return true;
	if (b->n == b->max) {
		size_t max = b->max ? 2 * b->max : 4096;
		struct brow *rows;

		if (max > b->limit)
			max = b->limit; /* the buffer never outgrows a file's share (RSS) */
		if (max <= b->n || !(rows = realloc(b->rows, max * sizeof(*rows)))) {
			b->overflow = true;
			return false;
		}
		b->rows = rows;
		b->max = max;
	}
	b->rows[b->n++] = row;
	return true;
}

/*
 * Writes rows into the array from index first: through a mapping of the array where the
 * kernel allows one (BPF_F_MMAPABLE, 5.5: a copy, no system call a row; unmapped after, so the
 * rows are not the agent's RSS), else batched (5.6), else a call a row.
 */
static int rows_write(struct cfitab *c, uint32_t first, const void *entries, size_t n)
{
	const struct cfi_page *rows = entries; /* or rules, or rows two an entry: 8 bytes */
	uint32_t keys[CFI_WRITE_BATCH];
	bool batch = true;

	if (c->mmapable) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE), lo = (size_t)first * sizeof(*rows);
		size_t off = lo & ~(page - 1), len = lo + n * sizeof(*rows) - off;
		uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, c->rows_fd, (off_t)off);

		if (m != MAP_FAILED) {
			memcpy(m + (lo - off), rows, n * sizeof(*rows));
			munmap(m, len);
			return 0;
		}
		c->mmapable = false;
	}
	for (size_t at = 0; at < n; at += CFI_WRITE_BATCH) {
		uint32_t count = n - at < CFI_WRITE_BATCH ? (uint32_t)(n - at) : CFI_WRITE_BATCH;

		for (uint32_t i = 0; i < count; i++)
			keys[i] = first + (uint32_t)at + i;
		if (batch && !bpf_map_update_batch(c->rows_fd, keys, rows + at, &count, NULL))
			continue;
		batch = false;
		for (uint32_t i = 0; i < count; i++)
			if (bpf_map_update_elem(c->rows_fd, &keys[i], &rows[at + i], BPF_ANY))
				return -errno;
	}
	return 0;
}

/* Maps the table of m's file: through the process's root first (containers), or the vDSO. */
static int table_map(uint32_t pid, const struct procmap *m, struct elf_eh_frame *eh)
{
	char path[PROCMAP_PATH + 32];

	if (!strcmp(m->path, "[vdso]"))
		return elf__vdso_eh_frame(eh);
	if (m->path[0] != '/')
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%u/root%s", pid, m->path);
	if (!elf__map_eh_frame(path, eh))
		return 0;
	return elf__map_eh_frame(m->path, eh);
}

/* The rows of an indexed or headed table into b: false when it has none usable. */
static bool table_rows(const struct elf_eh_frame *eh, struct builder *b)
{
	struct cfi_table t = {
	    .lo = (uintptr_t)eh->seg,
	    .hi = (uintptr_t)eh->seg + eh->seg_len,
	    .eh_hdr = eh->hdr_vaddr ? eh->seg + (eh->hdr_vaddr - eh->seg_vaddr) : NULL,
	};
	struct cfi_fde *idx = NULL;
	size_t n = 0;
	long fdes;

	b->lo = t.lo;
	b->seg_vaddr = eh->seg_vaddr;
	b->eh = eh;
	if (!t.eh_hdr) { /* a static program: its FDEs sorted once */
		size_t max = eh->frame_len / 20 + 1;

		if (max > CONFIG_BPF_LEAF_INDEX_FDES)
			max = CONFIG_BPF_LEAF_INDEX_FDES;
		idx = malloc(max * sizeof(*idx));
		if (!idx)
			return false;
		n = cfi__index(&t, eh->seg + (eh->frame_vaddr - eh->seg_vaddr), eh->frame_len,
			       idx, max);
	}
	fdes = cfi__rows(&t, idx, n, add_row, b);
	free(idx);
	return fdes > 0;
}

/*
 * The page index of rows[0 .. n) (sorted, n >= 1) at pages of 1 << shift bytes from the first
 * row into out (NULL: only measured); returns the most rows that start in a page after the one
 * in effect at its start.
 */
static uint32_t pages_fill(const struct brow *rows, uint32_t n, uint32_t shift,
			   struct cfi_page *out)
{
	uint32_t base = rows[0].pc, pages = ((rows[n - 1].pc - base) >> shift) + 1;
	uint32_t r = 0, e = 0, most = 0;

	for (uint32_t p = 0; p < pages; p++) {
		uint64_t lo = (uint64_t)p << shift, hi = lo + (1ull << shift);

		while (r + 1 < n && rows[r + 1].pc - base <= lo)
			r++; /* the row in effect at the page's start */
		if (e < r)
			e = r;
		while (e + 1 < n && rows[e + 1].pc - base < hi)
			e++; /* the last row that starts in the page */
		if (out)
			out[p] = (struct cfi_page){.row_n = r | (e - r) << CFI_PAGE_ROW_BITS,
						   .rule = rows[r].rule};
		if (e - r > most)
			most = e - r;
	}
	return most;
}

/*
 * The page index of b's rows, about a page per CFI_PAGE_ROWS rows, smaller pages where a
 * page would hold more rows than the program's search reaches (16 bytes always do); the rows'
 * pcs become offsets from the first one. NULL when over max entries (or no memory).
 */
static struct cfi_page *pages_build(struct builder *b, size_t max, uint32_t *pages,
				    uint32_t *shift, uint32_t *base)
{
	uint32_t n = (uint32_t)b->n, span = b->rows[n - 1].pc - b->rows[0].pc;
	uint32_t want = n / CFI_PAGE_ROWS ? n / CFI_PAGE_ROWS : 1, s = PROFILE_CFI_PAGE_SHIFT_MIN;
	struct cfi_page *idx;

	if (n > 1u << CFI_PAGE_ROW_BITS)
		return NULL;
	while (s < CFI_PAGE_SHIFT_MAX && (span >> s) + 1 > want)
		s++;
	for (;;) {
		if ((span >> s) + 1 > max)
			return NULL;
		if (pages_fill(b->rows, n, s, NULL) < 1u << PROFILE_CFI_PAGE_STEPS)
			break;
		if (s == PROFILE_CFI_PAGE_SHIFT_MIN)
			return NULL; /* cannot be: 16 bytes hold at most 16 rows */
		s--;
	}
	*pages = (span >> s) + 1;
	if (!(idx = malloc(*pages * sizeof(*idx))))
		return NULL;
	pages_fill(b->rows, n, s, idx);
	*shift = s;
	*base = b->rows[0].pc;
	for (uint32_t i = 0; i < n; i++)
		b->rows[i].pc -= *base;
	return idx;
}

/* ---- rules, rows two an entry ---------------------------------------------------------------- */

/* The entries a file may take: its share of the array. */
static uint32_t file_share(const struct cfitab *c)
{
	return (uint32_t)((uint64_t)c->max_rows * CFI_FILE_SHARE / 100);
}

/* The entries f takes: its page index and its rows, two an entry. */
static uint32_t file_len(const struct cfi_file *f)
{
	return f->pages + (f->n + 1) / 2;
}

/* The index of rule r among the array's first entries, added when new; -1: they are full. */
static int32_t dict_index(struct cfi_dict *d, const struct cfi_rule *r)
{
	uint32_t key = rule_key(r), mask = 4 * d->max - 1;

	for (uint32_t h = (key * 0x9E3779B1u) & mask;; h = (h + 1) & mask) {
		uint32_t v = d->slots[h];

		if (!v) {
			if (d->n == d->max)
				return -1;
			d->rules[d->n] = *r;
			d->slots[h] = ++d->n;
			return (int32_t)d->n - 1;
		}
		if (rule_key(&d->rules[v - 1]) == key)
			return (int32_t)v - 1;
	}
}

/* Writes the rules from index from on into their entries. */
static int dict_write(struct cfitab *c, uint32_t from)
{
	uint32_t n = c->dict.n - from;
	struct cfi_rule_ent *e = calloc(n, sizeof(*e));
	int err;

	if (!e)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		e[i].rule = c->dict.rules[from + i];
	err = rows_write(c, from, e, n);
	free(e);
	return err;
}

/* Each of b's rows' rule index, new rules added and written; false: the rules are full. */
static bool rules_index(struct cfitab *c, struct builder *b)
{
	uint32_t was = c->dict.n;

	for (size_t i = 0; i < b->n; i++) {
		int32_t k = dict_index(&c->dict, &b->rows[i].rule);

		if (k < 0)
			return false;
		b->rows[i].idx = (uint16_t)k;
	}
	return c->dict.n == was || !dict_write(c, was);
}

/*
 * b's rows (pcs from the first row, pages of 1 << shift bytes) two an entry: each one's
 * offset into its page and its rule's index. NULL: no memory.
 */
static struct cfi_rows2 *rows_pack(const struct builder *b, uint32_t shift)
{
	uint32_t mask = (1u << shift) - 1;
	struct cfi_rows2 *out = calloc((b->n + 1) / 2, sizeof(*out));

	for (size_t i = 0; out && i < b->n; i++) {
		out[i / 2].off[i & 1] = (uint16_t)(b->rows[i].pc & mask);
		out[i / 2].rule[i & 1] = b->rows[i].idx;
	}
	return out;
}

/* ---- room in the array ---------------------------------------------------------------------- */

/* The first gap of n rows between the files' ranges, or false. */
static bool find_gap(const struct cfitab *c, uint32_t n, uint32_t *at)
{
	uint32_t start = c->dict.max; /* the rules come first */

	for (;;) {
		bool moved = false;

		for (unsigned int i = 0; i < c->max_files; i++) {
			const struct cfi_file *f = &c->files[i];

			uint32_t len = file_len(f);

			if (f->key && f->n && f->first < start + n && start < f->first + len) {
				start = f->first + len; /* overlaps: try after it */
				moved = true;
			}
		}
		if (!moved)
			break;
	}
	if (start > c->max_rows || n > c->max_rows - start)
		return false;
	*at = start;
	return true;
}

static void file_forget(struct cfitab *c, struct cfi_file *f)
{
	c->st.rows -= f->n;
	c->st.pages -= f->pages;
	c->st.files -= f->n != 0;
	c->st.files_evicted++;
	memset(f, 0, sizeof(*f));
}

/*
 * The file no listed process maps that was used longest ago, or NULL; with_rows: only one
 * that holds rows (to make room in the array: an entry that holds none frees nothing, and a
 * file remembered as too big would be built again).
 */
static struct cfi_file *unused_file(struct cfitab *c, bool with_rows)
{
	struct cfi_file *best = NULL;

	for (unsigned int i = 0; i < c->max_files; i++) {
		struct cfi_file *f = &c->files[i];

		if (f->key && !f->refs && (f->n || !with_rows) &&
		    (!best || f->used_at < best->used_at))
			best = f;
	}
	return best;
}

/* Sets or clears pid's bit in the program's pre-filter (cfi_maybe). */
static void maybe_set(struct cfitab *c, uint32_t pid, bool on)
{
	uint32_t bit = pid % PROFILE_CFI_MAYBE_BITS, zero = 0;
	__u64 *w = &c->maybe.bits[bit / 64], was = *w;

	for (unsigned int i = 0; !on && i < c->max_procs; i++) /* another listed pid shares it */
		on = c->listed[i].pid && c->listed[i].pid != pid &&
		     c->listed[i].pid % PROFILE_CFI_MAYBE_BITS == bit;
	*w = on ? *w | 1ull << (bit % 64) : *w & ~(1ull << (bit % 64));
	if (*w != was)
		bpf_map_update_elem(c->maybe_fd, &zero, &c->maybe, BPF_ANY);
}

/* Takes pid out of the program's sight: its slot first, then the slot's entry. */
static void unlist(struct cfitab *c, uint32_t pid, uint32_t slot)
{
	struct cfi_proc empty = {0};

	bpf_map_delete_elem(c->slots_fd, &pid);
	bpf_map_update_elem(c->procs_fd, &slot, &empty, BPF_ANY);
}

static void listed_drop(struct cfitab *c, struct cfi_listed *l)
{
	uint32_t pid = l->pid;

	unlist(c, l->pid, (uint32_t)(l - c->listed));
	for (unsigned int i = 0; i < l->n; i++)
		c->files[l->files[i]].refs--;
	memset(l, 0, sizeof(*l));
	maybe_set(c, pid, false);
	c->st.procs--;
}

/* The process listed longest ago (not pid), or NULL. */
static struct cfi_listed *oldest_listed(struct cfitab *c, uint32_t pid)
{
	struct cfi_listed *best = NULL;

	for (unsigned int i = 0; i < c->max_procs; i++) {
		struct cfi_listed *l = &c->listed[i];

		if (l->pid && l->pid != pid && (!best || l->listed_at < best->listed_at))
			best = l;
	}
	return best;
}

/* pid's samples lately (cfi_pid.lately); 0 when its slot went to another pid. */
static uint32_t lately(const struct cfitab *c, uint32_t pid)
{
	const struct cfi_pid *t = &c->pids[pid % CFI_PID_SLOTS];

	return t->pid == pid ? t->lately : 0;
}

/*
 * The listed process that gives way to pid: of those listed CFI_EVICT_AGE_NS ago or more, or
 * sampled less than 1/CFI_FAIR_MARGIN as often as pid lately, the one sampled least (then
 * the one listed longest ago); NULL: none.
 */
static struct cfi_listed *victim(struct cfitab *c, uint32_t pid)
{
	uint64_t now = port_clock_mono_ns();
	uint32_t want = lately(c, pid), best_n = 0;
	struct cfi_listed *best = NULL;

	for (unsigned int i = 0; i < c->max_procs; i++) {
		struct cfi_listed *l = &c->listed[i];
		uint32_t n;

		if (!l->pid || l->pid == pid)
			continue;
		n = lately(c, l->pid);
		if (now - l->listed_ns < CFI_EVICT_AGE_NS && (uint64_t)n * CFI_FAIR_MARGIN >= want)
			continue; /* listed lately, and sampled about as often */
		if (!best || n < best_n || (n == best_n && l->listed_at < best->listed_at)) {
			best = l;
			best_n = n;
		}
	}
	return best;
}

/* Takes the victim of pid out of the map (its files may go then); false: none. */
static bool evict_for(struct cfitab *c, uint32_t pid)
{
	struct cfi_listed *l = victim(c, pid);

	if (!l)
		return false;
	listed_drop(c, l);
	c->st.procs_evicted++;
	return true;
}

/*
 * Room for n rows: files no listed process maps go first (least recently used), then
 * processes leave the map (listed again at their next samples) as victim() picks them, so
 * that their files can go. pid (being listed) keeps its own.
 */
static bool make_room(struct cfitab *c, uint32_t n, uint32_t pid, uint32_t *at)
{
	struct cfi_file *f;

	if (n > file_share(c))
		return false;
	while (!find_gap(c, n, at)) {
		if ((f = unused_file(c, true)))
			file_forget(c, f);
		else if (!evict_for(c, pid))
			return c->no_room = true, false;
	}
	return true;
}

/* ---- files ------------------------------------------------------------------------------------ */

/* Builds and loads the rows of m's file into f. */
static void file_load(struct cfitab *c, uint32_t pid, const struct procmap *m,
		      struct cfi_file *f)
{
	struct elf_eh_frame eh;
	uint32_t at, pages = 0, n2, share = file_share(c);
	struct builder b = {.limit = share};
	struct cfi_page *idx = NULL;
	struct cfi_rows2 *packed = NULL;
	uint64_t t0 = port_clock_mono_ns();

	if (table_map(pid, m, &eh)) {
		c->st.no_table++;
		return;
	}
	f->n_load = eh.n_load;
	memcpy(f->load, eh.load, sizeof(f->load));
	if (!table_rows(&eh, &b) || b.n == 0) {
		c->st.no_table++;
	} else if (b.overflow || (n2 = (uint32_t)(b.n + 1) / 2) >= share || !rules_index(c, &b) ||
		   !(idx = pages_build(&b, share - n2, &pages, &f->shift, &f->base)) ||
		   !(packed = rows_pack(&b, f->shift))) {
		/* for good: rows and index over its share, or the rules are full */
		f->unfit = f->too_big = true;
		c->st.files_unfit++;
	} else if (!make_room(c, pages + n2, pid, &at) || rows_write(c, at, idx, pages) ||
		   rows_write(c, at + pages, packed, n2)) {
		f->unfit = true;
		f->key = 0; /* no room now: built again when next wanted */
		c->st.files_unfit++;
	} else {
		f->first = at;
		f->pages = pages;
		f->n = (uint32_t)b.n;
		f->fp_built = b.fp_rows * 100 >= b.rules * CFI_FP_BUILT;
		c->st.rows += b.n;
		c->st.pages += pages;
		c->st.files++;
		c->st.rows_unfit += b.unfit;
	}
	if (eh.map)
		elf__unmap_eh_frame(&eh);
	free(idx);
	free(packed);
	free(b.rows);
	c->st.load_ns += port_clock_mono_ns() - t0;
}

/* m's file's rows, loaded on first use; NULL when the files cache is full. */
static struct cfi_file *file_get(struct cfitab *c, uint32_t pid, const struct procmap *m)
{
	uint64_t key = procmaps__hash(m->build_id[0] ? m->build_id : m->path) | 1;
	struct cfi_file *f, *free_slot = NULL;

	for (unsigned int i = 0; i < c->max_files; i++) {
		f = &c->files[i];
		if (f->key == key) {
			f->used_at = ++c->clock;
			return f;
		}
		if (!f->key && !free_slot)
			free_slot = f;
	}
	while (!free_slot && !(free_slot = unused_file(c, false)) && evict_for(c, pid))
		;
	if (!free_slot) {
		c->no_room = true; /* every slot held by processes listed lately and as busy */
		return NULL;
	}
	if (free_slot->key)
		file_forget(c, free_slot);
	*free_slot = (struct cfi_file){.key = key, .used_at = ++c->clock};
	file_load(c, pid, m, free_slot);
	return free_slot;
}

/*
 * The bias of m (pc - bias is the file's vaddr); false when its offset is in no segment (a
 * segment may well start at vaddr 0: aarch64's libc).
 */
static bool mapping_bias(const struct cfi_file *f, const struct procmap *m, uint64_t *bias)
{
	if (!strcmp(m->path, "[vdso]") || f->n == 0) {
		*bias = m->start - m->offset; /* the vDSO is linked at 0; no rows: unused */
		return true;
	}
	for (unsigned int i = 0; i < f->n_load && i < ELF_EH_MAX_LOADS; i++) {
		const struct elf_load *l = &f->load[i];

		if (m->offset >= l->offset && m->offset - l->offset < l->filesz) {
			*bias = m->start - (l->vaddr + (m->offset - l->offset));
			return true;
		}
	}
	return false;
}

/* ---- processes -------------------------------------------------------------------------------- */

static struct cfi_listed *listed_find(struct cfitab *c, uint32_t pid, bool make)
{
	struct cfi_listed *free_slot = NULL;

	for (unsigned int i = 0; i < c->max_procs; i++) {
		if (c->listed[i].pid == pid)
			return &c->listed[i];
		if (!c->listed[i].pid && !free_slot)
			free_slot = &c->listed[i];
	}
	if (!make)
		return NULL;
	if (!free_slot && (free_slot = oldest_listed(c, pid))) {
		listed_drop(c, free_slot);
		c->st.procs_evicted++;
	}
	return free_slot;
}

/*
 * Anonymous code m (a JIT: V8, a JVM) into p: a mapping without rows, walked by frame
 * pointers, which JITs keep. Following the last one (after_anon: V8's code pages), it widens
 * that entry: a pc between them is in no code either way. false: p is full.
 */
static bool anon_add(struct cfi_proc *p, const struct procmap *m, bool after_anon)
{
	struct cfi_mapping *last = p->n ? &p->m[p->n - 1] : NULL;

	if (after_anon && last && m->limit - last->start <= UINT32_MAX) {
		last->len = (uint32_t)(m->limit - last->start);
		return true;
	}
	if (p->n >= PROFILE_CFI_MAPS || m->limit - m->start > UINT32_MAX)
		return false;
	p->m[p->n++] = (struct cfi_mapping){.start = m->start,
					    .len = (uint32_t)(m->limit - m->start)};
	return true;
}

/*
 * The indexes of pm's first CFI_MAX_MAPS mappings in address order, as the program's search
 * wants them: /proc lists them so, the mmap records in the order they were mapped (the
 * program, then ld.so above the libraries it maps later). Their count.
 */
static unsigned int maps_in_order(const struct procmaps *pm, uint16_t *order)
{
	unsigned int n = pm->n < CFI_MAX_MAPS ? pm->n : CFI_MAX_MAPS;

	for (unsigned int i = 0; i < n; i++) {
		unsigned int k = i;

		while (k && pm->maps[order[k - 1]].start > pm->maps[i].start) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = (uint16_t)i;
	}
	return n;
}

/*
 * Lists pid with its code mappings, or leaves it to frame pointers (counted); false: it did
 * not fit for want of room (c->no_room), rather than for good.
 */
static bool proc_list(struct cfitab *c, uint32_t pid, bool known_maps)
{
	const struct procmaps *pm = known_maps && c->maps_fn ? c->maps_fn(c->maps_ctx, pid) : NULL;
	struct procmaps *read = NULL;
	struct cfi_proc p = {0};
	struct cfi_listed *l = listed_find(c, pid, false), mine = {.pid = pid};
	bool fit = true, partial = false, anon = false;
	uint16_t order[CFI_MAX_MAPS];
	unsigned int n;

	c->no_room = false;
	if (l)
		listed_drop(c, l); /* listed again: its maps changed */
	if (pm) {
		c->st.maps_known++;
	} else {
		if (procmaps__read(pid, CFI_MAX_MAPS, &read))
			return true; /* gone already */
		pm = read;
	}
	/* the program first: built with frame pointers, it needs no other file's rows */
	if (pm->exe >= 0 && (unsigned int)pm->exe < pm->n) {
		struct cfi_file *f = file_get(c, pid, &pm->maps[pm->exe]);

		if (f && !f->unfit && f->fp_built) {
			c->st.fp_built++;
			procmaps__free(read);
			return true;
		}
	}
	n = maps_in_order(pm, order);
	for (unsigned int i = 0; i < n && fit; i++) {
		const struct procmap *m = &pm->maps[order[i]];
		struct cfi_file *f;
		uint64_t bias = 0;

		if (m->path[0] != '/' && strcmp(m->path, "[vdso]")) {
			fit = anon_add(&p, m, anon);
			anon = true;
			continue;
		}
		anon = false;
		f = p.n < PROFILE_CFI_MAPS ? file_get(c, pid, m) : NULL;
		/*
		 * A file too big for good (node's own program, libnode) is listed without rows:
		 * its frames are walked by frame pointers (see struct cfi_mapping).
		 */
		fit = f && (!f->unfit || f->too_big) && m->limit - m->start <= UINT32_MAX &&
		      mapping_bias(f, m, &bias);
		if (!fit)
			break;
		partial |= f->too_big;
		p.m[p.n++] = (struct cfi_mapping){.start = m->start,
						  .len = (uint32_t)(m->limit - m->start),
						  .base = bias + f->base, .first = f->first,
						  .pages = f->n ? f->pages : 0,
						  .shift = f->too_big ? CFI_MAP_NO_ROWS : f->shift};
		mine.files[mine.n++] = (uint16_t)(f - c->files);
		f->refs++; /* held while listing: make_room leaves it */
	}
	procmaps__free(read);
	p.tgid = pid;
	p.gen = ++c->gen; /* the program's remembered walks of the pid's last listing go stale */
	if (fit && (l = listed_find(c, pid, true))) {
		uint32_t slot = (uint32_t)(l - c->listed);

		if (!bpf_map_update_elem(c->procs_fd, &slot, &p, BPF_ANY) &&
		    !bpf_map_update_elem(c->slots_fd, &pid, &slot, BPF_ANY)) {
			mine.listed_at = ++c->clock;
			mine.listed_ns = port_clock_mono_ns();
			*l = mine;
			maybe_set(c, pid, true);
			c->st.procs++;
			c->st.loads++;
			c->st.partial += partial;
			return true;
		}
		unlist(c, pid, slot);
	}
	for (unsigned int i = 0; i < mine.n; i++)
		c->files[mine.files[i]].refs--;
	c->st.unfit++;
	c->st.no_room += c->no_room;
	return !c->no_room;
}

/* fp: a sample walked by frame pointers (one walked by tables counts in cfitab__count()) */
static void proc_try(struct cfitab *c, uint32_t pid, const char *comm, uint64_t retry_ns,
		     uint32_t need, bool fp)
{
	struct cfi_pid *t = &c->pids[pid % CFI_PID_SLOTS];
	uint64_t now = port_clock_mono_ns(), h = procmaps__hash(comm ? comm : "");

	if (t->pid != pid || t->comm != h)
		*t = (struct cfi_pid){.pid = pid, .comm = h};
	t->lately += fp;
	if (++t->seen < need)
		return;
	if (t->tried_ns && now - t->tried_ns < retry_ns && !(t->retry_at && t->seen >= t->retry_at))
		return;
	t->tried_ns = now;
	/* listed again after a walk found no mapping: what the kernel shows now (/proc) */
	t->retry_at = proc_list(c, pid, fp) ? 0 : 2 * t->seen;
}

void cfitab__set_maps(struct cfitab *c, cfitab_maps_fn fn, void *ctx)
{
	if (!c)
		return;
	c->maps_fn = fn;
	c->maps_ctx = ctx;
}

void cfitab__want(struct cfitab *c, uint32_t pid, const char *comm)
{
	/* not the agent itself: its samples are mostly the building of tables */
	if (c && pid && pid != c->self)
		proc_try(c, pid, comm, CFI_WANT_RETRY_NS, CFI_WANT_SAMPLES, true);
}

void cfitab__stale(struct cfitab *c, uint32_t pid, const char *comm)
{
	if (c && pid)
		proc_try(c, pid, comm, CFI_STALE_RETRY_NS, 1, false);
}

void cfitab__count(struct cfitab *c, uint32_t pid, uint32_t end, uint32_t flags)
{
	struct cfi_pid *t;

	if (!c)
		return;
	t = &c->pids[pid % CFI_PID_SLOTS];
	if (t->pid == pid)
		t->lately++; /* its share lately, against which it keeps its room */
	if (end < CFI_END_MAX)
		c->st.walks[end]++;
	if (flags & PROFILE_F_CFI_CACHED)
		c->st.cached++;
	if (flags & PROFILE_F_CFI_UNCACHED)
		c->st.cache_changed++;
}

/*
 * Processes that exited leave the map; their files stay until room is needed. Samples lately
 * count half.
 */
void cfitab__sweep(struct cfitab *c)
{
	for (unsigned int i = 0; c && i < CFI_PID_SLOTS; i++)
		c->pids[i].lately /= 2;
	for (unsigned int i = 0; c && i < c->max_procs; i++) {
		struct cfi_listed *l = &c->listed[i];

		if (l->pid && kill((pid_t)l->pid, 0) && errno == ESRCH)
			listed_drop(c, l);
	}
}

struct cfitab *cfitab__new(int rows_fd, bool mmapable, int procs_fd, int slots_fd,
			   int maybe_fd, unsigned int max_rows, unsigned int max_procs,
			   unsigned int max_files)
{
	struct cfitab *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rows_fd = rows_fd;
	c->procs_fd = procs_fd;
	c->slots_fd = slots_fd;
	c->maybe_fd = maybe_fd;
	c->self = (uint32_t)getpid();
	c->mmapable = mmapable;
	c->max_rows = max_rows;
	c->max_procs = max_procs;
	c->max_files = max_files;
	c->files = calloc(max_files, sizeof(*c->files));
	c->listed = calloc(max_procs, sizeof(*c->listed));
	/* the rules take the array's first entries: a power of two of them, an eighth at most */
	for (c->dict.max = 1; 2 * c->dict.max <= CONFIG_BPF_CFI_RULES &&
			      2 * c->dict.max <= max_rows / 8; c->dict.max *= 2)
		;
	c->dict.rules = calloc(c->dict.max, sizeof(*c->dict.rules));
	c->dict.slots = calloc(4 * (size_t)c->dict.max, sizeof(*c->dict.slots));
	if (!c->files || !c->listed || !c->dict.rules || !c->dict.slots) {
		cfitab__free(c);
		return NULL;
	}
	return c;
}

void cfitab__stats(const struct cfitab *c, struct cfitab_stats *st)
{
	*st = c ? c->st : (struct cfitab_stats){0};
}

void cfitab__free(struct cfitab *c)
{
	if (!c)
		return;
	free(c->files);
	free(c->listed);
	free(c->dict.rules);
	free(c->dict.slots);
	free(c);
}
