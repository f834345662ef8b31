// SPDX-License-Identifier: MIT
/*
 * agent/lib/lua51frames.c — Lua 5.1's own frames in libedgeprof.so's samples
 * (CONFIG_LUA51FRAMES), beside Lua 5.4's: agent/lib/luaframes.h finds the version and hands a
 * 5.1 over here (its lua51frames__ functions).
 *
 * luaV_execute: Lua 5.1 dispatches with a switch (no computed-goto table to find it by) and
 * Debian's lua5.1 and liblua5.1.so.0 export no internal symbol. At start (outside the handler)
 * the library runs Lua once to see where the VM is: a private state (luaL_newstate, the exported
 * API only: nothing of the program's states is touched) calls a C function of ours three ways,
 * from a Lua function (A), directly from C through lua_pcall (B), and from a string.gsub
 * callback inside Lua (C); that function walks its own stack with the sampler's unwinder. The
 * one function of the Lua module that is in A and not in B, and twice in C, is luaV_execute
 * (luaD_precall and luaD_call are in all three). Anything else (none, several, a walk that
 * failed): the process is profiled natively and counted (unknown_version).
 *
 * lua_State: found on the thread's stack as for 5.4 (a word whose header's type is LUA_TTHREAD
 * and whose global_State's mainthread is itself, or has the same global_State); the states
 * running on this thread, innermost first, by their errorJmp on this thread's stack. Both
 * versions' walkers share that and the splice (agent/lib/luaframes.h), with 5.1's offsets.
 *
 * Frames: 5.1's CallInfos are an array, L->base_ci .. L->ci; the running Lua function's pc is
 * L->savedpc (the others' ci->savedpc). 5.1 has no CIST_FRESH: a Lua frame continues its
 * caller's luaV_execute activation exactly when the caller is a Lua frame stopped at OP_CALL or
 * OP_TAILCALL (luaV_execute's own assertion at OP_RETURN); a frame above a C function, the
 * state's base or any other instruction (a metamethod, OP_TFORLOOP's iterator) started a new
 * activation. The runs of frames replace the activations as in luaframes.h, or nothing is
 * replaced and the sample is counted (mismatch). Frames are tagged LUA51FRAME_TAG
 * (agent/core/luaname.h) and named by the profile writer. Every read goes through
 * agent/lib/selfread.h (plain loads where proven mapped: all of them under qemu-user, which has
 * no process_vm_readv; else process_vm_readv): one per sample for the states' headers and 4 KiB of
 * the CallInfo array and of the Lua stack from where the last sample found them, more only for
 * what lies elsewhere or misses the per-thread caches (closure -> Proto, call site -> opcode).
 * LP64 and ILP32 (armv7) layouts. On armv7 the module has no unwind tables (Debian's armhf
 * lua5.1: one .ARM.exidx entry): the probe's walks read its frames from the code, and a
 * function's bounds are read from the code too (luaframes__code_bounds).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/core/luaname.h"
#include "agent/lib/luaframes.h"
#include "agent/lib/selfread.h"
#include "agent/lib/unwind.h"

/* Lua 5.1.5 (lstate.h, lobject.h), LP64 : ILP32 (tests/offsets/lua51.c, compiled with gcc and
 * with arm-linux-gnueabihf-gcc against Debian's 5.1.5-9 sources): the build's pointer size
 * picks (the library reads its own process). */
