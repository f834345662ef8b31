// SPDX-License-Identifier: MIT
/* agent/lib/luaframes.c — see luaframes.h. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/core/luaexec.h"
#include "agent/core/luaname.h"
#include "agent/lib/luaframes.h"
#include "agent/lib/selfread.h"
#include "agent/lib/unwind.h"

/* The layouts (agent/core/luaexec.h): the library reads its own process, so the build's
 * pointer size picks. */
#define L54 (sizeof(void *) == 8 ? &lua54_lp64 : &lua54_ilp32)
#define HEAD_MAX 96	    /* the largest head and ci_size: the buffers' */
#define CI_MAX 64
#define TV_TT 8		    /* a TValue's tag: after the 8-byte Value on both ABIs */
#define LUA_VLCL 6
#define TT_LCL 0x46	    /* a TValue's tag for a Lua closure: ctb(LUA_VLCL) */
#define CIST_C (1u << 1)
#define CIST_FRESH (1u << 2)
#define CHAIN_STEPS 1024    /* CallInfos walked per state at most (a cycle ends there too) */
#define WORD_MASK (sizeof(uintptr_t) - 1) /* a pointer's alignment */

static struct {
	bool on, v51; /* v51: agent/lib/lua51frames.c walks */
	struct luaframes_vm vm; /* its states; luaV_execute */
	struct luaframes_stats st;
} lua; /* in .bss: its vm is set up by luaframes__init() */

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
static EP_TLS struct selfread_window ci_window, stack_window;
/* A sample's Lua frames and where its runs end (both walkers': one runs in a process). */
static EP_TLS uint64_t spliced[CONFIG_MAX_STACK_DEPTH];
static EP_TLS uint64_t lframes[CONFIG_LUAFRAMES_MAX];
static EP_TLS unsigned int run_end[CONFIG_LUAFRAMES_MAX + 1]; /* frames in runs 0..k */
static EP_TLS unsigned int scan_wait;

/*
 * One system call per sample where the chain is where it was: the states' headers, the
 * CallInfos the last sample walked (a thread's CallInfos are allocated as its calls first get
 * that deep, kilobytes apart, so a window does not hold a chain; the outer ones stay put) and
 * the stack window around the last innermost function, read together (process_vm_readv's
 * iovecs). What is read is this sample's memory: only where to look comes from the last one.
 */
#define HINTS 32
#define STACK_SLACK 512 /* a deeper call than last time still inside the window */
#define STACK_PRE 2048  /* bytes of the Lua stack read ahead (a page or two: each costs ~1 us) */
static EP_TLS struct {
	unsigned char head[CONFIG_LUAFRAMES_STATES][HEAD_MAX];
	bool head_ok[CONFIG_LUAFRAMES_STATES];
	uintptr_t ci[HINTS]; /* CallInfos walked last sample (the outermost ones) */
	unsigned char ci_buf[HINTS][CI_MAX];
	unsigned int n_ci, n_ci_ok;
	uintptr_t stack_hi; /* the last innermost function's end on the Lua stack, 0: none */
	uintptr_t walked[HINTS];
	unsigned int n_walked;
	struct iovec local[CONFIG_LUAFRAMES_STATES + HINTS + 1];
	struct iovec remote[CONFIG_LUAFRAMES_STATES + HINTS + 1];
	unsigned char running[CONFIG_LUAFRAMES_STATES][HEAD_MAX]; /* running_states() */
} pre; /* thread-local, not on the stack: the handler keeps to EP_HANDLER_STACK */

/* Closure -> Proto (and its code, to check the pc): a per-thread direct-mapped cache, so a
 * steady chain costs the CallInfo and stack reads only. */
#define PROTO_CACHE 64
static EP_TLS struct {
	uintptr_t closure, proto, code, code_end;
} proto_cache[PROTO_CACHE];

/* ---- start: the version and luaV_execute --------------------------------------------------- */

struct module_find {
	uintptr_t base;
	const ElfW(Phdr) *phdr;
	ElfW(Half) phnum;
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct module_find *m = arg;

	(void)size;
	if (info->dlpi_addr != m->base)
		return 0;
	m->phdr = info->dlpi_phdr;
	m->phnum = info->dlpi_phnum;
	return 1;
}

