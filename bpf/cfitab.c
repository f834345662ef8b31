// SPDX-License-Identifier: MIT
/* bpf/cfitab.c — CFI rows for the BPF program's user-stack walk; see cfitab.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "agent/procmaps.h"
#include "bpf/cfitab.h"
#include "elf/cfi.h"
#include "elf/elf.h"
#include "port/clock.h"
#include "port/log.h"

#define CFI_FILE_MAX_ROWS (1u << PROFILE_CFI_ROW_STEPS) /* what the program's search reaches */
#define CFI_PID_SLOTS     4096 /* pids tried lately (direct-mapped) */
#define CFI_WANT_RETRY_NS (10 * NSEC_PER_SEC) /* a process that did not fit: tried again */
#define CFI_STALE_RETRY_NS NSEC_PER_SEC
#define CFI_MAX_MAPS      256 /* code mappings read per process (more: does not fit) */
#define CFI_WRITE_BATCH   4096
#define CFI_RESET_NS      (60 * NSEC_PER_SEC) /* the rows start over at most this often */

/* One file's rows in the array, by its build-id (or path); loads kept to place its mappings. */
struct cfi_file {
	uint64_t key; /* 0: free */
	bool unfit;   /* its rows do not fit: processes mapping it are not listed */
	uint32_t first, n; /* n 0: no table, frame pointers there */
	unsigned int n_load;
	struct elf_load load[ELF_EH_MAX_LOADS];
};

struct cfi_pid {
	uint32_t pid;
	uint64_t comm;     /* hash of the comm it had: an exec changes it, and is tried at once */
	uint64_t tried_ns;
};

struct cfitab {
	int rows_fd, procs_fd;
	unsigned int max_rows, max_procs, max_files, n_files;
	uint32_t used;
	bool full; /* a file did not fit: start over at a sweep (at most every CFI_RESET_NS) */
	uint64_t reset_ns;
	struct cfi_file *files;
	struct cfi_pid pids[CFI_PID_SLOTS];
	struct cfitab_stats st;
};

/* ---- rows ---------------------------------------------------------------------------------- */

struct builder {
	struct cfi_row *rows;
	size_t n, max;
	uintptr_t lo;
	uint64_t seg_vaddr;
	bool overflow;
	uint64_t unfit;
};

static bool fits8(int64_t off, int8_t *out)
{
	if (off % 8 || off / 8 < -128 || off / 8 > 127 || off == 0)
		return false;
	*out = (int8_t)(off / 8);
	return true;
}

