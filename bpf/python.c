// SPDX-License-Identifier: MIT
/* bpf/python.c — see python.h. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>

#include "agent/core/pydebug.h"
#include "agent/core/pyname.h"
#include "bpf/pyproc.h"
#include "bpf/interp.h"
#include "bpf/python.h"

#define SWEEP_NS 5000000000ull

/*
 * gilstate.tstate_current in 3.11's _PyRuntime: 16 bytes further on aarch64, whose ceval
 * locks before it are bigger (py-spy's table). A wrong one only loses the fast path: the
 * thread is then found in the interpreter's list.
 */
#if defined(__aarch64__)
#define TSTATE_CURRENT_311 592
#else
#define TSTATE_CURRENT_311 576
#endif

/*
 * Offsets by version (LP64). 3.11: Include/internal/pycore_runtime.h, pycore_interp.h,
 * cpython/pystate.h, pycore_frame.h and cpython/code.h; checked with ctypes against Debian
 * 12's python3.11 3.11.2 (x86_64): _PyRuntime + 40 and + 576 hold PyInterpreterState_Get()
 * and PyThreadState_Get(), the interpreter's + 16 the thread state, the thread state's + 8
 * the next one and + 160 threading.get_native_id(); the frame's fields as agent/lib/pyframes.c.
 */
struct py_version {
	unsigned int minor;
	struct py_proc off;
};

static const struct py_version versions[] = {
    {.minor = 11,
     .off = {.rt_tstate_current = TSTATE_CURRENT_311, .rt_interp_head = 40,
	     .is_threads_head = 16, .ts_next = 8, .ts_native_tid = 160, .ts_cframe = 56,
	     .cf_current = 8, .f_code = 32, .f_previous = 48, .f_prev_instr = 56,
	     .f_is_entry = 68, .code_adaptive = 184}},
};

static const struct py_version *version_of(unsigned int major, unsigned int minor)
{
	if (sizeof(void *) != 8 || major != 3 || !pycode__layout(minor))
		return NULL; /* ILP32 offsets not checked on a target yet */
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (versions[i].minor == minor)
			return &versions[i];
	return NULL;
}

/* ---- the interpreter's file ------------------------------------------------------------- */

#define PYFILES 8	       /* interpreter files remembered (a system has one or two) */
#define PY_MAX_LOADS 8	       /* PT_LOAD segments remembered per file */
#define PY_MAX_SECTIONS 256
#define PY_MAX_DYNSTR (4u << 20) /* a bigger .dynstr is not an interpreter's */

struct pyfile {
	char path[PROCMAP_PATH];
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	bool used, cpython;	/* cpython: the three symbols are there */
	unsigned int major, minor; /* from Py_Version; 0.0: none (before 3.11) */
	bool have_debug;	   /* 3.13+: debug holds its own offsets (debug_offsets()) */
	struct py_proc debug;
	uint64_t runtime, eval, eval_size; /* link-time addresses */
	unsigned int n_loads;
	struct {
		uint64_t vaddr, offset, filesz;
	} loads[PY_MAX_LOADS];
};

/* The file offset of link-time address vaddr, or -1. */
static int64_t file_offset(const struct pyfile *f, uint64_t vaddr)
{
	for (unsigned int i = 0; i < f->n_loads; i++)
		if (vaddr >= f->loads[i].vaddr && vaddr - f->loads[i].vaddr < f->loads[i].filesz)
			return (int64_t)(vaddr - f->loads[i].vaddr + f->loads[i].offset);
	return -1;
}

static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/*
 * 3.13's offsets from its own _Py_DebugOffsets (agent/core/pydebug.h), which _PyRuntime's
 * initializer puts in the file's data: read there, not from the process. No GIL holder in
 * _PyRuntime: the sampled thread is found in the interpreter's list.
 */
static void debug_offsets(int fd, struct pyfile *f)
{
	unsigned char head[PYDEBUG_BYTES];
	struct pydebug_offsets d;
	int64_t at = file_offset(f, f->runtime);

	f->have_debug = false;
	if (at < 0 || !read_at(fd, head, sizeof(head), (uint64_t)at) ||
	    pydebug__parse(head, sizeof(head), &d) || d.minor != f->minor)
		return;
	f->debug = (struct py_proc){
	    .rt_interp_head = d.rt_interpreters_head, .is_threads_head = d.interp_threads_head,
	    .ts_next = d.tstate_next, .ts_native_tid = d.tstate_native_thread_id,
	    .ts_cframe = d.tstate_current_frame, .ts_holds_frame = 1, .f_code = d.f_executable,
	    .f_previous = d.f_previous, .f_prev_instr = d.f_instr_ptr, .f_is_entry = d.f_owner,
	    .entry_is_shim = 1, .code_adaptive = d.code_adaptive};
	f->have_debug = true;
}