bool luaframes__function_bounds(const uint8_t *hdr, uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
	/* our own memory: the table's length is its count's */
	return luaexec__function_bounds(hdr, SIZE_MAX, (uintptr_t)hdr, pc, lo, hi);
}

/* luaexec_bounds_fn: by the module's .eh_frame_hdr; a module without one (Debian's armhf
 * binaries have no unwind tables) by reading its code (luaframes__code_bounds: armv7 only). */
struct own_bounds {
	const uint8_t *eh;
	uintptr_t x_lo, x_hi;
};

static bool own_bounds(void *ctx, uintptr_t min, uintptr_t max, uintptr_t *lo, uintptr_t *hi)
{
	const struct own_bounds *b = ctx;

	return b->eh ? luaframes__function_bounds(b->eh, min, lo, hi)
		     : luaframes__code_bounds(b->x_lo, b->x_hi, min, max, lo, hi);
}

/* luaV_execute of the module at base: the function its dispatch table points into. */
static bool find_execute(uintptr_t base)
{
	struct module_find m = {.base = base};
	struct own_bounds ob = {0};
	uintptr_t lo, hi;
	int found = 0;

	dl_iterate_phdr(find_module, &m);
	for (ElfW(Half) i = 0; i < m.phnum; i++) {
		const ElfW(Phdr) *p = &m.phdr[i];

		if (p->p_type == PT_GNU_EH_FRAME)
			ob.eh = (const uint8_t *)(base + p->p_vaddr);
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			ob.x_lo = base + p->p_vaddr;
			ob.x_hi = ob.x_lo + p->p_memsz;
		}
	}
	if (!ob.x_hi)
		return false;
	for (ElfW(Half) i = 0; i < m.phnum && found >= 0; i++) {
		const ElfW(Phdr) *p = &m.phdr[i];
		const uintptr_t *w = (const uintptr_t *)((base + p->p_vaddr + 7) & ~(uintptr_t)7);
		size_t n = (p->p_memsz - ((uintptr_t)w - base - p->p_vaddr)) / sizeof(*w);
		int r;

		if (p->p_type != PT_LOAD || (p->p_flags & PF_X) || n <= LUA54_NUM_OPCODES)
			continue;
		r = luaexec__find(w, n, ob.x_lo, ob.x_hi, own_bounds, &ob, &lo, &hi);
		if (r > 0 && found) /* two tables: not sure which is the VM's */
			return false;
		if (r > 0) {
			lua.vm.exec_lo = lo;
			lua.vm.exec_hi = hi;
		}
		found = r ? r : found;
	}
	return found > 0;
}

/* The version lua_ident names: "$LuaVersion: Lua 5.4.4  Copyright..." (5.2+), "$Lua: Lua 5.1.5
 * Copyright..." (5.1); LuaJIT has none but exports luaJIT_setmode. false: not Lua. */
static bool lua_version(const char *ident, char *out, size_t max)
{
	static const char *const prefixes[] = {"$LuaVersion: Lua ", "$Lua: Lua "};

	if (!ident) {
		if (!dlsym(RTLD_DEFAULT, "luaJIT_setmode"))
			return false;
		snprintf(out, max, "LuaJIT");
		return true;
	}
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t len = strlen(prefixes[i]);

		if (!strncmp(ident, prefixes[i], len)) {
			snprintf(out, max, "%.*s", (int)strcspn(ident + len, " $"), ident + len);
			return true;
		}
	}
	return false;
}

void luaframes__init(void)
{
	const char *ident = dlsym(RTLD_DEFAULT, "lua_ident");
	const char *off = getenv("EDGEPROF_LUA");
	Dl_info info;

	lua.on = false;
	lua.vm.layout = &L54->state;
	lua.vm.st = &lua.st;
	if (!lua_version(ident, lua.st.version, sizeof(lua.st.version)))
		return;
	if (off && !strcmp(off, "0")) /* the native walk alone (the cost's baseline) */
		return;
	if (!strcmp(lua.st.version, "LuaJIT")) { /* agent/lib/ljframes.c walks (or not) */
		lua.st.on = ljframes__init(&lua.st);
		lua.st.unknown_version += !lua.st.on;
		return;
	}
	if (!strncmp(lua.st.version, "5.1.", 4)) {
		lua.on = lua.v51 = lua.st.on = lua51frames__init(ident, &lua.st);
		lua.st.unknown_version += !lua.on;
		return;
	}
	if (strncmp(lua.st.version, "5.4.", 4) ||
	    !dladdr(ident, &info) || !find_execute((uintptr_t)info.dli_fbase)) {
		lua.st.unknown_version++;
		return;
	}
	/* armv7: luaV_execute is larger than the code readings' budget (~13 KiB in Debian's
	 * armhf lua5.4): the native walk reads its frame from its prologue */
	unwind__arm_body(lua.vm.exec_lo, lua.vm.exec_hi);
	lua.on = true;
	lua.st.on = true;
}

