// SPDX-License-Identifier: MIT
/* bpf/v8.c — see v8.h. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>

#include "agent/core/v8name.h"
#include "bpf/profile.h"
#include "bpf/interp.h"
#include "bpf/v8.h"
#include "bpf/v8proc.h"

#define SWEEP_NS 5000000000ull
#define V8FILES 4      /* node files remembered (a system has one or two) */
#define V8_MAX_LOADS 8 /* PT_LOAD segments remembered per file */
#define V8_MAX_SECTIONS 256
#define V8_MAX_DYNSTR (32u << 20) /* node's is 5.3 MB (NodeSource 20), libnode's 5.0 */
#define V8_MIN_MAJOR 10		  /* Debian 12's node 18 (10.2) and later: checked on 10.2, 11.3 */

/* The symbols read, in the order of struct v8syms's fields. */
static const char *const wanted[] = {
    "v8dbg_type_JSFunction__JS_FUNCTION_TYPE",
    "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
    "v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE",
    "v8dbg_type_Script__SCRIPT_TYPE",
    "v8dbg_FirstNonstringType",
    "v8dbg_class_HeapObject__map__Map",
    "v8dbg_class_Map__instance_type__uint16_t",
    "v8dbg_class_JSFunction__shared__SharedFunctionInfo",
    "v8dbg_off_fp_context",
    "v8dbg_off_fp_function",
    "v8dbg_off_fp_bytecode_offset",
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
    "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
    "v8dbg_class_Script__name__Object",
    "v8dbg_class_String__length__int32_t",
    "v8dbg_class_SeqOneByteString__chars__char",
    "v8dbg_class_SeqTwoByteString__chars__char",
    "v8dbg_class_ConsString__first__String",
    "v8dbg_class_ConsString__second__String",
    "v8dbg_class_ThinString__actual__String",
    "v8dbg_StringRepresentationMask",
    "v8dbg_StringEncodingMask",
    "v8dbg_SeqStringTag",
    "v8dbg_ConsStringTag",
    "v8dbg_ThinStringTag",
    "v8dbg_OneByteStringTag",
    "v8dbg_scopeinfo_idx_first_vars",
    "v8dbg_scopeinfo_idx_ncontextlocals",
    "v8dbg_parent_ScopeInfo__HeapObject", /* a HeapObject (9.1+), not a FixedArray */
    "v8dbg_type_FixedArray__FIXED_ARRAY_TYPE",
    "v8dbg_class_FixedArrayBase__length__SMI",
    "v8dbg_class_FixedArray__data__uintptr_t",
    "v8dbg_class_Script__source__Object",
    "v8dbg_class_Script__line_ends__Object",
    "_ZN2v88internal7Version6major_E",
    "_ZN2v88internal7Version6minor_E",
};

enum {
	S_JSFUNCTION,
	S_SFI,
	S_SCOPE_INFO,
	S_SCRIPT,
	S_FIRST_NONSTRING,
	S_MAP,
	S_INSTANCE_TYPE,
	S_SHARED,
	S_FP_CONTEXT,
	S_FP_FUNCTION,
	S_FP_BYTECODE_OFFSET,
	S_NAME_OR_SCOPE,
	S_SCRIPT_OR_DEBUG,
	S_SCRIPT_NAME,
	S_STR_LENGTH,
	S_SEQ_ONE,
	S_SEQ_TWO,
	S_CONS_FIRST,
	S_CONS_SECOND,
	S_THIN,
	S_REPR_MASK,
	S_ENC_MASK,
	S_SEQ_TAG,
	S_CONS_TAG,
	S_THIN_TAG,
	S_ONE_BYTE_TAG,
	S_FIRST_VARS,
	S_NCONTEXT_LOCALS,
	S_SCOPE_IS_HEAPOBJECT,
	S_FIXED_ARRAY,
	S_FIXED_LENGTH,
	S_FIXED_DATA,
	S_SCRIPT_SOURCE,
	S_SCRIPT_LINE_ENDS,
	S_MAJOR,
	S_MINOR,
	S_N
};
_Static_assert(sizeof(wanted) / sizeof(wanted[0]) == S_N, "one name per symbol");

