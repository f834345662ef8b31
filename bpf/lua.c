// SPDX-License-Identifier: MIT
/* bpf/lua.c — see lua.h. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>

#include "agent/core/luaexec.h"
#include "agent/core/luaname.h"
#include "agent/core/pyname.h"
#include "bpf/interp.h"
#include "bpf/lua.h"
#include "bpf/luaproc.h"

#define SWEEP_NS 5000000000ull
#define RESCAN_NS 100000000ull	      /* a process's stack scanned again at most this often */
#define LUAFILES 8		      /* interpreter files remembered (a system has one or two) */
#define LUA_MAX_LOADS 8		      /* PT_LOAD segments remembered per file */
#define LUA_MAX_FILE (16u << 20)      /* a bigger file is searched no further for lua_ident */
#define LUA_MAX_DATA (4u << 20)	      /* a data segment read from the process, at most */
#define SCAN_TRIES 64		      /* candidate words validated per scan */
#define STACK_SPAN (8u << 20)	      /* a running state's errorJmp: this far above sp at most */
#define TT_LCLOSURE 0x46	      /* ctb(LUA_VLCL): a Lua closure's TValue tag */

static const char ident54[] = "$LuaVersion: Lua 5.4.";

/* ---- the interpreter's file --------------------------------------------------------------- */

struct luafile {
	char path[PROCMAP_PATH];
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	bool used, lua, lua54; /* lua: has a lua_ident ($LuaVersion / $Lua); lua54: 5.4 */
	bool exec_tried;       /* luaV_execute looked for (in the first process's memory) */
	uint64_t exec_lo, exec_hi; /* link-time; 0: not found */
	uint64_t eh_vaddr, eh_size;
	unsigned int n_loads;
	struct {
		uint64_t vaddr, offset, filesz;
		uint32_t flags;
	} loads[LUA_MAX_LOADS];
};

static bool read_at(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/* The segments of an ELF64 file, and whether its bytes hold a lua_ident (5.4's or another's). */
static int read_file(int fd, const struct stat *sb, struct luafile *f)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	size_t len = sb->st_size < LUA_MAX_FILE ? (size_t)sb->st_size : LUA_MAX_FILE;
	char *bytes;

	if (!read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph))
		return -ENOEXEC;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		if (!read_at(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)))
			return -EIO;
		if (ph.p_type == PT_GNU_EH_FRAME) {
			f->eh_vaddr = ph.p_vaddr;
			f->eh_size = ph.p_memsz;
		}
		if (ph.p_type == PT_LOAD && f->n_loads < LUA_MAX_LOADS) {
			f->loads[f->n_loads].vaddr = ph.p_vaddr;
			f->loads[f->n_loads].offset = ph.p_offset;
			f->loads[f->n_loads].flags = ph.p_flags;
			f->loads[f->n_loads++].filesz = ph.p_filesz;
		}
	}
	bytes = malloc(len ? len : 1);
	if (!bytes)
		return -ENOMEM;
	if (read_at(fd, bytes, len, 0)) {
		f->lua54 = memmem(bytes, len, ident54, sizeof(ident54) - 1) != NULL;
		f->lua = f->lua54 || memmem(bytes, len, "$LuaVersion: Lua ", 17) ||
			 memmem(bytes, len, "$Lua: Lua 5.", 12) || memmem(bytes, len, "LuaJIT 2.", 9);
	}
	free(bytes);
	return 0;
}

/* ---- the processes ------------------------------------------------------------------------ */

struct luaslot {
	uint32_t pid;
	const struct procmaps *pm; /* the listing looked at (a new one after exec, dlopen) */
	unsigned int n_maps;
	uint64_t first_start;	   /* with pm, tells a listing reused at the same address */
	bool lua54;		   /* luaV_execute known: its samples are looked at */
	bool listed;		   /* in lua_procs (with a state at least) */
	uint64_t exec_lo, exec_hi; /* luaV_execute in the process */
	uint64_t last_scan_ns;
	unsigned int next_state;
	uint64_t states[PROFILE_LUA_STATES];
};

struct bpflua {
	struct bpfinterp m; /* its maps, bounds and the sweep's keys */
	struct bpflua_stats st;
	struct luafile files[LUAFILES];
	unsigned int next_file;
	struct luaslot slots[];
};