/* ---- the handler ---------------------------------------------------------------------------- */

static bool peek(uintptr_t addr, void *buf, size_t len)
{
	return selfread__peek(addr, buf, len, &lua.st.read_errors);
}

/* Reads the states' headers, the hinted CallInfos and the stack window in one go. */
static __attribute__((noinline)) void prefetch(void)
{
	struct iovec *local = pre.local, *remote = pre.remote;
	const unsigned int head = L54->head, ci_size = L54->ci_size;
	unsigned int n = 0, states = 0;
	long r;

	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		uintptr_t st = __atomic_load_n(&lua.vm.states[i], __ATOMIC_RELAXED);

		pre.head_ok[i] = false;
		if (!st)
			continue;
		local[n] = (struct iovec){pre.head[i], head};
		remote[n++] = (struct iovec){(void *)st, head};
		states++;
	}
	for (unsigned int i = 0; i < pre.n_ci; i++) {
		local[n] = (struct iovec){pre.ci_buf[i], ci_size};
		remote[n++] = (struct iovec){(void *)pre.ci[i], ci_size};
	}
	if (pre.stack_hi) {
		uintptr_t hi = pre.stack_hi + STACK_SLACK, lo = hi - STACK_PRE;

		local[n] = (struct iovec){stack_window.buf, STACK_PRE};
		remote[n++] = (struct iovec){(void *)lo, STACK_PRE};
		stack_window.base = stack_window.lo = lo;
	}
	r = n ? selfread__readv(local, remote, (unsigned long)n) : 0;
	/* whole iovecs only: the ones before the first that failed */
	for (unsigned int i = 0, v = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		if (!__atomic_load_n(&lua.vm.states[i], __ATOMIC_RELAXED) || v >= states)
			continue;
		pre.head_ok[i] = r >= (long)(head * (v + 1));
		v++;
	}
	r -= (long)(head * states);
	pre.n_ci_ok = 0;
	while (pre.n_ci_ok < pre.n_ci && r >= (long)ci_size) {
		pre.n_ci_ok++;
		r -= ci_size;
	}
	stack_window.hi = pre.stack_hi && pre.n_ci_ok == pre.n_ci && r >= STACK_PRE
				  ? stack_window.lo + STACK_PRE
				  : 0;
}

/* The CallInfo at ci from the prefetch, else through the window. */
static bool read_ci(uintptr_t ci, unsigned char *c)
{
	for (unsigned int i = 0; i < pre.n_ci_ok; i++)
		if (pre.ci[i] == ci) {
			memcpy(c, pre.ci_buf[i], L54->ci_size);
			return true;
		}
	return selfread__fetch(&ci_window, ci, c, L54->ci_size, &lua.st.read_errors);
}

/* The states running on this thread, innermost first (by their errorJmp on [sp, hi)); their
 * headers in head. How many. */
static __attribute__((noinline)) unsigned int running_states(uintptr_t sp, uintptr_t hi, unsigned char (*head)[HEAD_MAX])
{
	uintptr_t jmp[CONFIG_LUAFRAMES_STATES];
	unsigned int k = 0;

	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		uintptr_t s, j;

		if (pre.head_ok[i])
			memcpy(head[k], pre.head[i], L54->head);
		s = luaframes__running(&lua.vm, i, head[k], L54->head, pre.head_ok[i], sp, hi, &j);
		if (!s)
			continue;
		memcpy(head[k] + L54->state.errorjmp, &s, sizeof(s)); /* keep the state's own address */
		jmp[k++] = j;
		for (unsigned int m = k - 1; m > 0 && jmp[m] < jmp[m - 1]; m--) { /* insertion */
			uintptr_t tj = jmp[m];

			jmp[m] = jmp[m - 1];
			jmp[m - 1] = tj;
			for (unsigned int b = 0; b < L54->head; b++) { /* no 96-byte temporary */
				unsigned char t = head[m][b];

				head[m][b] = head[m - 1][b];
				head[m - 1][b] = t;
			}
		}
	}
	return k;
}