struct v8file {
	char path[PROCMAP_PATH];
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	bool used, v8; /* v8: every symbol there, a version the walk knows */
	bool has[S_N];
	int32_t val[S_N];
	uint16_t type_after_jsfunction; /* the lowest v8dbg_type_ value above JS_FUNCTION_TYPE */
	struct v8_proc proc;
	int layout; /* v8name__layout()'s index */
	unsigned int n_loads;
	struct {
		uint64_t vaddr, offset, filesz, memsz;
	} loads[V8_MAX_LOADS];
};

static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/* The 4-byte value at link-time address vaddr (0 in .bss, as the loader makes it): 0 or -1. */
static int value_at(int fd, const struct v8file *f, uint64_t vaddr, int32_t *out)
{
	for (unsigned int i = 0; i < f->n_loads; i++) {
		uint64_t rel = vaddr - f->loads[i].vaddr;

		if (vaddr < f->loads[i].vaddr || rel + 4 > f->loads[i].memsz)
			continue;
		if (rel >= f->loads[i].filesz) {
			*out = 0;
			return 0;
		}
		return read_at(fd, out, 4, f->loads[i].offset + rel) ? 0 : -1;
	}
	return -1;
}

/* One .dynsym symbol: one of the wanted ones? */
static void take_symbol(int fd, struct v8file *f, const char *name, uint64_t value)
{
	for (int i = 0; i < S_N; i++)
		if (!f->has[i] && !strcmp(name, wanted[i])) {
			f->has[i] = !value_at(fd, f, value, &f->val[i]);
			return;
		}
}

/*
 * The lowest type value above JS_FUNCTION_TYPE among all v8dbg_type_ symbols (a second pass
 * over the names kept: JS_FUNCTION_TYPE must be known first).
 */
static void type_after(int fd, struct v8file *f, const char *name, uint64_t value)
{
	int32_t v;

	if (strncmp(name, "v8dbg_type_", 11) || value_at(fd, f, value, &v))
		return;
	if (v > f->val[S_JSFUNCTION] && v <= 0xffff &&
	    (!f->type_after_jsfunction || v < f->type_after_jsfunction))
		f->type_after_jsfunction = (uint16_t)v;
}

typedef void (*symbol_fn)(int fd, struct v8file *f, const char *name, uint64_t value);

static int each_symbol(int fd, const Elf64_Shdr *sym, const char *names, uint64_t names_len,
		       struct v8file *f, symbol_fn fn)
{
	Elf64_Sym chunk[512];
	uint64_t n = sym->sh_size / sizeof(Elf64_Sym);

	for (uint64_t i = 0; i < n; i += 512) {
		uint64_t k = n - i < 512 ? n - i : 512;

		if (!read_at(fd, chunk, k * sizeof(chunk[0]),
			     sym->sh_offset + i * sizeof(chunk[0])))
			return -EIO;
		for (uint64_t j = 0; j < k; j++) {
			const char *name =
			    chunk[j].st_name < names_len ? names + chunk[j].st_name : "";

			if (chunk[j].st_shndx == SHN_UNDEF || name[0] == 0 ||
			    (name[0] != 'v' && name[0] != '_'))
				continue;
			fn(fd, f, name, chunk[j].st_value);
		}
	}
	return 0;
}

/* A frame-pointer offset as a word of the program's window, or -1. */
static int window_slot(int32_t off)
{
	if (off < -V8_WIN_BELOW || off >= 0 || off % 8)
		return -1;
	return (off + V8_WIN_BELOW) / 8;
}

static bool small(int32_t v)
{
	return v >= 0 && v < 0x10000;
}

