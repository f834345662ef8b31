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
 * running on this thread, innermost first, by their errorJmp on this thread's stack.
 *
 * Frames: 5.1's CallInfos are an array, L->base_ci .. L->ci; the running Lua function's pc is
 * L->savedpc (the others' ci->savedpc). 5.1 has no CIST_FRESH: a Lua frame continues its
 * caller's luaV_execute activation exactly when the caller is a Lua frame stopped at OP_CALL or
 * OP_TAILCALL (luaV_execute's own assertion at OP_RETURN); a frame above a C function, the
 * state's base or any other instruction (a metamethod, OP_TFORLOOP's iterator) started a new
 * activation. The runs of frames replace the activations as in luaframes.h, or nothing is
 * replaced and the sample is counted (mismatch). Frames are tagged LUA51FRAME_TAG
 * (agent/core/luaname.h) and named by the profile writer. Every read goes through
 * process_vm_readv (agent/lib/selfread.h): one per sample for the states' headers and 4 KiB of
 * the CallInfo array and of the Lua stack from where the last sample found them, more only for
 * what lies elsewhere or misses the per-thread caches (closure -> Proto, call site -> opcode).
 * LP64 layouts only.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/core/luaname.h"
#include "agent/lib/luaframes.h"
#include "agent/lib/selfread.h"
#include "agent/lib/unwind.h"

/* Lua 5.1.5 LP64 (lstate.h, lobject.h; offsetof() checked against Debian's 5.1.5-9 sources). */
#define L_TT 8		 /* lua_State: CommonHeader's type byte */
#define L_G 32		 /* l_G */
#define L_CI 40		 /* ci: the running CallInfo */
#define L_SAVEDPC 48	 /* the running Lua function's pc */
#define L_STACK 64	 /* stack: the Lua stack's first slot */
#define L_BASE_CI 80	 /* base_ci: the array's first (a C level) */
#define L_ERRORJMP 168	 /* errorJmp */
#define L_HEAD 176	 /* bytes of the header read per sample */
#define G_MAINTHREAD 176 /* global_State.mainthread */
#define CI_FUNC 8	 /* CallInfo: func (a TValue * on the Lua stack) */
#define CI_SAVEDPC 24
#define CI_SIZE 40
#define TV_TT 8		 /* TValue: int tt after the 8-byte Value */
#define TV_SIZE 16
#define CL_TT 8		 /* Closure: CommonHeader's type byte */
#define CL_ISC 10
#define CL_P 32		 /* LClosure.p */
#define CL_SIZE 40
#define P_TT 8		 /* Proto */
#define P_CODE 24
#define P_SIZECODE 80
#define P_SIZE 84
#define LUA_TFUNCTION 6
#define LUA_TTHREAD 8
#define LUA_TPROTO 9
#define OP_CALL 28	 /* lopcodes.h */
#define OP_TAILCALL 29
#define CHAIN_STEPS 1024 /* CallInfos walked per state at most */

static struct {
	bool on;
	uintptr_t exec_lo, exec_hi; /* luaV_execute */
	uintptr_t states[CONFIG_LUAFRAMES_STATES];
	struct luaframes_stats *st;
} l51;

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
static EP_TLS struct selfread_window ci_window, stack_window;
static EP_TLS uint64_t spliced[CONFIG_MAX_STACK_DEPTH];
static EP_TLS uint64_t lframes[CONFIG_LUAFRAMES_MAX];
static EP_TLS unsigned int run_end[CONFIG_LUAFRAMES_MAX + 1]; /* frames in runs 0..k */
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
	const uint8_t *eh; /* the module's .eh_frame_hdr */
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct module_find *m = arg;
	bool holds = false;

	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && m->pc >= lo && m->pc - lo < p->p_memsz)
			holds = true;
		if (p->p_type == PT_GNU_EH_FRAME)
			m->eh = (const uint8_t *)lo;
	}
	if (!holds)
		m->eh = NULL;
	return holds;
}