#define LP64 (sizeof(void *) == 8)
#define L_TT (LP64 ? 8 : 4)	       /* lua_State: CommonHeader's type byte */
#define L_G (LP64 ? 32 : 16)	       /* l_G */
#define L_CI (LP64 ? 40 : 20)	       /* ci: the running CallInfo */
#define L_SAVEDPC (LP64 ? 48 : 24)     /* the running Lua function's pc */
#define L_STACK (LP64 ? 64 : 32)       /* stack: the Lua stack's first slot */
#define L_BASE_CI (LP64 ? 80 : 40)     /* base_ci: the array's first (a C level) */
#define L_ERRORJMP (LP64 ? 168 : 112)  /* errorJmp */
#define L_HEAD (LP64 ? 176 : 116)      /* bytes of the header read per sample */
#define G_MAINTHREAD (LP64 ? 176 : 112) /* global_State.mainthread */
#define CI_FUNC (LP64 ? 8 : 4)	       /* CallInfo: func (a TValue * on the Lua stack) */
#define CI_SAVEDPC (LP64 ? 24 : 12)
#define CI_SIZE (LP64 ? 40 : 24)
#define TV_TT 8 /* TValue: int tt after the 8-byte Value (a double: 8-aligned on armhf too) */
#define TV_SIZE 16
#define CL_TT (LP64 ? 8 : 4) /* Closure: CommonHeader's type byte */
#define CL_ISC (LP64 ? 10 : 6)
#define CL_P (LP64 ? 32 : 16) /* LClosure.p */
#define CL_SIZE (LP64 ? 40 : 20)
#define P_TT (LP64 ? 8 : 4) /* Proto */
#define P_CODE (LP64 ? 24 : 12)
#define P_SIZECODE (LP64 ? 80 : 44)
#define P_SIZE (LP64 ? 84 : 48)
#define LUA_TFUNCTION 6
#define LUA_TTHREAD 8
#define LUA_TPROTO 9
#define OP_CALL 28	 /* lopcodes.h */
#define OP_TAILCALL 29
#define CHAIN_STEPS 1024 /* CallInfos walked per state at most */

static const struct luaframes_layout state_51 = {
    .tt = L_TT, .g = L_G, .errorjmp = L_ERRORJMP, .mainthread = G_MAINTHREAD,
    .thread = LUA_TTHREAD, .align_mask = 7, .align_rem = 0,
};

static struct {
	bool on;
	struct luaframes_vm vm; /* its states; luaV_execute; the counters (luaframes.c's) */
} l51;

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
static EP_TLS struct selfread_window ci_window, stack_window;
static EP_TLS unsigned char heads[CONFIG_LUAFRAMES_STATES][L_HEAD];
static EP_TLS unsigned int scan_wait;
static EP_TLS struct {
	uintptr_t ci_lo, stack_lo; /* the last sample's innermost state's base_ci and stack */
} hint;

/* Lua closure -> Proto and its code's range (to check a pc): a per-thread direct-mapped cache.
 * Call sites -> their opcode (code does not change while its Proto lives). */
#define CACHE_SLOTS 64
static EP_TLS struct {
	uintptr_t closure, proto, code, code_end;
} proto_cache[CACHE_SLOTS];
static EP_TLS struct {
	uintptr_t savedpc;
	unsigned int op;
} site_cache[CACHE_SLOTS];

/* ---- start: luaV_execute, from the VM's own stack ------------------------------------------ */

struct module_find {
	uintptr_t pc;
	const uint8_t *eh;    /* the module's .eh_frame_hdr */
	uintptr_t x_lo, x_hi; /* its load segment holding pc */
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct module_find *m = arg;
	bool holds = false;

	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && m->pc >= lo && m->pc - lo < p->p_memsz) {
			holds = true;
			m->x_lo = lo;
			m->x_hi = lo + p->p_memsz;
		}
		if (p->p_type == PT_GNU_EH_FRAME)
			m->eh = (const uint8_t *)lo;
	}
	if (!holds)
		m->eh = NULL;
	return holds;
}

/* The function holding pc by its module's .eh_frame_hdr table: [*lo, *hi) up to the next FDE's
 * start; a module without one (Debian's armhf lua5.1) by its code (armv7 only). */
static bool function_of(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
	struct module_find m = {.pc = pc};

	if (!dl_iterate_phdr(find_module, &m))
		return false;
	if (m.eh)
		return luaframes__function_bounds(m.eh, pc, lo, hi);
	return luaframes__code_bounds(m.x_lo, m.x_hi, pc, pc, lo, hi) && *lo <= pc && pc < *hi;
}