/* The three symbols from .dynsym (a stripped interpreter keeps them there). */
static int read_dynsym(int fd, const Elf64_Shdr *sym, const Elf64_Shdr *str, struct pyfile *f)
{
	Elf64_Sym chunk[256];
	uint64_t n = sym->sh_size / sizeof(Elf64_Sym), version = 0;
	char *names;
	bool have_rt = false, have_eval = false, have_version = false;
	int64_t at;

	if (str->sh_size > PY_MAX_DYNSTR || sym->sh_entsize != sizeof(Elf64_Sym))
		return -EFBIG;
	names = malloc(str->sh_size + 1);
	if (!names)
		return -ENOMEM;
	if (!read_at(fd, names, str->sh_size, str->sh_offset)) {
		free(names);
		return -EIO;
	}
	names[str->sh_size] = 0;
	for (uint64_t i = 0; i < n; i += 256) {
		uint64_t k = n - i < 256 ? n - i : 256;

		if (!read_at(fd, chunk, k * sizeof(chunk[0]), sym->sh_offset + i * sizeof(chunk[0])))
			break;
		for (uint64_t j = 0; j < k; j++) {
			const char *name = chunk[j].st_name < str->sh_size ? names + chunk[j].st_name : "";

			if (!chunk[j].st_value || chunk[j].st_shndx == SHN_UNDEF)
				continue;
			if (!strcmp(name, "_PyRuntime")) {
				f->runtime = chunk[j].st_value;
				have_rt = true;
			} else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
				f->eval = chunk[j].st_value;
				f->eval_size = chunk[j].st_size;
				have_eval = f->eval_size > 0;
			} else if (!strcmp(name, "Py_Version")) {
				version = chunk[j].st_value;
				have_version = true;
			}
		}
	}
	free(names);
	f->cpython = have_rt && have_eval;
	/* Py_Version (3.11+): PY_VERSION_HEX, 0x030b02f0 for 3.11.2 (little-endian low word) */
	if (f->cpython && have_version) {
		uint32_t hex = 0;

		at = file_offset(f, version);
		if (at >= 0 && read_at(fd, &hex, sizeof(hex), (uint64_t)at)) {
			f->major = hex >> 24;
			f->minor = hex >> 16 & 0xff;
		}
		if (f->major == 3 && f->minor >= 13 && sizeof(void *) == 8)
			debug_offsets(fd, f);
	}
	return 0;
}

/* The segments and the symbols of an ELF64 file: 0 (f->cpython says what it is), or -errno. */
static int read_file(int fd, struct pyfile *f)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	Elf64_Shdr *sh;
	int err = 0;

	if (!read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph) ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > PY_MAX_SECTIONS)
		return -ENOEXEC;
	for (unsigned int i = 0; i < eh.e_phnum && f->n_loads < PY_MAX_LOADS; i++) {
		if (!read_at(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)))
			return -EIO;
		if (ph.p_type == PT_LOAD) {
			f->loads[f->n_loads].vaddr = ph.p_vaddr;
			f->loads[f->n_loads].offset = ph.p_offset;
			f->loads[f->n_loads++].filesz = ph.p_filesz;
		}
	}
	sh = calloc(eh.e_shnum ? eh.e_shnum : 1, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	if (!read_at(fd, sh, eh.e_shnum * sizeof(*sh), eh.e_shoff)) {
		free(sh);
		return -EIO;
	}
	for (unsigned int i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM && sh[i].sh_link < eh.e_shnum) {
			err = read_dynsym(fd, &sh[i], &sh[sh[i].sh_link], f);
			break;
		}
	free(sh);
	return err;
}

/* ---- the processes ------------------------------------------------------------------------ */

/* A process looked at: its maps' listing, and what it was found to be. */
struct pyslot {
	uint32_t pid;
	const struct procmaps *pm; /* the listing looked at (a new one after exec, dlopen) */
	unsigned int n_maps;
	uint64_t first_start;	   /* with pm, tells a listing reused at the same address */
	bool listed;		   /* in py_procs: its samples carry Python frames */
	unsigned int minor;
	uint64_t eval_lo, eval_hi;
};