struct bpflua *bpflua__new(int procs_fd, int counts_fd, unsigned int max_procs, int ncpus)
{
	struct bpflua *p = calloc(1, sizeof(*p) + 4 * (size_t)max_procs * sizeof(p->slots[0]));

	if (p && bpfinterp__init(&p->m, procs_fd, counts_fd, max_procs, ncpus)) {
		free(p);
		return NULL;
	}
	return p;
}

void bpflua__free(struct bpflua *p)
{
	if (!p)
		return;
	bpfinterp__release(&p->m);
	free(p);
}

/* Could path be Lua: lua*, liblua* (the mapping's last part)? */
static bool maybe_lua(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "lib", 3))
		base += 3;
	return !strncmp(base, "lua", 3);
}

/* The file at path, read once (remembered by path, inode and mtime): NULL if none. */
static struct luafile *file_get(struct bpflua *p, const char *path)
{
	struct luafile *f;
	struct stat sb;
	int fd;

	if (stat(path, &sb))
		return NULL;
	for (unsigned int i = 0; i < LUAFILES; i++) {
		f = &p->files[i];
		if (f->used && f->ino == sb.st_ino && f->dev == sb.st_dev &&
		    f->mtime.tv_sec == sb.st_mtim.tv_sec && f->mtime.tv_nsec == sb.st_mtim.tv_nsec &&
		    !strcmp(f->path, path))
			return f;
	}
	f = &p->files[p->next_file++ % LUAFILES];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->dev = sb.st_dev;
	f->ino = sb.st_ino;
	f->mtime = sb.st_mtim;
	f->used = true;
	p->st.files_read++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return f; /* remembered as not Lua: not tried at every sample */
	if (read_file(fd, &sb, f))
		f->lua = f->lua54 = false;
	close(fd);
	return f;
}

static bool proc_read(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};

	return process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static bool state_read(void *ctx, uintptr_t addr, void *buf, size_t len)
{
	return proc_read(*(const uint32_t *)ctx, addr, buf, len);
}

/* luaexec_bounds_fn over a copy of the process's .eh_frame_hdr */
struct eh_copy {
	const uint8_t *bytes;
	size_t len;
	uintptr_t at;
};

static bool eh_bounds(void *ctx, uintptr_t min, uintptr_t max, uintptr_t *lo, uintptr_t *hi)
{
	const struct eh_copy *c = ctx;

	(void)max;
	return luaexec__function_bounds(c->bytes, c->len, c->at, min, lo, hi);
}

/* luaV_execute of file f loaded at bias in process pid: its relocated data read there. */
static void find_execute(uint32_t pid, struct luafile *f, uint64_t bias)
{
	struct eh_copy eh = {.at = f->eh_vaddr + bias, .len = f->eh_size};
	uintptr_t x_lo = 0, x_hi = 0, lo, hi;
	uint8_t *ehb = NULL;
	int found = 0;

	f->exec_tried = true;
	for (unsigned int i = 0; i < f->n_loads; i++)
		if (f->loads[i].flags & PF_X) {
			x_lo = f->loads[i].vaddr + bias;
			x_hi = x_lo + f->loads[i].filesz;
		}
	if (!x_hi || !eh.len || eh.len > LUA_MAX_DATA || !(ehb = malloc(eh.len)) ||
	    !proc_read(pid, eh.at, ehb, eh.len)) {
		free(ehb);
		return;
	}
	eh.bytes = ehb;
	for (unsigned int i = 0; i < f->n_loads && found >= 0; i++) {
		uint64_t at = (f->loads[i].vaddr + bias + 7) & ~7ull;
		uint64_t end = f->loads[i].vaddr + bias + f->loads[i].filesz;
		uintptr_t *w;
		int r;

		if ((f->loads[i].flags & PF_X) || end <= at + 8 * LUA54_NUM_OPCODES ||
		    end - at > LUA_MAX_DATA || !(w = malloc(end - at)))
			continue;
		r = proc_read(pid, at, w, end - at)
			    ? luaexec__find(w, (end - at) / 8, x_lo, x_hi, eh_bounds, &eh, &lo, &hi)
			    : 0;
		free(w);
		if (r > 0 && found) /* two tables: not sure which is the VM's */
			r = -1;
		if (r > 0) {
			f->exec_lo = lo - bias;
			f->exec_hi = hi - bias;
		}
		found = r ? r : found;
	}
	free(ehb);
	if (found <= 0)
		f->exec_lo = f->exec_hi = 0;
}