/* The Lua 5.1 API the probe calls (lua.h), from the module that exports lua_ident. */
typedef void lua_State;
typedef int (*lua_CFunction)(lua_State *L);
static struct {
	lua_State *(*newstate)(void);
	void (*close)(lua_State *L);
	int (*loadbuffer)(lua_State *L, const char *buf, size_t len, const char *name);
	void (*pushcclosure)(lua_State *L, lua_CFunction fn, int n);
	int (*pcall)(lua_State *L, int nargs, int nresults, int errfunc);
	ptrdiff_t (*tointeger)(lua_State *L, int idx);
	lua_CFunction open_string;
} api;

#define PROBE_DEPTH 48
enum { WALK_FROM_C, WALK_FROM_LUA, WALK_NESTED, WALKS };
static struct probe_walks {
	ucontext_t uc;
	struct unwind_cache cache;
	uint64_t frames[WALKS][PROBE_DEPTH];
	unsigned int n[WALKS];
} *probe_walks; /* at start only, one thread (allocated then: 5 KiB) */

static int probe(lua_State *L)
{
	ptrdiff_t walk = api.tointeger(L, 1);
	uintptr_t lo = 0, hi = 0;
	pthread_attr_t attr;
	bool truncated;
	void *addr;
	size_t size;

	if (walk < 0 || walk >= WALKS || getcontext(&probe_walks->uc))
		return 0;
	/* the stack's bounds: reads checked against them, not through process_vm_readv (which
	 * qemu-user lacks) */
	if (!pthread_getattr_np(pthread_self(), &attr)) {
		if (!pthread_attr_getstack(&attr, &addr, &size)) {
			lo = (uintptr_t)addr;
			hi = lo + size;
		}
		pthread_attr_destroy(&attr);
	}
	probe_walks->n[walk] =
	    unwind__stack(&probe_walks->uc, lo, hi, UNWIND_CFI, &probe_walks->cache,
			  probe_walks->frames[walk], PROBE_DEPTH, &truncated);
	return 0;
}

static bool same_module(const void *a, const void *b)
{
	Dl_info ia, ib;

	return dladdr(a, &ia) && dladdr(b, &ib) && ia.dli_fbase == ib.dli_fbase;
}

static bool load_api(const void *ident)
{
	static const char *const names[] = {"luaL_newstate", "lua_close", "luaL_loadbuffer",
					    "lua_pushcclosure", "lua_pcall", "lua_tointeger",
					    "luaopen_string"};
	void *f[sizeof(names) / sizeof(names[0])];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		f[i] = dlsym(RTLD_DEFAULT, names[i]);
		if (!f[i] || !same_module(f[i], ident))
			return false;
	}
	memcpy(&api.newstate, &f[0], sizeof(f[0]));
	memcpy(&api.close, &f[1], sizeof(f[1]));
	memcpy(&api.loadbuffer, &f[2], sizeof(f[2]));
	memcpy(&api.pushcclosure, &f[3], sizeof(f[3]));
	memcpy(&api.pcall, &f[4], sizeof(f[4]));
	memcpy(&api.tointeger, &f[5], sizeof(f[5]));
	memcpy(&api.open_string, &f[6], sizeof(f[6]));
	return true;
}

/* The probe's three walks: from C (lua_pcall of probe itself), from a Lua function, and from a
 * Lua callback of string.gsub called by a Lua function (two activations of the VM). */
static bool run_probe(void)
{
	static const char chunk[] = "local probe = ...\n"
				    "probe(1)\n"
				    "string.gsub('x', 'x', function() probe(2) end)\n";
	lua_State *L = api.newstate();
	bool ok;

	if (!L)
		return false;
	api.pushcclosure(L, api.open_string, 0);
	ok = !api.pcall(L, 0, 0, 0);
	api.pushcclosure(L, probe, 0); /* no argument: walk 0 */
	ok = ok && !api.pcall(L, 0, 0, 0);
	ok = ok && !api.loadbuffer(L, chunk, sizeof(chunk) - 1, "=edgeprof probe");
	if (ok)
		api.pushcclosure(L, probe, 0);
	ok = ok && !api.pcall(L, 1, 0, 0);
	api.close(L);
	for (int w = 0; w < WALKS; w++)
		ok = ok && probe_walks->n[w] > 2;
	return ok;
}