/* The program's entry and the writer's layout from the symbols: f->v8 when all check out. */
static void finish(struct v8file *f)
{
	int ctx = window_slot(f->val[S_FP_CONTEXT]), fn = window_slot(f->val[S_FP_FUNCTION]),
	    bco = window_slot(f->val[S_FP_BYTECODE_OFFSET]);
	struct v8name_layout l;

	for (int i = 0; i < S_N; i++)
		if (!f->has[i])
			return;
	for (int i = 0; i < S_N; i++)
		if (i != S_FP_CONTEXT && i != S_FP_FUNCTION && i != S_FP_BYTECODE_OFFSET &&
		    !small(f->val[i]))
			return;
	if (f->val[S_MAJOR] < V8_MIN_MAJOR || ctx < 0 || fn < 0 || bco < 0 ||
	    !f->type_after_jsfunction || f->val[S_MAP] > 255 || f->val[S_INSTANCE_TYPE] > 255 ||
	    f->val[S_SHARED] > 255)
		return;
	f->proc = (struct v8_proc){.type_jsfunction_first = (__u16)f->val[S_JSFUNCTION],
				   .type_jsfunction_last = (__u16)(f->type_after_jsfunction - 1),
				   .type_sfi = (__u16)f->val[S_SFI],
				   .off_map = (__u8)f->val[S_MAP],
				   .off_instance_type = (__u8)f->val[S_INSTANCE_TYPE],
				   .off_shared = (__u8)f->val[S_SHARED],
				   .slot_context = (__u8)ctx,
				   .slot_function = (__u8)fn,
				   .slot_bytecode_offset = (__u8)bco};
	l = (struct v8name_layout){.type_sfi = (uint16_t)f->val[S_SFI],
				   .type_scope_info = (uint16_t)f->val[S_SCOPE_INFO],
				   .type_script = (uint16_t)f->val[S_SCRIPT],
				   .first_nonstring_type = (uint16_t)f->val[S_FIRST_NONSTRING],
				   .off_map = (uint16_t)f->val[S_MAP],
				   .off_instance_type = (uint16_t)f->val[S_INSTANCE_TYPE],
				   .sfi_name_or_scope_info = (uint16_t)f->val[S_NAME_OR_SCOPE],
				   .sfi_script = (uint16_t)f->val[S_SCRIPT_OR_DEBUG],
				   .script_name = (uint16_t)f->val[S_SCRIPT_NAME],
				   .string_length = (uint16_t)f->val[S_STR_LENGTH],
				   .seq_one_chars = (uint16_t)f->val[S_SEQ_ONE],
				   .seq_two_chars = (uint16_t)f->val[S_SEQ_TWO],
				   .cons_first = (uint16_t)f->val[S_CONS_FIRST],
				   .cons_second = (uint16_t)f->val[S_CONS_SECOND],
				   .thin_actual = (uint16_t)f->val[S_THIN],
				   .repr_mask = (uint16_t)f->val[S_REPR_MASK],
				   .encoding_mask = (uint16_t)f->val[S_ENC_MASK],
				   .seq_tag = (uint16_t)f->val[S_SEQ_TAG],
				   .cons_tag = (uint16_t)f->val[S_CONS_TAG],
				   .thin_tag = (uint16_t)f->val[S_THIN_TAG],
				   .one_byte_tag = (uint16_t)f->val[S_ONE_BYTE_TAG],
				   .scope_first_vars = (uint16_t)f->val[S_FIRST_VARS],
				   .scope_ncontext_locals = (uint16_t)f->val[S_NCONTEXT_LOCALS],
				   .type_fixed_array = (uint16_t)f->val[S_FIXED_ARRAY],
				   .fixed_length = (uint16_t)f->val[S_FIXED_LENGTH],
				   .fixed_data = (uint16_t)f->val[S_FIXED_DATA],
				   .script_source = (uint16_t)f->val[S_SCRIPT_SOURCE],
				   .script_line_ends = (uint16_t)f->val[S_SCRIPT_LINE_ENDS]};
	f->layout = v8name__layout(&l);
	f->v8 = f->layout >= 0;
}