/* The load bias of mapping m of f, or false. */
static bool bias_of(const struct luafile *f, const struct procmap *m, uint64_t *bias)
{
	for (unsigned int i = 0; i < f->n_loads; i++)
		if (m->offset >= f->loads[i].offset &&
		    m->offset - f->loads[i].offset < f->loads[i].filesz) {
			*bias = m->start - m->offset - (f->loads[i].vaddr - f->loads[i].offset);
			return true;
		}
	return false;
}

/*
 * The same interpreter at the same address, its maps listed again (a library mapped, a
 * listing re-read): its states and its entry in the program's map stay. Looked for again,
 * the samples until the next scan (a drain later: a second and more on a loaded machine,
 * where the agent's turn comes late) went without Lua frames: bpf-lua's processes started
 * before the agent had 94.6 % of their samples with a handler in one run, 99 % in others.
 */
static void keep_states(struct luaslot *slot, const struct luaslot *old)
{
	memcpy(slot->states, old->states, sizeof(slot->states));
	slot->next_state = old->next_state;
	slot->last_scan_ns = old->last_scan_ns;
	slot->listed = true;
}

/* Whether pm maps Lua 5.4 with a known luaV_execute: slot->lua54 and its address. */
static void find_lua54(struct bpflua *p, const struct procmaps *pm, struct luaslot *slot)
{
	uint64_t bias;

	for (unsigned int i = 0; i < pm->n; i++) {
		struct luafile *f;

		if (!maybe_lua(pm->maps[i].path) || !(f = file_get(p, pm->maps[i].path)) || !f->lua)
			continue;
		if (!f->lua54 || sizeof(void *) != 8) {
			p->st.unknown_version++;
			break;
		}
		if (!bias_of(f, &pm->maps[i], &bias))
			continue;
		if (!f->exec_tried) {
			find_execute(pm->pid, f, bias);
			p->st.no_execute += !f->exec_lo;
		}
		if (f->exec_lo) {
			slot->lua54 = true;
			slot->exec_lo = f->exec_lo + bias;
			slot->exec_hi = f->exec_hi + bias;
		}
		break;
	}
}

/* What the process of pm is, looked at once per listing of its maps. */
static struct luaslot *look_at(struct bpflua *p, const struct procmaps *pm)
{
	struct luaslot *slot = &p->slots[pm->pid % p->m.n_slots], old;
	uint64_t first = pm->n ? pm->maps[0].start : 0;
	bool was = slot->pid == pm->pid && slot->listed;

	if (slot->pid == pm->pid && slot->pm == pm && slot->n_maps == pm->n &&
	    slot->first_start == first)
		return slot;
	old = *slot;
	*slot = (struct luaslot){.pid = pm->pid, .pm = pm, .n_maps = pm->n, .first_start = first};
	p->st.looked_at++;
	find_lua54(p, pm, slot);
	if (was && slot->lua54 && slot->exec_lo == old.exec_lo)
		keep_states(slot, &old);
	else if (was) { /* exec'd: its states are looked for again, its Protos named again */
		bpf_map_delete_elem(p->m.procs_fd, &slot->pid);
		luaname__forget(pm->pid);
	}
	return slot;
}

/* The program's entry of slot: its states and the LP64 layout's offsets. */
static void list_states(struct bpflua *p, struct luaslot *slot)
{
	const struct lua54_layout *l = &lua54_lp64;
	const struct luaproto_layout *pl = &luaproto_54_lp64;
	struct lua_proc e = {
	    .stack_span = STACK_SPAN, .l_ci = l->ci, .l_errorjmp = l->state.errorjmp,
	    .l_base_ci = l->base_ci, .ci_func = l->ci_func, .ci_previous = l->ci_previous,
	    .ci_savedpc = l->ci_savedpc, .ci_callstatus = l->ci_callstatus, .cl_p = l->cl_p,
	    .p_code = pl->code, .tt_lclosure = TT_LCLOSURE};

	memcpy(e.states, slot->states, sizeof(e.states));
	if (bpf_map_update_elem(p->m.procs_fd, &slot->pid, &e, BPF_ANY)) {
		if (errno == E2BIG || errno == ENOMEM)
			p->st.procs_full++;
		return;
	}
	slot->listed = true;
}