/* The Proto of a Lua closure whose frame is at savedpc, and its pc index (cached). */
static __attribute__((noinline)) bool closure_proto(uintptr_t cl, uintptr_t savedpc, uintptr_t *proto, unsigned int *pc)
{
	const struct luaproto_layout *l = luaproto__54();
	const struct lua54_layout *s = L54;
	unsigned int slot = (unsigned int)(cl >> 4) % PROTO_CACHE;
	unsigned char c[32], p[72]; /* an LClosure up to p, a Proto up to code: LP64's */
	int32_t size;

	if (proto_cache[slot].closure != cl || savedpc < proto_cache[slot].code ||
	    savedpc > proto_cache[slot].code_end) {
		if (!peek(cl, c, s->cl_size) || c[s->cl_tt] != LUA_VLCL ||
		    !peek(luafield__word(c, s->cl_p), p, l->code + sizeof(uintptr_t)) ||
		    p[l->tt] != 10)
			return false;
		memcpy(&size, p + l->sizecode, sizeof(size));
		proto_cache[slot].closure = cl;
		proto_cache[slot].proto = luafield__word(c, s->cl_p);
		proto_cache[slot].code = luafield__word(p, l->code);
		proto_cache[slot].code_end = proto_cache[slot].code + 4 * (uintptr_t)(size > 0 ? size : 0);
		if (savedpc < proto_cache[slot].code || savedpc > proto_cache[slot].code_end) {
			proto_cache[slot].closure = 0;
			return false;
		}
	}
	*proto = proto_cache[slot].proto;
	/* pcRel: savedpc is the next instruction (a fresh frame's is the first) */
	*pc = savedpc > proto_cache[slot].code ? (unsigned int)((savedpc - proto_cache[slot].code) / 4 - 1) : 0;
	return true;
}

/* One state's chain into lframes[*n..] and its runs into run_end[*runs..]. false: torn or too
 * long (nothing to splice). */
static bool walk_state(const unsigned char *head, bool first, unsigned int *n,
		       unsigned int *runs, bool *cut)
{
	const struct lua54_layout *l = L54;
	uintptr_t self = luafield__word(head, l->state.errorjmp), base = self + l->base_ci;
	uintptr_t ci = luafield__word(head, l->ci), prev_ci = 0;
	unsigned char c[CI_MAX], f[16];

	selfread__reset(&ci_window);
	if (!first)
		selfread__reset(&stack_window);
	for (unsigned int steps = 0; ci != base; steps++) {
		uint16_t status;

		if (steps == CHAIN_STEPS || !ci || ci == prev_ci ||
		    !read_ci(ci, c))
			return false;
		if (first) /* the outermost HINTS, for the next sample */
			pre.walked[pre.n_walked++ % HINTS] = ci;
		memcpy(&status, c + l->ci_callstatus, sizeof(status));
		if (!(status & CIST_C)) {
			uintptr_t proto, func = luafield__word(c, l->ci_func);
			unsigned int pc;

			if (first && !pre.stack_hi)
				pre.stack_hi = func + sizeof(f);
			if (!selfread__fetch(&stack_window, func, f, sizeof(f),
					     &lua.st.read_errors) ||
			    f[TV_TT] != TT_LCL ||
			    !closure_proto(luafield__word(f, 0), luafield__word(c, l->ci_savedpc),
					   &proto, &pc))
				return false;
			luaframes__push(luaframe__tag(proto, pc), n, cut);
			if ((status & CIST_FRESH) && !luaframes__end_run(*n, runs))
				return false;
		}
		prev_ci = ci;
		ci = luafield__word(c, l->ci_previous);
	}
	return true;
}