/* The segments and the symbols of an ELF64 file: 0 (f->v8 says what it is), or -errno. */
static int read_file(int fd, struct v8file *f)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	Elf64_Shdr *sh;
	char *names = NULL;
	int err = -ENOENT;

	if (!read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph) ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > V8_MAX_SECTIONS)
		return -ENOEXEC;
	for (unsigned int i = 0; i < eh.e_phnum && f->n_loads < V8_MAX_LOADS; i++) {
		if (!read_at(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)))
			return -EIO;
		if (ph.p_type == PT_LOAD) {
			f->loads[f->n_loads].vaddr = ph.p_vaddr;
			f->loads[f->n_loads].offset = ph.p_offset;
			f->loads[f->n_loads].memsz = ph.p_memsz;
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
	for (unsigned int i = 0; i < eh.e_shnum; i++) {
		const Elf64_Shdr *str = &sh[sh[i].sh_link < eh.e_shnum ? sh[i].sh_link : 0];

		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_entsize != sizeof(Elf64_Sym))
			continue;
		err = -EFBIG;
		if (str->sh_size > V8_MAX_DYNSTR)
			break;
		err = -ENOMEM;
		names = malloc(str->sh_size + 1);
		if (!names)
			break;
		err = read_at(fd, names, str->sh_size, str->sh_offset) ? 0 : -EIO;
		names[str->sh_size] = 0;
		if (!err)
			err = each_symbol(fd, &sh[i], names, str->sh_size, f, take_symbol);
		if (!err && f->has[S_JSFUNCTION])
			err = each_symbol(fd, &sh[i], names, str->sh_size, f, type_after);
		break;
	}
	free(names);
	free(sh);
	if (!err)
		finish(f);
	return err;
}

int bpfv8__file_entry(const char *path, struct v8_proc *proc, int *major, int *minor)
{
	struct v8file *f = calloc(1, sizeof(*f));
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (!f || fd < 0) {
		err = f ? -errno : -ENOMEM;
		free(f);
		if (fd >= 0)
			close(fd);
		return err;
	}
	err = read_file(fd, f);
	close(fd);
	if (!err && !f->v8)
		err = -ENOENT;
	if (!err) {
		*proc = f->proc;
		*major = f->val[S_MAJOR];
		*minor = f->val[S_MINOR];
	}
	free(f);
	return err;
}

/* ---- the processes ------------------------------------------------------------------------ */

/* A process looked at: its maps' listing, and what it was found to be. */
struct v8slot {
	uint32_t pid;
	const struct procmaps *pm; /* the listing looked at (a new one after exec, dlopen) */
	unsigned int n_maps;
	uint64_t first_start; /* with pm, tells a listing reused at the same address */
	bool listed;	      /* in v8_procs: its samples carry JavaScript frames */
	int layout;
};

struct bpfv8 {
	struct bpfinterp m; /* its maps, bounds and the sweep's keys */
	struct bpfv8_stats st;
	struct v8file files[V8FILES];
	unsigned int next_file;
	struct v8slot slots[];
};

struct bpfv8 *bpfv8__new(int procs_fd, int counts_fd, unsigned int max_procs, int ncpus)
{
	struct bpfv8 *v = calloc(1, sizeof(*v) + 4 * (size_t)max_procs * sizeof(v->slots[0]));

	if (v && bpfinterp__init(&v->m, procs_fd, counts_fd, max_procs, ncpus)) {
		free(v);
		return NULL;
	}
	return v;
}

void bpfv8__free(struct bpfv8 *v)
{
	if (!v)
		return;
	bpfinterp__release(&v->m);
	free(v);
}

/* Could path be V8's: node, nodejs, libnode.so* (the mapping's last part)? */
static bool maybe_v8(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strcmp(base, "node") || !strcmp(base, "nodejs") || !strncmp(base, "libnode.so", 10);
}