/* How many frames of walk w are in the function [lo, hi). */
static unsigned int walk_count(int w, uintptr_t lo, uintptr_t hi)
{
	unsigned int k = 0;

	for (unsigned int i = 1; i < probe_walks->n[w]; i++) /* return addresses: their call */
		k += probe_walks->frames[w][i] - 1 >= lo && probe_walks->frames[w][i] - 1 < hi;
	return k;
}

/* The Lua module's function in the walk from Lua, not in the walk from C, twice nested. */
static bool find_execute(const void *ident)
{
	unsigned int found = 0;

	for (unsigned int i = 1; i < probe_walks->n[WALK_FROM_LUA]; i++) {
		uintptr_t pc = probe_walks->frames[WALK_FROM_LUA][i] - 1, lo, hi;

		if (!same_module((void *)pc, ident) || !function_of(pc, &lo, &hi) ||
		    walk_count(WALK_FROM_C, lo, hi) || walk_count(WALK_NESTED, lo, hi) != 2 ||
		    (found && lo == l51.vm.exec_lo))
			continue;
		found++;
		l51.vm.exec_lo = lo;
		l51.vm.exec_hi = hi;
	}
	return found == 1;
}

bool lua51frames__init(const void *ident, struct luaframes_stats *st)
{
	l51.on = false;
	l51.vm.layout = &state_51;
	l51.vm.st = st;
	if (!load_api(ident))
		return false;
	probe_walks = aligned_alloc(64, sizeof(*probe_walks)); /* the unwinder's cache lines */
	if (probe_walks)
		memset(probe_walks, 0, sizeof(*probe_walks));
	l51.on = probe_walks && run_probe() && find_execute(ident);
	free(probe_walks);
	probe_walks = NULL;
	/* armv7: luaV_execute is larger than the code readings' budget: the native walk reads
	 * its frame from its prologue */
	if (l51.on)
		unwind__arm_body(l51.vm.exec_lo, l51.vm.exec_hi);
	return l51.on;
}

/* ---- the handler ---------------------------------------------------------------------------- */

static bool peek(uintptr_t addr, void *buf, size_t len)
{
	return selfread__peek(addr, buf, len, &l51.vm.st->read_errors);
}

static void window_holds(struct selfread_window *w, uintptr_t lo)
{
	w->base = w->lo = lo;
	w->hi = lo + SELFREAD_WINDOW;
}

/*
 * One system call for the states' headers, the CallInfo array and the Lua stack of the state
 * the last sample walked first (from its base_ci and stack: 4 KiB of each, ~100 calls deep),
 * into heads[] and the windows; what did not read is read again on its own. heads_ok: which.
 */
static void prefetch(bool *heads_ok)
{
	struct iovec local[CONFIG_LUAFRAMES_STATES + 2], remote[CONFIG_LUAFRAMES_STATES + 2];
	unsigned int slot[CONFIG_LUAFRAMES_STATES], n = 0, states = 0;
	long r;

	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		uintptr_t s = __atomic_load_n(&l51.vm.states[i], __ATOMIC_RELAXED);

		heads_ok[i] = false;
		if (!s)
			continue;
		local[n] = (struct iovec){heads[i], L_HEAD};
		remote[n++] = (struct iovec){(void *)s, L_HEAD};
		slot[states++] = i;
	}
	local[n] = (struct iovec){ci_window.buf, SELFREAD_WINDOW};
	remote[n++] = (struct iovec){(void *)hint.ci_lo, SELFREAD_WINDOW};
	local[n] = (struct iovec){stack_window.buf, SELFREAD_WINDOW};
	remote[n++] = (struct iovec){(void *)hint.stack_lo, SELFREAD_WINDOW};
	selfread__reset(&ci_window);
	selfread__reset(&stack_window);
	/* through the reader: its direct paths where proven, and under qemu-user (no
	 * process_vm_readv) the only way in */
	r = selfread__readv(local, remote, (unsigned long)n);
	for (unsigned int v = 0; v < states && r >= (long)L_HEAD * (long)(v + 1); v++)
		heads_ok[slot[v]] = true;
	r -= (long)L_HEAD * (long)states;
	if (hint.ci_lo && r >= SELFREAD_WINDOW) /* whole iovecs only, in order */
		window_holds(&ci_window, hint.ci_lo);
	if (hint.stack_lo && r >= 2 * SELFREAD_WINDOW)
		window_holds(&stack_window, hint.stack_lo);
}