/* The Lua frames of the states running on this thread: runs of frames, innermost first. */
static bool lua_runs(uintptr_t sp, uintptr_t hi, unsigned int *runs, bool *cut)
{
	unsigned char (*head)[HEAD_MAX] = pre.running;
	unsigned int k, n = 0;
	bool ok = true;

	prefetch();
	k = running_states(sp, hi, head);
	pre.n_walked = 0;
	pre.stack_hi = 0;
	*runs = 0;
	for (unsigned int s = 0; s < k && ok; s++)
		ok = walk_state(head[s], s == 0, &n, runs, cut);
	/* the hints: the innermost state's outermost CallInfos, in any order */
	pre.n_ci = pre.n_walked < HINTS ? pre.n_walked : HINTS;
	memcpy(pre.ci, pre.walked, pre.n_ci * sizeof(pre.ci[0]));
	return ok;
}

unsigned int luaframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
			       uintptr_t stack_hi, bool *truncated)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t hi = stack_hi ? stack_hi : sp + (8u << 20);
	unsigned int a, runs;
	bool cut = false;

	if (lua.v51)
		return lua51frames__splice(frames, n, max, stack_hi, truncated);
	if (!lua.on || !(a = luaframes__activations(&lua.vm, frames, n)))
		return n;
	if ((!lua_runs(sp, hi, &runs, &cut) || runs != a) && !scan_wait--) {
		scan_wait = 63;
		luaframes__scan(&lua.vm, &stack_window, sp, hi);
		if (!lua_runs(sp, hi, &runs, &cut))
			runs = 0;
	}
	if (!runs) {
		__atomic_fetch_add(&lua.st.no_state, 1, __ATOMIC_RELAXED);
		return n;
	}
	return luaframes__replace(&lua.vm, frames, n, max, a, runs, cut, truncated);
}

void luaframes__stats(struct luaframes_stats *st)
{
	*st = lua.st;
}

/* ---- the walkers' shared part: finding the states -------------------------------------------- */

static bool vm_peek(struct luaframes_vm *vm, uintptr_t addr, void *buf, size_t len)
{
	return selfread__peek(addr, buf, len, &vm->st->read_errors);
}

/* luaexec_read_fn: our own memory, faults caught (agent/lib/selfread.h) */
static bool vm_read(void *ctx, uintptr_t addr, void *buf, size_t len)
{
	return vm_peek(ctx, addr, buf, len);
}

static bool known_state(const struct luaframes_vm *vm, uintptr_t w)
{
	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++)
		if (__atomic_load_n(&vm->states[i], __ATOMIC_RELAXED) == w)
			return true;
	return false;
}

static void add_state(struct luaframes_vm *vm, uintptr_t w)
{
	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		uintptr_t expect = 0;

		if (__atomic_compare_exchange_n(&vm->states[i], &expect, w, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_fetch_add(&vm->st->states, 1, __ATOMIC_RELAXED);
			return;
		}
	}
	__atomic_fetch_add(&vm->st->states_full, 1, __ATOMIC_RELAXED);
}

/* The stack word at a, through the window: read 4 KiB ahead towards end (one read for 512
 * words: the window holds what is below the address asked for). */
static bool stack_word(struct luaframes_vm *vm, struct selfread_window *win, uintptr_t a,
		       uintptr_t end, uintptr_t *w)
{
	if (!win->hi || a < win->lo || a + sizeof(*w) > win->hi) {
		uintptr_t last = a + SELFREAD_WINDOW - sizeof(*w);

		if (last > end - sizeof(*w))
			last = end - sizeof(*w);
		if (!selfread__fetch(win, last, w, sizeof(*w), &vm->st->read_errors))
			return false;
	}
	return selfread__fetch(win, a, w, sizeof(*w), &vm->st->read_errors);
}

__attribute__((noinline)) void luaframes__scan(struct luaframes_vm *vm,
					       struct selfread_window *win, uintptr_t sp,
					       uintptr_t hi)
{
	const struct luaframes_layout *l = vm->layout;
	uintptr_t end = sp + CONFIG_LUAFRAMES_SCAN_BYTES, w, main;
	unsigned int tried = 0;

	__atomic_fetch_add(&vm->st->scans, 1, __ATOMIC_RELAXED);
	if (hi && hi < end)
		end = hi;
	selfread__reset(win);
	for (uintptr_t a = sp & ~WORD_MASK; a + sizeof(w) <= end && tried < 64; a += sizeof(w)) {
		if (!stack_word(vm, win, a, end, &w))
			break;
		if ((w & l->align_mask) != l->align_rem || w < 65536 || (uint64_t)w >> 47 ||
		    (w >= sp && w < end) || known_state(vm, w))
			continue;
		tried++;
		if (!luaexec__is_state(l, w, vm_read, vm, &main))
			continue;
		add_state(vm, w);
		/* a coroutine's resumer, often deeper than the candidates read reach */
		if (main != w && !known_state(vm, main))
			add_state(vm, main);
	}
	selfread__reset(win);
}