/* The file at path, read once (the remembered ones by path, inode and mtime): NULL if none. */
static const struct v8file *file_get(struct bpfv8 *v, const char *path)
{
	struct v8file *f;
	struct stat sb;
	int fd;

	if (stat(path, &sb))
		return NULL;
	for (unsigned int i = 0; i < V8FILES; i++) {
		f = &v->files[i];
		if (f->used && f->ino == sb.st_ino && f->dev == sb.st_dev &&
		    f->mtime.tv_sec == sb.st_mtim.tv_sec &&
		    f->mtime.tv_nsec == sb.st_mtim.tv_nsec && !strcmp(f->path, path))
			return f;
	}
	f = &v->files[v->next_file++ % V8FILES];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->dev = sb.st_dev;
	f->ino = sb.st_ino;
	f->mtime = sb.st_mtim;
	f->used = true;
	v->st.files_read++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return f; /* remembered as not V8: not tried at every sample */
	if (read_file(fd, f) || !f->v8)
		f->v8 = false;
	if (!f->v8 && f->has[S_JSFUNCTION]) /* V8's symbols, not all the walk needs */
		v->st.unknown_version++;
	close(fd);
	return f;
}

/*
 * Whether the process writes a perf map (node --perf-basic-prof; its own /tmp, as
 * agent/core/perfmap.c reads it): its JIT frames are then named from it, as its operator
 * asked (the same function and first line, and code V8 made that is not a JavaScript
 * function's: stubs, regular expressions); the process is not listed (its interpreted frames
 * stay InterpreterEntryTrampoline, as the flag alone gives them).
 */
static bool has_perf_map(uint32_t pid)
{
	char path[64];

	if (!IS_ENABLED(CONFIG_PERFMAP))
		return false;
	snprintf(path, sizeof(path), "/proc/%u/root/tmp/perf-%u.map", pid, pid);
	return access(path, F_OK) == 0;
}

/* What the process of pm is, looked at once per listing of its maps. */
static struct v8slot *look_at(struct bpfv8 *v, const struct procmaps *pm)
{
	struct v8slot *slot = &v->slots[pm->pid % v->m.n_slots];
	uint64_t first = pm->n ? pm->maps[0].start : 0;
	bool was = slot->pid == pm->pid && slot->listed;

	if (slot->pid == pm->pid && slot->pm == pm && slot->n_maps == pm->n &&
	    slot->first_start == first)
		return slot;
	/* a process evicted from the slot stays listed: its samples look at it again */
	*slot = (struct v8slot){.pid = pm->pid, .pm = pm, .n_maps = pm->n, .first_start = first};
	v->st.looked_at++;
	if (was)
		v8name__forget(pm->pid); /* exec'd (or mapped more): its objects may be others */
	for (unsigned int i = 0; i < pm->n; i++) {
		const struct v8file *f;

		if (!maybe_v8(pm->maps[i].path))
			continue;
		f = file_get(v, pm->maps[i].path);
		if (!f || !f->v8)
			continue;
		if (has_perf_map(pm->pid)) {
			v->st.perf_map++;
			break;
		}
		if (bpf_map_update_elem(v->m.procs_fd, &slot->pid, &f->proc, BPF_ANY)) {
			if (errno == E2BIG || errno == ENOMEM)
				v->st.procs_full++;
			break;
		}
		slot->listed = true;
		slot->layout = f->layout;
		break;
	}
	if (was && !slot->listed)
		bpf_map_delete_elem(v->m.procs_fd, &slot->pid);
	return slot;
}

/*
 * Where each JavaScript frame's pc is among the native frames fr[0..nu) (both lists run from
 * the leaf: each is looked for after the last one found): at[j], or -1 when no native frame
 * has it. The count found.
 */