/* The states running on this thread (their errorJmp on [sp, hi)), their headers in heads[],
 * order: their slots, innermost first. How many. */
static unsigned int running_states(uintptr_t sp, uintptr_t hi, unsigned int *order)
{
	uintptr_t jmp[CONFIG_LUAFRAMES_STATES];
	bool heads_ok[CONFIG_LUAFRAMES_STATES];
	unsigned int k = 0;

	prefetch(heads_ok);
	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		uintptr_t j;

		if (!luaframes__running(&l51.vm, i, heads[i], L_HEAD, heads_ok[i], sp, hi, &j))
			continue;
		jmp[i] = j;
		order[k] = i;
		for (unsigned int m = k++; m > 0 && jmp[order[m]] < jmp[order[m - 1]]; m--) {
			unsigned int t = order[m];

			order[m] = order[m - 1];
			order[m - 1] = t;
		}
	}
	if (k) { /* where the next sample's prefetch reads */
		hint.ci_lo = luafield__word(heads[order[0]], L_BASE_CI);
		hint.stack_lo = luafield__word(heads[order[0]], L_STACK);
	}
	return k;
}

/* The Proto of the Lua closure cl at savedpc, its code and the pc index (cached); false: not a
 * Proto or savedpc not in its code (a torn frame). */
static bool closure_proto(uintptr_t cl, const unsigned char *c, uintptr_t savedpc,
			  uintptr_t *proto, uintptr_t *code, unsigned int *pc)
{
	unsigned int slot = (unsigned int)(cl >> 4) % CACHE_SLOTS;
	unsigned char p[P_SIZE];

	if (proto_cache[slot].closure != cl || savedpc < proto_cache[slot].code ||
	    savedpc > proto_cache[slot].code_end) {
		int32_t size;

		if (!peek(luafield__word(c, CL_P), p, sizeof(p)) || p[P_TT] != LUA_TPROTO)
			return false;
		size = luafield__int32(p, P_SIZECODE);
		proto_cache[slot].closure = cl;
		proto_cache[slot].proto = luafield__word(c, CL_P);
		proto_cache[slot].code = luafield__word(p, P_CODE);
		proto_cache[slot].code_end = proto_cache[slot].code + 4 * (uintptr_t)(size > 0 ? size : 0);
		if (savedpc < proto_cache[slot].code || savedpc > proto_cache[slot].code_end) {
			proto_cache[slot].closure = 0;
			return false;
		}
	}
	*proto = proto_cache[slot].proto;
	*code = proto_cache[slot].code;
	/* savedpc is the next instruction (a fresh frame's is the first) */
	*pc = savedpc > *code ? (unsigned int)((savedpc - *code) / 4 - 1) : 0;
	return true;
}

/* A CallInfo's function: 1 Lua (its Proto, code and pc), 0 C, -1 torn. */
static int frame_function(const unsigned char *ci, uintptr_t savedpc, uintptr_t *proto,
			  uintptr_t *code, unsigned int *pc)
{
	unsigned int slot;
	unsigned char f[TV_SIZE], c[CL_SIZE];
	uintptr_t cl;

	if (!selfread__fetch(&stack_window, luafield__word(ci, CI_FUNC), f, sizeof(f),
			     &l51.vm.st->read_errors) ||
	    luafield__int32(f, TV_TT) != LUA_TFUNCTION)
		return -1;
	cl = luafield__word(f, 0);
	slot = (unsigned int)(cl >> 4) % CACHE_SLOTS;
	if (proto_cache[slot].closure == cl && !proto_cache[slot].proto)
		return 0; /* a C closure seen before (one reused by a Lua closure: a mismatch) */
	if (proto_cache[slot].closure == cl && savedpc >= proto_cache[slot].code &&
	    savedpc <= proto_cache[slot].code_end)
		return closure_proto(cl, NULL, savedpc, proto, code, pc);
	if (!peek(cl, c, sizeof(c)) || c[CL_TT] != LUA_TFUNCTION)
		return -1;
	if (c[CL_ISC]) {
		proto_cache[slot].closure = cl;
		proto_cache[slot].proto = 0;
		return 0;
	}
	return closure_proto(cl, c, savedpc, proto, code, pc) ? 1 : -1;
}