struct bpfpy {
	struct bpfinterp m; /* its maps, bounds and the sweep's keys */
	struct bpfpy_stats st;
	struct pyfile files[PYFILES];
	unsigned int next_file;
	struct pyslot slots[];
};

struct bpfpy *bpfpy__new(int procs_fd, int counts_fd, unsigned int max_procs, int ncpus)
{
	struct bpfpy *p = calloc(1, sizeof(*p) + 4 * (size_t)max_procs * sizeof(p->slots[0]));

	if (p && bpfinterp__init(&p->m, procs_fd, counts_fd, max_procs, ncpus)) {
		free(p);
		return NULL;
	}
	return p;
}

void bpfpy__free(struct bpfpy *p)
{
	if (!p)
		return;
	bpfinterp__release(&p->m);
	free(p);
}

/* Could path be an interpreter: python3.N, libpython3.N.so* (the mapping's last part)? */
static bool maybe_python(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "lib", 3))
		base += 3;
	return !strncmp(base, "python3.", 8) && base[8] >= '0' && base[8] <= '9';
}

/* The file at path, read once (the remembered ones by path, inode and mtime): NULL if none. */
static const struct pyfile *file_get(struct bpfpy *p, const char *path)
{
	struct pyfile *f;
	struct stat sb;
	int fd;

	if (stat(path, &sb))
		return NULL;
	for (unsigned int i = 0; i < PYFILES; i++) {
		f = &p->files[i];
		if (f->used && f->ino == sb.st_ino && f->dev == sb.st_dev &&
		    f->mtime.tv_sec == sb.st_mtim.tv_sec && f->mtime.tv_nsec == sb.st_mtim.tv_nsec &&
		    !strcmp(f->path, path))
			return f;
	}
	f = &p->files[p->next_file++ % PYFILES];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->dev = sb.st_dev;
	f->ino = sb.st_ino;
	f->mtime = sb.st_mtim;
	f->used = true;
	p->st.files_read++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return f; /* remembered as not CPython: not tried at every sample */
	if (read_file(fd, f))
		f->cpython = false;
	close(fd);
	return f;
}

/* Lists the process of slot (its mapping m of interpreter f) in the program's map. */
static void list_proc(struct bpfpy *p, struct pyslot *slot, const struct procmap *m,
		      const struct pyfile *f)
{
	const struct py_version *v = version_of(f->major, f->minor);
	uint64_t bias;
	struct py_proc e;

	if (!v && !f->have_debug) {
		p->st.unknown_version++;
		return;
	}
	/* the load bias: where the segment holding the mapping's offset was put */
	for (unsigned int i = 0; i < f->n_loads; i++)
		if (m->offset >= f->loads[i].offset &&
		    m->offset - f->loads[i].offset < f->loads[i].filesz) {
			bias = m->start - m->offset - (f->loads[i].vaddr - f->loads[i].offset);
			e = f->have_debug ? f->debug : v->off;
			e.runtime = f->runtime + bias;
			if (bpf_map_update_elem(p->m.procs_fd, &slot->pid, &e, BPF_ANY)) {
				if (errno == E2BIG || errno == ENOMEM)
					p->st.procs_full++;
				return;
			}
			slot->listed = true;
			slot->minor = f->minor;
			slot->eval_lo = f->eval + bias;
			slot->eval_hi = slot->eval_lo + f->eval_size;
			return;
		}
}

/* What the process of pm is, looked at once per listing of its maps. */
static struct pyslot *look_at(struct bpfpy *p, const struct procmaps *pm)
{
	struct pyslot *slot = &p->slots[pm->pid % p->m.n_slots];
	uint64_t first = pm->n ? pm->maps[0].start : 0;
	bool was = slot->pid == pm->pid && slot->listed;
	uint64_t eval_was = slot->eval_lo;