/* r as a row (pc aside); false: rules a row cannot say. */
static bool row_pack(const struct cfi_rules *r, struct cfi_row *row)
{
	*row = (struct cfi_row){0};
	if (!r)
		return true; /* CFI_CFA_NONE */
	if (r->ra_undefined) {
		row->cfa = CFI_CFA_SPECIAL | CFI_SPECIAL_STOP << 2;
		return true;
	}
	if (r->cfa_reg == CFI_CFA_PLT) {
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

static bool same_rule(const struct cfi_row *a, const struct cfi_row *b)
{
	return a->cfa == b->cfa && a->fp_off8 == b->fp_off8 && a->ra_off8 == b->ra_off8;
}

static bool add_row(void *ctx, uintptr_t pc, const struct cfi_rules *r)
{
	struct builder *b = ctx;
	uint64_t vaddr = (uint64_t)(pc - b->lo) + b->seg_vaddr;
	struct cfi_row row, *last = b->n ? &b->rows[b->n - 1] : NULL;

	if (vaddr > UINT32_MAX) {
		b->overflow = true;
		return false;
	}
	if (!row_pack(r, &row)) {
		b->unfit++;
		row = (struct cfi_row){0};
	}
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
		struct cfi_row *rows;

		if (max > CFI_FILE_MAX_ROWS || !(rows = realloc(b->rows, max * sizeof(*rows)))) {
			b->overflow = true;
			return false;
		}
		b->rows = rows;
		b->max = max;
	}
	b->rows[b->n++] = row;
	return true;
}

/* Writes rows into the array from index first: batched where the kernel can (5.6). */
static int rows_write(struct cfitab *c, uint32_t first, const struct cfi_row *rows, size_t n)
{
	uint32_t keys[CFI_WRITE_BATCH];
	bool batch = true;

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

/* Builds and loads the rows of m's file into f. */
static void file_load(struct cfitab *c, uint32_t pid, const struct procmap *m,
		      struct cfi_file *f)
{
	struct elf_eh_frame eh;
	struct builder b = {0};
	uint64_t t0 = port_clock_mono_ns();

	if (table_map(pid, m, &eh)) {
		c->st.no_table++;
		return;
	}
	f->n_load = eh.n_load;
	memcpy(f->load, eh.load, sizeof(f->load));
	if (!table_rows(&eh, &b) || b.n == 0) {
		c->st.no_table++;
	} else if (b.overflow) {
		f->unfit = true; /* more rows than the program's search reaches: never fits */
	} else if (b.n > c->max_rows - c->used) {
		f->unfit = true;
		c->full = true; /* it would fit in an array emptied of exited programs' files */
	} else if (rows_write(c, c->used, b.rows, b.n)) {
		f->unfit = true;
	} else {
		f->first = c->used;
		f->n = (uint32_t)b.n;
		c->used += (uint32_t)b.n;
		c->st.rows_unfit += b.unfit;
	}
	if (eh.map)
		elf__unmap_eh_frame(&eh);
	free(b.rows);
	c->st.load_ns += port_clock_mono_ns() - t0;
}

/* m's file's rows, loaded on first use; NULL when the files cache is full. */
static struct cfi_file *file_get(struct cfitab *c, uint32_t pid, const struct procmap *m)
{
	uint64_t key = procmaps__hash(m->build_id[0] ? m->build_id : m->path) | 1;
	struct cfi_file *f;

	for (unsigned int i = 0; i < c->n_files; i++)
		if (c->files[i].key == key)
			return &c->files[i];
	if (c->n_files == c->max_files) {
		c->full = true;
		return NULL;
	}
	/* (a file that never fits is looked at again after a reset: once a minute at most) */
	f = &c->files[c->n_files++];
	*f = (struct cfi_file){.key = key};
	file_load(c, pid, m, f);
	c->st.files += !f->unfit && f->n;
	return f;
}

/* The bias of m (pc - bias is the file's vaddr); false when its offset is in no segment. */
static bool mapping_bias(const struct cfi_file *f, const struct procmap *m, uint64_t *bias)
{
	struct elf_eh_frame eh = {.n_load = f->n_load};
	uint64_t vaddr;

	if (!strcmp(m->path, "[vdso]")) {
		*bias = m->start - m->offset; /* linked at 0 */
		return true;
	}
	memcpy(eh.load, f->load, sizeof(eh.load));
	vaddr = elf__eh_frame_vaddr(&eh, m->offset);
	*bias = m->start - vaddr;
	return vaddr != 0 || f->n == 0;
}

/* Lists pid with its code mappings, or leaves it to frame pointers (counted). */
static void proc_list(struct cfitab *c, uint32_t pid)
{
	struct procmaps *pm;
	struct cfi_proc p = {0};
	bool fit = true;

	if (procmaps__read(pid, CFI_MAX_MAPS, &pm))
		return; /* gone already */
	for (unsigned int i = 0; i < pm->n && fit; i++) {
		const struct procmap *m = &pm->maps[i];
		struct cfi_file *f;
		uint64_t bias = 0;

		f = p.n < PROFILE_CFI_MAPS ? file_get(c, pid, m) : NULL;
		fit = f && !f->unfit && mapping_bias(f, m, &bias);
		if (fit)
			p.m[p.n++] = (struct cfi_mapping){
			    .start = m->start, .end = m->limit, .bias = bias, .first = f->first,
			    .n = f->n};
	}
	procmaps__free(pm);
	/* maps are read in address order: sorted, as the program's search wants */
	if (fit && !bpf_map_update_elem(c->procs_fd, &pid, &p, BPF_ANY)) {
		c->st.loads++;
		return;
	}
	c->st.unfit++;
	bpf_map_delete_elem(c->procs_fd, &pid);
}

static void proc_try(struct cfitab *c, uint32_t pid, const char *comm, uint64_t retry_ns)
{
	struct cfi_pid *t = &c->pids[pid % CFI_PID_SLOTS];
	uint64_t now = port_clock_mono_ns(), h = procmaps__hash(comm ? comm : "");

	if (t->pid == pid && t->comm == h && now - t->tried_ns < retry_ns)
		return;
	t->pid = pid;
	t->comm = h;
	t->tried_ns = now;
	proc_list(c, pid);
}

void cfitab__want(struct cfitab *c, uint32_t pid, const char *comm)
{
	if (c && pid)
		proc_try(c, pid, comm, CFI_WANT_RETRY_NS);
}

void cfitab__stale(struct cfitab *c, uint32_t pid, const char *comm)
{
	if (c && pid)
		proc_try(c, pid, comm, CFI_STALE_RETRY_NS);
}

void cfitab__count(struct cfitab *c, uint32_t end)
{
	if (c && end < CFI_END_MAX)
		c->st.walks[end]++;
}

/* Every process leaves the map and every file's rows are forgotten: a fresh start. */
static void start_over(struct cfitab *c)
{
	uint32_t key, next;

	while (!bpf_map_get_next_key(c->procs_fd, NULL, &key))
		if (bpf_map_delete_elem(c->procs_fd, &key))
			break;
	(void)next;
	c->n_files = 0;
	c->used = 0;
	c->full = false;
	memset(c->pids, 0, sizeof(c->pids));
	pr_info("bpf cfi: tables full: started over (processes listed again at their next sample)");
}

void cfitab__sweep(struct cfitab *c)
{
	uint32_t key, next, dead[256];
	unsigned int n_dead = 0;
	uint64_t live = 0;
	bool more;

	if (!c)
		return;
	if (c->full && port_clock_mono_ns() - c->reset_ns >= CFI_RESET_NS) {
		c->st.resets++;
		c->reset_ns = port_clock_mono_ns();
		start_over(c);
	}
	more = !bpf_map_get_next_key(c->procs_fd, NULL, &key);
	while (more) {
		more = !bpf_map_get_next_key(c->procs_fd, &key, &next);
		if (kill((pid_t)key, 0) && errno == ESRCH && n_dead < 256)
			dead[n_dead++] = key;
		else
			live++;
		key = next;
	}
	for (unsigned int i = 0; i < n_dead; i++)
		bpf_map_delete_elem(c->procs_fd, &dead[i]);
	c->st.procs = live;
}

struct cfitab *cfitab__new(int rows_fd, int procs_fd, unsigned int max_rows,
			   unsigned int max_procs, unsigned int max_files)
{
	struct cfitab *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rows_fd = rows_fd;
	c->procs_fd = procs_fd;
	c->max_rows = max_rows;
	c->max_procs = max_procs;
	c->max_files = max_files;
	c->files = calloc(max_files, sizeof(*c->files));
	if (!c->files) {
		free(c);
		return NULL;
	}
	return c;
}

void cfitab__stats(const struct cfitab *c, struct cfitab_stats *st)
{
	*st = c ? c->st : (struct cfitab_stats){0};
	if (c)
		st->rows = c->used;
}

void cfitab__free(struct cfitab *c)
{
	if (!c)
		return;
	free(c->files);
	free(c);
}