/* The function holding pc by its module's .eh_frame_hdr table: [*lo, *hi) up to the next FDE's
 * start. Only GNU ld's encodings (a 4-byte eh_frame pointer, udata4 count, datarel sdata4). */
static bool function_of(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
	struct module_find m = {.pc = pc};
	int32_t count, lo_i = 0, hi_i, entry[2];
	const uint8_t *table;

	if (!dl_iterate_phdr(find_module, &m) || !m.eh || m.eh[0] != 1 ||
	    (m.eh[1] & 0x0f) != 0x0b || m.eh[2] != 0x03 || m.eh[3] != 0x3b)
		return false;
	table = m.eh + 12;
	memcpy(&count, m.eh + 8, sizeof(count));
	hi_i = count;
	while (hi_i - lo_i > 1) { /* the last entry starting at or before pc */
		int32_t mid = lo_i + (hi_i - lo_i) / 2;

		memcpy(entry, table + 8 * (size_t)mid, sizeof(entry));
		if ((uintptr_t)(m.eh + entry[0]) <= pc)
			lo_i = mid;
		else
			hi_i = mid;
	}
	if (count < 2 || lo_i + 1 >= count)
		return false;
	memcpy(entry, table + 8 * (size_t)lo_i, sizeof(entry));
	*lo = (uintptr_t)(m.eh + entry[0]);
	memcpy(entry, table + 8 * (size_t)(lo_i + 1), sizeof(entry));
	*hi = (uintptr_t)(m.eh + entry[0]);
	return *lo <= pc && pc < *hi;
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
		    (found && lo == l51.exec_lo))
			continue;
		found++;
		l51.exec_lo = lo;
		l51.exec_hi = hi;
	}
	return found == 1;
}

bool lua51frames__init(const void *ident, struct luaframes_stats *st)
{
	l51.on = false;
	l51.st = st;
	if (sizeof(void *) != 8 || !load_api(ident))
		return false;
	probe_walks = aligned_alloc(64, sizeof(*probe_walks)); /* the unwinder's cache lines */
	if (probe_walks)
		memset(probe_walks, 0, sizeof(*probe_walks));
	l51.on = probe_walks && run_probe() && find_execute(ident);
	free(probe_walks);
	probe_walks = NULL;
	return l51.on;
}

/* ---- the handler ---------------------------------------------------------------------------- */