	if (slot->pid == pm->pid && slot->pm == pm && slot->n_maps == pm->n &&
	    slot->first_start == first)
		return slot;
	/* a process evicted from the slot stays listed: its samples look at it again */
	*slot = (struct pyslot){.pid = pm->pid, .pm = pm, .n_maps = pm->n, .first_start = first};
	p->st.looked_at++;
	for (unsigned int i = 0; i < pm->n; i++) {
		const struct pyfile *f;

		if (!maybe_python(pm->maps[i].path))
			continue;
		f = file_get(p, pm->maps[i].path);
		if (f && f->cpython) {
			list_proc(p, slot, &pm->maps[i], f);
			break;
		}
	}
	/*
	 * Exec'd: its code objects may be others, their names are read again. Only mapped more (an
	 * extension module imported: the eval loop where it was), the names read stay: forgotten,
	 * a process that exited before the round was written lost the names of the frames not
	 * sampled again since.
	 */
	if (was && !(slot->listed && slot->eval_lo == eval_was))
		pyname__forget(pm->pid);
	if (was && !slot->listed)
		bpf_map_delete_elem(p->m.procs_fd, &slot->pid);
	return slot;
}

/* The Python frames of one eval activation from a record's (pyframes_next_fn). */
struct rec_chain {
	const uint64_t *py;
	unsigned int n, i;
};

static unsigned int next_activation(void *ctx, uint64_t *out, unsigned int room, bool *cut)
{
	struct rec_chain *c = ctx;
	unsigned int k = 0;

	while (c->i < c->n) {
		uint64_t w = c->py[c->i];

		if (k == room) {
			*cut = true;
			break;
		}
		c->i++;
		if (w == PY_REC_ENTRY) /* 3.13's entry shim: the activation ends before it */
			break;
		/* the record's unit plus one is the word's (0: none; past 0xfffe: 0 too) */
		out[k++] = pyframe__tag((uintptr_t)(w & PY_REC_CODE_MASK), (unsigned int)(w >> 48));
		if (w & PY_REC_ENTRY)
			break;
	}
	return k;
}

const struct agent_sample *bpfpy__sample(struct bpfpy *p, const struct procmaps *pm,
					 const struct agent_sample *s, uint64_t *buf,
					 unsigned int max, struct agent_sample *out)
{
	struct pyslot *slot;
	struct rec_chain c;
	struct pysplice sp;
	unsigned int nk = s->n_kernel, nu, pushed, activations;
	bool cut = false;

	if (!p || !pm || pm->pid != s->pid)
		return s;
	slot = look_at(p, pm);
	if (!slot->listed || !s->n_py || (s->flags & SAMPLE_F_LUA) || nk >= max)
		return s;
	c = (struct rec_chain){.py = s->py, .n = s->n_py};
	sp = (struct pysplice){.eval_lo = slot->eval_lo, .eval_hi = slot->eval_hi,
			       .budget = s->n_py, .next = next_activation, .ctx = &c};
	memcpy(buf, s->frames, nk * sizeof(buf[0]));
	nu = pyframes__splice_into(&sp, s->frames + nk, s->n_user, buf + nk, max - nk, &pushed,
				   &activations, &cut);
	if (!activations || !pushed) {
		p->st.no_eval++;
		return s;
	}
	*out = *s;
	out->frames = buf;
	out->n_user = (uint16_t)nu;
	out->py = NULL;
	out->n_py = 0;
	if (cut) {
		out->flags |= SAMPLE_F_TRUNCATED;
		p->st.truncated++;
	}
	p->st.spliced++;
	p->st.frames += pushed;
	pyname__warm(s->pid, buf + nk, nu); /* while its code objects live */
	return out;
}

void bpfpy__sweep(struct bpfpy *p, uint64_t now)
{
	if (!p)
		return;
	/*
	 * The names read while it ran stay (and its slot, which forgets them if the pid comes
	 * back with other maps): the round's profile is written after the process may be gone.
	 */
	p->st.exited += bpfinterp__sweep_every(&p->m, now, SWEEP_NS);
}

/* The program's counter k, summed over the CPUs. */
static uint64_t bpf_count(const struct bpfpy *p, uint32_t k)
{
	return bpfinterp__percpu_sum(p->m.counts_fd, p->m.ncpus, k);
}

void bpfpy__stats(const struct bpfpy *p, struct bpfpy_stats *st)
{
	*st = (struct bpfpy_stats){0};
	if (!p)
		return;
	*st = p->st;
	st->procs = bpfinterp__count(p->m.procs_fd, p->m.max_procs);
	st->bpf_samples = bpf_count(p, PY_C_SAMPLES);
	st->bpf_frames = bpf_count(p, PY_C_FRAMES);
	st->no_thread = bpf_count(p, PY_C_NO_THREAD);
	st->idle = bpf_count(p, PY_C_IDLE);
	st->bpf_truncated = bpf_count(p, PY_C_TRUNCATED);
	st->read_errors = bpf_count(p, PY_C_READ);
}