uintptr_t luaframes__running(struct luaframes_vm *vm, unsigned int i, unsigned char *head,
			     unsigned int len, bool head_ok, uintptr_t sp, uintptr_t hi,
			     uintptr_t *jmp)
{
	const struct luaframes_layout *l = vm->layout;
	uintptr_t s = __atomic_load_n(&vm->states[i], __ATOMIC_RELAXED);

	if (!s)
		return 0;
	if ((!head_ok && !vm_peek(vm, s, head, len)) || head[l->tt] != l->thread) {
		/* freed (a coroutine collected): forget it */
		__atomic_compare_exchange_n(&vm->states[i], &s, 0, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
		return 0;
	}
	*jmp = luafield__word(head, l->errorjmp);
	return *jmp >= sp && *jmp < hi ? s : 0;
}

/* ---- the walkers' shared part: the Lua frames in place of luaV_execute ----------------------- */

void luaframes__push(uint64_t frame, unsigned int *n, bool *cut)
{
	if (*n < CONFIG_LUAFRAMES_MAX)
		lframes[(*n)++] = frame;
	else
		*cut = true;
}

bool luaframes__end_run(unsigned int n, unsigned int *runs)
{
	if (*runs == CONFIG_LUAFRAMES_MAX)
		return false;
	run_end[(*runs)++] = n;
	return true;
}

static bool in_execute(const struct luaframes_vm *vm, const uint64_t *frames, unsigned int i)
{
	uintptr_t pc = (uintptr_t)frames[i] - (i > 0); /* a return address: its call */

	return pc >= vm->exec_lo && pc < vm->exec_hi;
}

unsigned int luaframes__activations(const struct luaframes_vm *vm, const uint64_t *frames,
				    unsigned int n)
{
	unsigned int a = 0;

	for (unsigned int i = 0; i < n; i++)
		a += in_execute(vm, frames, i);
	return a;
}

/* The runs in place of the activations (as many of each: checked by the caller); bit 31 of the
 * count: frames were left out at max. */
static unsigned int splice_runs(const struct luaframes_vm *vm, uint64_t *frames,
				unsigned int n, unsigned int max, unsigned int *pushed)
{
	unsigned int out = 0, run = 0, i;

	for (i = 0; i < n && out < max; i++) {
		unsigned int from = run ? run_end[run - 1] : 0;

		if (!in_execute(vm, frames, i)) {
			spliced[out++] = frames[i];
			continue;
		}
		if (from == run_end[run]) /* its frames past CONFIG_LUAFRAMES_MAX: keep it native */
			spliced[out++] = frames[i];
		for (unsigned int f = from; f < run_end[run] && out < max; f++, (*pushed)++)
			spliced[out++] = lframes[f];
		run++;
	}
	memcpy(frames, spliced, out * sizeof(frames[0]));
	return i < n ? out | 0x80000000u : out;
}

unsigned int luaframes__replace(struct luaframes_vm *vm, uint64_t *frames, unsigned int n,
				unsigned int max, unsigned int a, unsigned int runs, bool cut,
				bool *truncated)
{
	unsigned int pushed = 0, out;

	/* a cut native walk (at the depth limit) has fewer activations: the innermost match */
	if (runs != a && !(*truncated && a < runs)) {
		__atomic_fetch_add(&vm->st->mismatch, 1, __ATOMIC_RELAXED);
		return n;
	}
	out = splice_runs(vm, frames, n, max, &pushed);
	if (cut || (out & 0x80000000u)) {
		*truncated = true;
		__atomic_fetch_add(&vm->st->truncated, 1, __ATOMIC_RELAXED);
	}
	if (pushed) {
		__atomic_fetch_add(&vm->st->samples, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&vm->st->frames, pushed, __ATOMIC_RELAXED);
	}
	return out & ~0x80000000u;
}