/* Is the Lua frame at savedpc (in code) stopped at a call of a Lua function: OP_CALL or
 * OP_TAILCALL just before savedpc? */
static bool at_call(uintptr_t savedpc, uintptr_t code)
{
	unsigned int slot = (unsigned int)(savedpc >> 2) % CACHE_SLOTS;
	uint32_t ins;

	if (savedpc <= code)
		return false;
	if (site_cache[slot].savedpc != savedpc) {
		if (!peek(savedpc - 4, &ins, sizeof(ins)))
			return false;
		site_cache[slot].savedpc = savedpc;
		site_cache[slot].op = ins & 0x3f;
	}
	return site_cache[slot].op == OP_CALL || site_cache[slot].op == OP_TAILCALL;
}

/* One state's CallInfos (L->ci down to base_ci) pushed as frames (*n in all), its runs ended
 * (*runs in all; agent/lib/luaframes.h): a Lua frame's run goes on below it when the frame below
 * is a Lua frame at a call. false: torn or too long. */
static bool walk_state(const unsigned char *head, unsigned int *n, unsigned int *runs,
		       bool *cut)
{
	uintptr_t base = luafield__word(head, L_BASE_CI), top = luafield__word(head, L_CI);
	unsigned char c[CI_SIZE];
	bool above = false; /* the frame above is Lua: its run's end depends on this one */

	if (top < base || (top - base) % CI_SIZE || (top - base) / CI_SIZE > CHAIN_STEPS)
		return false;
	for (uintptr_t ci = top; ci > base; ci -= CI_SIZE) {
		uintptr_t savedpc, proto, code;
		unsigned int pc;
		int lua;

		if (!selfread__fetch(&ci_window, ci, c, sizeof(c), &l51.vm.st->read_errors))
			return false;
		savedpc = luafield__word(ci == top ? head : c, ci == top ? L_SAVEDPC : CI_SAVEDPC);
		lua = frame_function(c, savedpc, &proto, &code, &pc);
		if (lua < 0)
			return false;
		/* the run above began here */
		if (above && !(lua && at_call(savedpc, code)) && !luaframes__end_run(*n, runs))
			return false;
		above = lua;
		if (lua)
			luaframes__push(lua51frame__tag(proto, pc), n, cut);
	}
	return !above || luaframes__end_run(*n, runs);
}

/* The Lua frames of the states running on this thread: runs of frames, innermost first. */
static bool lua_runs(uintptr_t sp, uintptr_t hi, unsigned int *runs, bool *cut)
{
	unsigned int order[CONFIG_LUAFRAMES_STATES], k = running_states(sp, hi, order), n = 0;

	*runs = 0;
	for (unsigned int s = 0; s < k; s++)
		if (!walk_state(heads[order[s]], &n, runs, cut))
			return false;
	return true;
}

unsigned int lua51frames__splice(uint64_t *frames, unsigned int n, unsigned int max,
				 uintptr_t stack_hi, bool *truncated)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t hi = stack_hi ? stack_hi : sp + (8u << 20);
	unsigned int a, runs = 0;
	bool cut = false, ok;

	if (!l51.on || !(a = luaframes__activations(&l51.vm, frames, n)))
		return n;
	ok = lua_runs(sp, hi, &runs, &cut);
	if ((!ok || runs != a) && !scan_wait--) {
		scan_wait = 63;
		luaframes__scan(&l51.vm, &stack_window, sp, hi);
		cut = false;
		ok = lua_runs(sp, hi, &runs, &cut);
	}
	if (!ok || !runs) {
		__atomic_fetch_add(ok ? &l51.vm.st->no_state : &l51.vm.st->mismatch, 1,
				   __ATOMIC_RELAXED);
		return n;
	}
	return luaframes__replace(&l51.vm, frames, n, max, a, runs, cut, truncated);
}