static bool known_state(const struct luaslot *slot, uint64_t w)
{
	for (unsigned int i = 0; i < PROFILE_LUA_STATES; i++)
		if (slot->states[i] == w)
			return true;
	return false;
}

static void add_state(struct bpflua *p, struct luaslot *slot, uint64_t w)
{
	for (unsigned int i = 0; i < PROFILE_LUA_STATES; i++)
		if (!slot->states[i]) {
			slot->states[i] = w;
			p->st.states++;
			return;
		}
	slot->states[slot->next_state++ % PROFILE_LUA_STATES] = w; /* the oldest */
	p->st.states_full++;
	p->st.states++;
}

/* The end of the main thread's stack ([stack] in /proc/<pid>/maps), or 0. */
static uint64_t stack_end(uint32_t pid)
{
	char path[32], line[256];
	unsigned long long lo, hi, end = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!end && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%llx-%llx", &lo, &hi) == 2)
			end = hi;
	fclose(f);
	return end;
}

/* The words of the stack from sp up, a page an iovec: whole pages up to the first unmapped
 * one. How many words. */
static uint64_t read_stack(uint32_t pid, uint64_t sp, uint64_t *words, uint64_t bytes)
{
	struct iovec local[CONFIG_BPF_LUA_SCAN_BYTES / 4096 + 2], remote[CONFIG_BPF_LUA_SCAN_BYTES / 4096 + 2];
	unsigned long n = 0;
	uint64_t at = sp, end = sp + bytes;
	ssize_t r;

	while (at < end && n < sizeof(local) / sizeof(local[0])) {
		uint64_t next = (at | 4095) + 1 < end ? (at | 4095) + 1 : end;

		local[n] = (struct iovec){(char *)words + (at - sp), next - at};
		remote[n++] = (struct iovec){(void *)(uintptr_t)at, next - at};
		at = next;
	}
	r = process_vm_readv((pid_t)pid, local, n, remote, n, 0);
	return r > 0 ? (uint64_t)r / 8 : 0;
}

/*
 * The states among the words of the sampled thread's stack from sp up (no stack pointer: the
 * top of the main thread's stack), after dropping the known ones that are states no more (a
 * coroutine collected).
 */
static void scan(struct bpflua *p, struct luaslot *slot, uint64_t sp)
{
	const struct luaframes_layout *l = &lua54_lp64.state;
	const uint64_t bytes = CONFIG_BPF_LUA_SCAN_BYTES & ~7ull;
	uint64_t *words, main, n;
	unsigned int tried = 0;
	bool changed = false;

	p->st.scans++;
	for (unsigned int i = 0; i < PROFILE_LUA_STATES; i++)
		if (slot->states[i] &&
		    !luaexec__is_state(l, slot->states[i], state_read, &slot->pid, &main)) {
			slot->states[i] = 0;
			changed = true;
		}
	if (!sp) {
		uint64_t end = stack_end(slot->pid);

		sp = end > bytes ? end - bytes : 0;
	}
	sp &= ~7ull;
	words = sp ? malloc(bytes) : NULL;
	n = words ? read_stack(slot->pid, sp, words, bytes) : 0;
	for (uint64_t i = 0; i < n && tried < SCAN_TRIES; i++) {
		uint64_t w = words[i];

		if ((w & 7) || w < 65536 || w >> 47 || (w >= sp && w < sp + bytes + STACK_SPAN) ||
		    known_state(slot, w))
			continue;
		tried++;
		if (!luaexec__is_state(l, w, state_read, &slot->pid, &main))
			continue;
		add_state(p, slot, w);
		changed = true;
		if (main != w && !known_state(slot, main)) /* a coroutine's resumer */
			add_state(p, slot, main);
	}
	free(words);
	if (changed || !slot->listed)
		list_states(p, slot);
}

/* The Lua frames of one luaV_execute activation from a record's (pyframes_next_fn). */
struct rec_runs {
	const uint64_t *rec;
	unsigned int n, i;
};