static uint64_t word(const unsigned char *b, unsigned int off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static int32_t int32(const unsigned char *b, unsigned int off)
{
	int32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static bool peek(uintptr_t addr, void *buf, size_t len)
{
	return selfread__peek(addr, buf, len, &l51.st->read_errors);
}

/* Is w a lua_State (main, or a coroutine of a main state's universe)? Up to three reads. */
static bool is_state(uintptr_t w)
{
	unsigned char h[L_G + 8], m[L_G + 8];
	uintptr_t g, main;

	if (!peek(w, h, sizeof(h)) || h[L_TT] != LUA_TTHREAD)
		return false;
	g = word(h, L_G);
	if (!g || (g & 7) || !peek(g + G_MAINTHREAD, &main, sizeof(main)))
		return false;
	if (main == w)
		return true;
	return !(main & 7) && peek(main, m, sizeof(m)) && m[L_TT] == LUA_TTHREAD &&
	       word(m, L_G) == g;
}

static bool known_state(uintptr_t w)
{
	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++)
		if (__atomic_load_n(&l51.states[i], __ATOMIC_RELAXED) == w)
			return true;
	return false;
}

static void add_state(uintptr_t w)
{
	for (unsigned int i = 0; i < CONFIG_LUAFRAMES_STATES; i++) {
		uintptr_t expect = 0;

		if (__atomic_compare_exchange_n(&l51.states[i], &expect, w, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_fetch_add(&l51.st->states, 1, __ATOMIC_RELAXED);
			return;
		}
	}
	__atomic_fetch_add(&l51.st->states_full, 1, __ATOMIC_RELAXED);
}

/* The stack word at a, through the window: read 4 KiB ahead towards end (one system call for
 * 512 words: the window holds what is below the address asked for). */
static bool stack_word(uintptr_t a, uintptr_t end, uintptr_t *w)
{
	if (!stack_window.hi || a < stack_window.lo || a + sizeof(*w) > stack_window.hi) {
		uintptr_t last = a + SELFREAD_WINDOW - sizeof(*w);

		if (last > end - sizeof(*w))
			last = end - sizeof(*w);
		if (!selfread__fetch(&stack_window, last, w, sizeof(*w), &l51.st->read_errors))
			return false;
	}
	return selfread__fetch(&stack_window, a, w, sizeof(*w), &l51.st->read_errors);
}

/* New states among the words of this thread's stack from sp up (at most 64 candidates read). */
static void scan_stack(uintptr_t sp, uintptr_t hi)
{
	uintptr_t end = sp + CONFIG_LUAFRAMES_SCAN_BYTES, w;
	unsigned int tried = 0;

	__atomic_fetch_add(&l51.st->scans, 1, __ATOMIC_RELAXED);
	if (hi && hi < end)
		end = hi;
	selfread__reset(&stack_window);
	for (uintptr_t a = sp & ~(uintptr_t)7; a + 8 <= end && tried < 64; a += 8) {
		if (!stack_word(a, end, &w))
			break;
		if ((w & 7) || w < 65536 || w >> 47 || (w >= sp && w < end) || known_state(w))
			continue;
		tried++;
		if (is_state(w))
			add_state(w);
	}
	selfread__reset(&stack_window);
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
		uintptr_t s = __atomic_load_n(&l51.states[i], __ATOMIC_RELAXED);

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
	r = syscall(SYS_process_vm_readv, getpid(), local, (unsigned long)n, remote,
		    (unsigned long)n, 0UL);
	for (unsigned int v = 0; v < states && r >= (long)L_HEAD * (v + 1); v++)
		heads_ok[slot[v]] = true;
	r -= (long)L_HEAD * states;
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
		uintptr_t s = __atomic_load_n(&l51.states[i], __ATOMIC_RELAXED), j;

		if (!s)
			continue;
		if ((!heads_ok[i] && !peek(s, heads[i], L_HEAD)) || heads[i][L_TT] != LUA_TTHREAD) {
			/* freed (a coroutine collected): forget it */
			__atomic_compare_exchange_n(&l51.states[i], &s, 0, false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
			continue;
		}
		j = word(heads[i], L_ERRORJMP);
		if (j < sp || j >= hi)
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
		hint.ci_lo = word(heads[order[0]], L_BASE_CI);
		hint.stack_lo = word(heads[order[0]], L_STACK);
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

		if (!peek(word(c, CL_P), p, sizeof(p)) || p[P_TT] != LUA_TPROTO)
			return false;
		size = int32(p, P_SIZECODE);
		proto_cache[slot].closure = cl;
		proto_cache[slot].proto = word(c, CL_P);
		proto_cache[slot].code = word(p, P_CODE);
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

	if (!selfread__fetch(&stack_window, word(ci, CI_FUNC), f, sizeof(f),
			     &l51.st->read_errors) ||
	    int32(f, TV_TT) != LUA_TFUNCTION)
		return -1;
	cl = word(f, 0);
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

static void push_frame(uintptr_t proto, unsigned int pc, unsigned int *n, bool *cut)
{
	if (*n < CONFIG_LUAFRAMES_MAX)
		lframes[(*n)++] = lua51frame__tag(proto, pc);
	else
		*cut = true;
}

/* One state's CallInfos (L->ci down to base_ci) into lframes[*n..], its runs into
 * run_end[*runs..]: a Lua frame's run goes on below it when the frame below is a Lua frame at
 * a call. false: torn or too long. */
static bool walk_state(const unsigned char *head, unsigned int *n, unsigned int *runs,
		       bool *cut)
{
	uintptr_t base = word(head, L_BASE_CI), top = word(head, L_CI);
	unsigned char c[CI_SIZE];
	bool above = false; /* the frame above is Lua: its run's end depends on this one */

	if (top < base || (top - base) % CI_SIZE || (top - base) / CI_SIZE > CHAIN_STEPS)
		return false;
	for (uintptr_t ci = top; ci > base; ci -= CI_SIZE) {
		uintptr_t savedpc, proto, code;
		unsigned int pc;
		int lua;

		if (!selfread__fetch(&ci_window, ci, c, sizeof(c), &l51.st->read_errors))
			return false;
		savedpc = ci == top ? word(head, L_SAVEDPC) : word(c, CI_SAVEDPC);
		lua = frame_function(c, savedpc, &proto, &code, &pc);
		if (lua < 0)
			return false;
		if (above && !(lua && at_call(savedpc, code))) { /* the run above began here */
			if (*runs == CONFIG_LUAFRAMES_MAX)
				return false;
			run_end[(*runs)++] = *n;
		}
		above = lua;
		if (lua)
			push_frame(proto, pc, n, cut);
	}
	if (above) {
		if (*runs == CONFIG_LUAFRAMES_MAX)
			return false;
		run_end[(*runs)++] = *n;
	}
	return true;
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

static bool in_execute(const uint64_t *frames, unsigned int i)
{
	uintptr_t pc = (uintptr_t)frames[i] - (i > 0); /* a return address: its call */

	return pc >= l51.exec_lo && pc < l51.exec_hi;
}

static unsigned int activations(const uint64_t *frames, unsigned int n)
{
	unsigned int a = 0;

	for (unsigned int i = 0; i < n; i++)
		a += in_execute(frames, i);
	return a;
}

/* The runs in place of the activations (as many of each: checked by the caller). */
static unsigned int splice_runs(uint64_t *frames, unsigned int n, unsigned int max,
				unsigned int *pushed)
{
	unsigned int out = 0, run = 0, i;

	for (i = 0; i < n && out < max; i++) {
		unsigned int from = run ? run_end[run - 1] : 0;

		if (!in_execute(frames, i)) {
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

unsigned int lua51frames__splice(uint64_t *frames, unsigned int n, unsigned int max,
				 uintptr_t stack_hi, bool *truncated)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t hi = stack_hi ? stack_hi : sp + (8u << 20);
	unsigned int a, runs = 0, pushed = 0, out;
	bool cut = false, ok;

	if (!l51.on || !(a = activations(frames, n)))
		return n;
	ok = lua_runs(sp, hi, &runs, &cut);
	if ((!ok || runs != a) && !scan_wait--) {
		scan_wait = 63;
		scan_stack(sp, hi);
		cut = false;
		ok = lua_runs(sp, hi, &runs, &cut);
	}
	if (!ok || !runs) {
		__atomic_fetch_add(ok ? &l51.st->no_state : &l51.st->mismatch, 1, __ATOMIC_RELAXED);
		return n;
	}
	/* a cut native walk (at the depth limit) has fewer activations: the innermost match */
	if (runs != a && !(*truncated && a < runs)) {
		__atomic_fetch_add(&l51.st->mismatch, 1, __ATOMIC_RELAXED);
		return n;
	}
	out = splice_runs(frames, n, max, &pushed);
	if (cut || (out & 0x80000000u)) {
		*truncated = true;
		__atomic_fetch_add(&l51.st->truncated, 1, __ATOMIC_RELAXED);
	}
	if (pushed) {
		__atomic_fetch_add(&l51.st->samples, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&l51.st->frames, pushed, __ATOMIC_RELAXED);
	}
	return out & ~0x80000000u;
}