static unsigned int match(const uint64_t *fr, unsigned int nu, const uint64_t *js, unsigned int nj,
			  int *at)
{
	unsigned int from = 0, found = 0;

	for (unsigned int j = 0; j < nj; j++) {
		unsigned int i = from;

		while (i < nu && fr[i] != js[2 * j])
			i++;
		at[j] = i < nu ? (int)i : -1;
		if (i < nu) {
			from = i + 1;
			found++;
		}
	}
	return found;
}

/* The tagged word of a recorded SharedFunctionInfo word (bpf/v8proc.h). */
static uint64_t tag(const struct v8slot *slot, uint64_t rec)
{
	return v8frame__tag((unsigned int)slot->layout, rec & V8_REC_SFI_MASK);
}

const struct agent_sample *bpfv8__sample(struct bpfv8 *v, const struct procmaps *pm,
					 const struct agent_sample *s, uint64_t *buf,
					 unsigned int max, struct agent_sample *out)
{
	unsigned int nk = s->n_kernel, nu = s->n_user, nj = s->n_py / 2, o, j = 0, put = 0, i;
	const uint64_t *fr = s->frames + nk;
	int at[PROFILE_V8_FRAMES];
	struct v8slot *slot;

	if (!v || !pm || pm->pid != s->pid)
		return s;
	slot = look_at(v, pm);
	if (!slot->listed || !nj || (s->n_py & 1) || nj > PROFILE_V8_FRAMES || nk + nu > max ||
	    !match(fr, nu, s->py, nj, at))
		return s;
	memcpy(buf, s->frames, nk * sizeof(buf[0]));
	/*
	 * A JavaScript frame takes the place of the native frame with its pc; those no native
	 * frame has (the native walk ended early: a stack copy walked by .eh_frame stops in JIT
	 * code) go in right after the last one placed (before the next one placed, at the
	 * start), in the order of the chain.
	 */
	o = nk;
	for (i = 0; i < nu && o < max; i++) {
		unsigned int k = j;

		while (k < nj && at[k] < 0)
			k++;
		if (k == nj || at[k] != (int)i) {
			buf[o++] = fr[i];
			continue;
		}
		for (; j <= k && o < max; j++, put++)
			buf[o++] = tag(slot, s->py[2 * j + 1]);
		for (; j < nj && at[j] < 0 && o < max; j++, put++) {
			buf[o++] = tag(slot, s->py[2 * j + 1]);
			v->st.inserted++;
		}
	}
	*out = *s;
	out->frames = buf;
	out->n_user = (uint16_t)(o - nk);
	out->py = NULL;
	out->n_py = 0;
	if (o == max && (j < nj || i < nu)) { /* frames had no room */
		out->flags |= SAMPLE_F_TRUNCATED;
		v->st.cut++;
	}
	v->st.spliced++;
	v->st.frames += put;
	v8name__warm(s->pid, buf + nk,
		     o - nk); /* while the objects are where the sample saw them */
	return out;
}

void bpfv8__sweep(struct bpfv8 *v, uint64_t now)
{
	if (v)
		v->st.exited += bpfinterp__sweep_every(&v->m, now, SWEEP_NS);
}

/* The program's counter k, summed over the CPUs. */
static uint64_t bpf_count(const struct bpfv8 *v, uint32_t k)
{
	return bpfinterp__percpu_sum(v->m.counts_fd, v->m.ncpus, k);
}

void bpfv8__stats(const struct bpfv8 *v, struct bpfv8_stats *st)
{
	*st = (struct bpfv8_stats){0};
	if (!v)
		return;
	*st = v->st;
	st->procs = bpfinterp__count(v->m.procs_fd, v->m.max_procs);
	st->bpf_samples = bpf_count(v, V8_C_SAMPLES);
	st->bpf_frames = bpf_count(v, V8_C_FRAMES);
	st->none = bpf_count(v, V8_C_NONE);
	st->bpf_truncated = bpf_count(v, V8_C_TRUNCATED);
	st->read_errors = bpf_count(v, V8_C_READ);
}