static unsigned int next_run(void *ctx, uint64_t *out, unsigned int room, bool *cut)
{
	struct rec_runs *c = ctx;
	unsigned int k = 0;

	while (c->i < c->n) {
		uint64_t w = c->rec[c->i];

		if (k == room) {
			*cut = true;
			break;
		}
		c->i++;
		out[k++] = luaframe__tag((uintptr_t)(w & LUA_REC_PROTO_MASK), (unsigned int)(w >> 48));
		if (w & LUA_REC_FRESH)
			break;
	}
	return k;
}

static unsigned int activations(const struct luaslot *slot, const uint64_t *frames,
				unsigned int n)
{
	unsigned int a = 0;

	for (unsigned int i = 0; i < n; i++) {
		uint64_t pc = frames[i] - (i > 0); /* a return address: its call */

		a += pc >= slot->exec_lo && pc < slot->exec_hi;
	}
	return a;
}

static unsigned int runs_of(const uint64_t *rec, unsigned int n)
{
	unsigned int r = 0;

	for (unsigned int i = 0; i < n; i++)
		r += (rec[i] & LUA_REC_FRESH) != 0;
	return r;
}

const struct agent_sample *bpflua__sample(struct bpflua *p, const struct procmaps *pm,
					  const struct agent_sample *s, uint64_t *buf,
					  unsigned int max, struct agent_sample *out)
{
	const uint64_t *user = s->frames + s->n_kernel;
	unsigned int nk = s->n_kernel, nu, pushed, a, runs;
	const bool lua = s->flags & SAMPLE_F_LUA;
	struct luaslot *slot;
	struct rec_runs c;
	struct pysplice sp;
	bool cut = false;

	if (!p || !pm || pm->pid != s->pid)
		return s;
	slot = look_at(p, pm);
	if (!slot->lua54 || !(a = activations(slot, user, s->n_user)))
		return s;
	runs = lua ? runs_of(s->py, s->n_py) : 0;
	if (runs != a && !((s->flags & SAMPLE_F_TRUNCATED) && a < runs)) {
		p->st.mismatch += lua;
		if (!slot->listed || s->time_ns - slot->last_scan_ns >= RESCAN_NS) {
			slot->last_scan_ns = s->time_ns;
			scan(p, slot, s->user ? s->user->sp : 0);
		}
		return s;
	}
	if (nk >= max)
		return s;
	c = (struct rec_runs){.rec = s->py, .n = s->n_py};
	sp = (struct pysplice){.eval_lo = slot->exec_lo, .eval_hi = slot->exec_hi,
			       .budget = s->n_py, .next = next_run, .ctx = &c};
	memcpy(buf, s->frames, nk * sizeof(buf[0]));
	nu = pyframes__splice_into(&sp, user, s->n_user, buf + nk, max - nk, &pushed, &a, &cut);
	if (!pushed)
		return s;
	*out = *s;
	out->frames = buf;
	out->n_user = (uint16_t)nu;
	out->py = NULL;
	out->n_py = 0;
	out->flags &= (uint16_t)~SAMPLE_F_LUA;
	if (cut) {
		out->flags |= SAMPLE_F_TRUNCATED;
		p->st.cut++;
	}
	p->st.spliced++;
	p->st.frames += pushed;
	luaname__warm(s->pid, buf + nk, nu); /* while its Protos live */
	return out;
}

void bpflua__sweep(struct bpflua *p, uint64_t now)
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
static uint64_t bpf_count(const struct bpflua *p, uint32_t k)
{
	return bpfinterp__percpu_sum(p->m.counts_fd, p->m.ncpus, k);
}

void bpflua__stats(const struct bpflua *p, struct bpflua_stats *st)
{
	*st = (struct bpflua_stats){0};
	if (!p)
		return;
	*st = p->st;
	st->procs = bpfinterp__count(p->m.procs_fd, p->m.max_procs);
	st->bpf_samples = bpf_count(p, LUA_C_SAMPLES);
	st->bpf_frames = bpf_count(p, LUA_C_FRAMES);
	st->no_state = bpf_count(p, LUA_C_NO_STATE);
	st->bpf_truncated = bpf_count(p, LUA_C_TRUNCATED);
	st->read_errors = bpf_count(p, LUA_C_READ);
	st->torn = bpf_count(p, LUA_C_TORN);
}
