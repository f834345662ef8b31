// SPDX-License-Identifier: MIT
/* agent/lib/ljframes.c — see ljframes.h. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#include "agent/core/luaname.h"
#include "agent/lib/ljframes.h"
#include "agent/lib/modules.h"
#include "agent/lib/selfread.h"

/* LuaJIT 2.1.0-beta3 GC64 (x86_64): offsetof() of Debian's 2.1.0~beta3+git20220320 headers,
 * compiled by tests/offsets/luajit.c. */
#define L_GCT 9		  /* lua_State: GCHeader's type byte */
#define L_GLREF 16	  /* its global_State */
#define L_BASE 32	  /* base: written back when the VM leaves for C */
#define L_MAXSTACK 48
#define L_STACK 56
#define L_CFRAME 80	  /* the innermost VM C frame, low 2 bits flags (CFRAME_RAWMASK) */
#define L_HEAD 88	  /* bytes of a state read per sample */
#define G_VMSTATE 184	  /* int32: ~LJ_VMST_* (negative), or the running trace's number */
#define G_MAINTHREF 192
#define G_CUR_L 368
#define G_JIT_BASE 376	  /* the trace's entry base while one runs, else 0 */
#define G_SPAN 200	  /* vmstate .. jit_base: read in one go */
#define GG_G2DISP 3968	  /* GG_State: dispatch[] past the global_State */
#define FN_GCT 9	  /* GCfunc */
#define FN_FFID 10	  /* 0: a Lua function (FF_LUA); else C or a fast function */
#define FN_PC 32	  /* GCfuncL.pc: its GCproto's bytecode */
#define FN_HEAD 40
#define PT_GCT 9	  /* GCproto */
#define PT_SIZEBC 12
#define PT_CHUNKNAME 64
#define PT_FIRSTLINE 72
#define PT_SIZE 104	  /* sizeof(GCproto): the bytecode follows it */
#define STR_GCT 9	  /* GCstr */
#define STR_LEN 20
#define STR_SIZE 24	  /* the bytes follow it */
#define CF_PC 24	  /* the VM's C frame: SAVE_PC (CFRAME_OFS_PC) */
#define CF_SIZE 80	  /* CFRAME_SIZE: the VM's CFA above its C frame */
#define GCT_THREAD 6	  /* ~LJ_TTHREAD */
#define GCT_PROTO 7
#define GCT_FUNC 8
#define GCT_STR 4
#define ITYPE_FUNC (-9)	  /* LJ_TFUNC as a GC64 TValue's top 17 bits, sign-extended */
#define GCVMASK ((1ull << 47) - 1)
#define VMST_INTERP (-1)  /* ~LJ_VMST_INTERP */
#define NUM_BC 97	  /* BC__MAX: dispatch[]'s length */
#define FRAME_C 1	  /* lj_frame.h: a link's low 3 bits */
#define FRAME_CONT 2
#define FRAME_VARG 3
#define FRAME_CP 5
#define CHAIN_STEPS 1024  /* Lua stack frames walked at most */
#define SLOT 8		  /* a TValue */
#define STACK_MAX (64u << 20) /* a Lua stack's bytes at most (LJ_STACK_MAXEX slots: ~1 MiB) */

static struct {
	bool on;
	struct luaframes_vm vm; /* the interpreter's bounds; the counters (luaframes.c's) */
	uintptr_t g;		/* the program's global_State, once seen (checked) */
	uintptr_t x_lo, x_hi;	/* the LuaJIT module's code */
} lj;

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
static EP_TLS struct selfread_window stack_window;
static EP_TLS bool live; /* this sample's state is proven mapped (read_state) */
/* Thread-local, not on the stack: the handler keeps to EP_HANDLER_STACK (sigprof.c). */
static EP_TLS uint64_t rewalk[CONFIG_MAX_STACK_DEPTH];
static EP_TLS ucontext_t rewalk_uc; /* the VM's C frame as an interrupted context */
static EP_TLS struct {
	unsigned char g[G_SPAN], L[L_HEAD]; /* this sample's global_State and running state */
} sample;

/* Function -> its Lua proto and bytecode (0: a C or fast function); return PC -> the CALL's A
 * operand: per-thread direct-mapped caches (protos do not change while they live). */
#define CACHE_SLOTS 64
static EP_TLS struct {
	uintptr_t fn, proto, bc;
	uint32_t sizebc;
} fn_cache[CACHE_SLOTS];
static EP_TLS struct {
	uintptr_t ret;
	unsigned int a;
} call_cache[CACHE_SLOTS];

static inline uintptr_t word(const unsigned char *b, unsigned int off)
{
	return luafield__word(b, off);
}

/* ---- start: the layout and the interpreter's bounds ------------------------------------------ */

struct module_find {
	uintptr_t base, x_lo, x_hi;
	const uint8_t *eh;
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct module_find *m = arg;

	(void)size;
	if (info->dlpi_addr != m->base)
		return 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_GNU_EH_FRAME)
			m->eh = (const uint8_t *)(m->base + p->p_vaddr);
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			m->x_lo = m->base + p->p_vaddr;
			m->x_hi = m->x_lo + p->p_memsz;
		}
	}
	return 1;
}

/* The LuaJIT API the check calls (lua.h, lualib.h), from the module exporting luaJIT_setmode. */
typedef void lua_State;
typedef int (*lua_CFunction)(lua_State *L);
static struct {
	lua_State *(*newstate)(void);
	void (*close)(lua_State *L);
	int (*loadbuffer)(lua_State *L, const char *buf, size_t len, const char *name);
	void (*pushcclosure)(lua_State *L, lua_CFunction fn, int n);
	int (*pcall)(lua_State *L, int nargs, int nresults, int errfunc);
	const char *(*tolstring)(lua_State *L, int idx, size_t *len);
	lua_CFunction open_jit;
} api;

static bool load_api(uintptr_t base)
{
	static const char *const names[] = {"luaL_newstate", "lua_close",    "luaL_loadbuffer",
					    "lua_pushcclosure", "lua_pcall", "lua_tolstring",
					    "luaopen_jit"};
	void *f[sizeof(names) / sizeof(names[0])];
	Dl_info info;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		f[i] = dlsym(RTLD_DEFAULT, names[i]);
		if (!f[i] || !dladdr(f[i], &info) || (uintptr_t)info.dli_fbase != base)
			return false;
	}
	memcpy(&api.newstate, &f[0], sizeof(f[0]));
	memcpy(&api.close, &f[1], sizeof(f[1]));
	memcpy(&api.loadbuffer, &f[2], sizeof(f[2]));
	memcpy(&api.pushcclosure, &f[3], sizeof(f[3]));
	memcpy(&api.pcall, &f[4], sizeof(f[4]));
	memcpy(&api.tolstring, &f[5], sizeof(f[5]));
	memcpy(&api.open_jit, &f[6], sizeof(f[6]));
	return true;
}

/* jit.version, into the counters' version ("LuaJIT-2.1.0-beta3"): the layouts' release? All
 * in protected calls (a failure is an error code, not a panic). */
static bool known_version(lua_State *L, struct luaframes_stats *st)
{
	static const char chunk[] = "return jit and jit.version";
	const char *v;
	size_t len = 0;

	api.pushcclosure(L, api.open_jit, 0);
	if (api.pcall(L, 0, 0, 0) || api.loadbuffer(L, chunk, sizeof(chunk) - 1, "=edgeprof") ||
	    api.pcall(L, 0, 1, 0))
		return false;
	v = api.tolstring(L, -1, &len);
	if (!v || !len)
		return false;
	snprintf(st->version, sizeof(st->version), "%.*s", (int)strcspn(v, " "), v);
	if (len > strlen(st->version))
		snprintf(st->version + strlen(st->version), sizeof(st->version) - strlen(st->version),
			 "-%s", v + strlen(st->version) + 1);
	return !strcmp(v, "LuaJIT 2.1.0-beta3");
}

/* Our own private state's objects, where the table says they are (plain loads: at start). */
static bool layout_holds(const unsigned char *L)
{
	static const char chunk[] = "return 1", name[] = "=edgeprof";
	const unsigned char *g = (const unsigned char *)word(L, L_GLREF), *fn, *pt, *str;
	uint64_t tv;

	if (L[L_GCT] != GCT_THREAD || !g || word(g, G_MAINTHREF) != (uintptr_t)L ||
	    api.loadbuffer((lua_State *)L, chunk, sizeof(chunk) - 1, name))
		return false;
	memcpy(&tv, (const void *)(word(L, L_BASE + 8) - SLOT), sizeof(tv)); /* L->top - 1 */
	if ((int64_t)tv >> 47 != ITYPE_FUNC)
		return false;
	fn = (const unsigned char *)(uintptr_t)(tv & GCVMASK);
	pt = (const unsigned char *)(word(fn, FN_PC) - PT_SIZE);
	if (fn[FN_GCT] != GCT_FUNC || fn[FN_FFID] || pt[PT_GCT] != GCT_PROTO ||
	    luafield__int32(pt, PT_FIRSTLINE) != 0)
		return false;
	str = (const unsigned char *)word(pt, PT_CHUNKNAME);
	return str[STR_GCT] == GCT_STR &&
	       (size_t)luafield__int32(str, STR_LEN) == sizeof(name) - 1 &&
	       !memcmp(str + STR_SIZE, name, sizeof(name) - 1);
}

/* The interpreter: the FDE of the module's .eh_frame_hdr holding every dispatch[] target. */
static bool find_vm(uintptr_t g, const struct module_find *m)
{
	const uintptr_t *dispatch = (const uintptr_t *)(g + GG_G2DISP);
	uintptr_t min = UINTPTR_MAX, max = 0;

	for (int i = 0; i < NUM_BC; i++) {
		if (dispatch[i] < m->x_lo || dispatch[i] >= m->x_hi)
			return false;
		min = dispatch[i] < min ? dispatch[i] : min;
		max = dispatch[i] > max ? dispatch[i] : max;
	}
	return m->eh && luaframes__function_bounds(m->eh, min, &lj.vm.exec_lo, &lj.vm.exec_hi) &&
	       max < lj.vm.exec_hi;
}

bool ljframes__init(struct luaframes_stats *st)
{
	void *setmode = dlsym(RTLD_DEFAULT, "luaJIT_setmode");
	struct module_find m = {0};
	unsigned char *L;
	Dl_info info;
	bool ok;

	lj.on = false;
	lj.vm.st = st;
	if (sizeof(void *) != 8 || !setmode || !dladdr(setmode, &info))
		return false;
	m.base = (uintptr_t)info.dli_fbase;
	dl_iterate_phdr(find_module, &m);
	if (!m.x_hi || !load_api(m.base) || !(L = api.newstate()))
		return false;
	ok = known_version(L, st) && layout_holds(L) && find_vm(word(L, L_GLREF), &m);
	lj.x_lo = m.x_lo;
	lj.x_hi = m.x_hi;
	api.close(L);
	lj.on = ok;
	return ok;
}

/* ---- the handler ------------------------------------------------------------------------------ */

static bool peek(uintptr_t addr, void *buf, size_t len)
{
	return selfread__peek(addr, buf, len, &lj.vm.st->read_errors);
}

static bool in_vm(uintptr_t pc)
{
	return pc >= lj.vm.exec_lo && pc < lj.vm.exec_hi;
}

/* Is g a global_State (its main thread's glref is g)? */
static bool is_global(uintptr_t g)
{
	unsigned char main[L_HEAD];
	uintptr_t m;

	return g && !(g & 7) && peek(g + G_MAINTHREF, &m, sizeof(m)) && !(m & 7) &&
	       peek(m, main, sizeof(main)) && main[L_GCT] == GCT_THREAD &&
	       word(main, L_GLREF) == g;
}

/* Is the cached function at slot still fn, running at ins (0: unknown)? A Lua function's
 * address reused by another's shows as a pc outside its proto's bytecode: read again. */
static bool fn_cached(unsigned int slot, uintptr_t fn, uintptr_t ins)
{
	uintptr_t bc = fn_cache[slot].bc;

	return fn_cache[slot].fn == fn &&
	       (!ins || !fn_cache[slot].proto ||
		(ins > bc && ins <= bc + 4 * (uintptr_t)fn_cache[slot].sizebc));
}

/* The function at fn, running at ins: 1 Lua (its proto, bytecode and size), 0 C or fast, -1
 * torn. */
static int function_of(uintptr_t fn, uintptr_t ins, uintptr_t *proto, uintptr_t *bc,
		       uint32_t *sizebc)
{
	unsigned int slot = (unsigned int)(fn >> 4) % CACHE_SLOTS;
	unsigned char f[FN_HEAD], p[PT_SIZEBC + 4];

	if (!fn_cached(slot, fn, ins)) {
		fn_cache[slot].fn = 0;
		if (!peek(fn, f, sizeof(f)) || f[FN_GCT] != GCT_FUNC)
			return -1;
		fn_cache[slot].proto = 0;
		if (!f[FN_FFID]) {
			uintptr_t b = word(f, FN_PC);

			if (!peek(b - PT_SIZE, p, sizeof(p)) || p[PT_GCT] != GCT_PROTO)
				return -1;
			fn_cache[slot].proto = b - PT_SIZE;
			fn_cache[slot].bc = b;
			fn_cache[slot].sizebc = (uint32_t)luafield__int32(p, PT_SIZEBC);
		}
		fn_cache[slot].fn = fn;
	}
	*proto = fn_cache[slot].proto;
	*bc = fn_cache[slot].bc;
	*sizebc = fn_cache[slot].sizebc;
	return *proto != 0;
}

/* The A operand of the CALL before the return PC ret: the caller's frame is A + 2 slots below. */
static bool call_a(uintptr_t ret, unsigned int *a)
{
	unsigned int slot = (unsigned int)(ret >> 2) % CACHE_SLOTS;
	uint32_t ins;

	if (call_cache[slot].ret != ret) {
		if ((ret & 3) || !peek(ret - 4, &ins, sizeof(ins)))
			return false;
		call_cache[slot].ret = ret;
		call_cache[slot].a = (ins >> 8) & 0xff;
	}
	*a = call_cache[slot].a;
	return true;
}

/* The instruction a Lua frame is at, from the PC after it (0: unknown): LUAFRAME_PC_NONE when
 * outside its bytecode. */
static unsigned int bc_pos(uintptr_t ins, uintptr_t bc, uint32_t sizebc)
{
	if (!ins || ins <= bc || (ins & 3) || (ins - bc) / 4 > sizebc)
		return LUAFRAME_PC_NONE;
	return (unsigned int)((ins - bc) / 4 - 1);
}

/* The frame whose link is at f (the slot below its base): its function pushed when Lua (at ins),
 * *ins and the returned slot set for the frame below; 0: torn. *run_ends: a C or CP link. */
static uintptr_t step(uintptr_t f, bool skip_fn, uintptr_t *ins, bool *run_ends, unsigned int *n,
		      bool *cut)
{
	uint64_t slots[2]; /* the function, the link */
	uintptr_t proto, bc, prev;
	uint32_t sizebc;
	unsigned int a;
	int lua;

	if (!selfread__fetch(&stack_window, f - SLOT, slots, sizeof(slots),
			     &lj.vm.st->read_errors))
		return 0;
	if (!skip_fn) {
		if ((int64_t)slots[0] >> 47 != ITYPE_FUNC)
			return 0;
		lua = function_of((uintptr_t)(slots[0] & GCVMASK), *ins, &proto, &bc, &sizebc);
		if (lua < 0)
			return 0;
		if (lua)
			luaframes__push(ljframe__tag(proto, bc_pos(*ins, bc, sizebc)), n, cut);
	}
	*run_ends = false;
	switch (slots[1] & 7) {
	case 0: /* FRAME_LUA: the caller's return PC */
	case 4:
		*ins = (uintptr_t)slots[1];
		return call_a(*ins, &a) ? f - SLOT * (2 + a) : 0;
	case FRAME_CONT: /* a metamethod the VM called: the caller's PC two slots down */
		if (!selfread__fetch(&stack_window, f - 2 * SLOT, ins, sizeof(*ins),
				     &lj.vm.st->read_errors))
			return 0;
		break;
	case FRAME_VARG: /* the same function's frame below: keep its pc */
		break;
	case FRAME_C: /* lua_call/lua_pcall from C: the end of this VM activation's frames */
	case FRAME_CP:
		*run_ends = true;
		*ins = 0;
		break;
	default: /* FRAME_PCALL(H): the pcall fast function's own frame below */
		*ins = 0;
	}
	prev = f - (uintptr_t)(slots[1] & ~(uint64_t)7);
	return prev < f ? prev : 0;
}

/* One state's frames from base down to its stack's bottom, pushed in runs (*n frames, *runs). */
static bool walk_state(const unsigned char *L, uintptr_t base, uintptr_t ins, unsigned int *n,
		       unsigned int *runs, bool *cut)
{
	uintptr_t stack = word(L, L_STACK), f = base - SLOT;
	unsigned int open = *n, steps = 0;
	bool skip_fn = false;

	if ((base & 7) || base < stack + 2 * SLOT || base > word(L, L_MAXSTACK) + SLOT)
		return false;
	while (f > stack + SLOT && steps++ < CHAIN_STEPS) {
		bool run_ends, varg;
		uint64_t link;

		if (!selfread__fetch(&stack_window, f, &link, sizeof(link), &lj.vm.st->read_errors))
			return false;
		varg = (link & 7) == FRAME_VARG;
		f = step(f, skip_fn, &ins, &run_ends, n, cut);
		if (!f)
			return false;
		skip_fn = varg; /* a vararg function's real frame: already pushed */
		if (run_ends) {
			if (!luaframes__end_run(*n, runs))
				return false;
			open = *n;
		}
	}
	return f <= stack + SLOT && (open == *n || luaframes__end_run(*n, runs));
}

/* A state's Lua stack, when the VM or a trace runs it: proven mapped (read_state). */
static void vouch_stack(const unsigned char *L)
{
	uintptr_t stack = word(L, L_STACK), max = word(L, L_MAXSTACK);

	if (stack && stack < max && max - stack < STACK_MAX)
		selfread__vouch(stack, max + SLOT);
}

/* The running state's frames, then the main thread's when a coroutine runs. */
static bool lua_runs(uintptr_t g, const unsigned char *gs, const unsigned char *L,
		     uintptr_t base, uintptr_t ins, unsigned int *n, unsigned int *runs,
		     bool *cut)
{
	uintptr_t main = word(gs, G_MAINTHREF - G_VMSTATE);
	unsigned char m[L_HEAD];

	if (!walk_state(L, base, ins, n, runs, cut))
		return false;
	if (main == word(gs, G_CUR_L - G_VMSTATE))
		return true;
	if (!peek(main, m, sizeof(m)) || m[L_GCT] != GCT_THREAD || word(m, L_GLREF) != g)
		return false;
	if (live)
		vouch_stack(m);
	selfread__reset(&stack_window);
	return walk_state(m, word(m, L_BASE), 0, n, runs, cut);
}

/* The global_State of this sample: from DISPATCH (r14) in the VM or a trace (not in a module),
 * when it holds one (checked), else the one seen last. */
static uintptr_t global_of(const ucontext_t *uc, bool vm_or_trace)
{
	uintptr_t seen = __atomic_load_n(&lj.g, __ATOMIC_RELAXED);
	uintptr_t g = (uintptr_t)uc->uc_mcontext.gregs[REG_R14] - GG_G2DISP;

	if (!vm_or_trace || g == seen)
		return seen;
	if (!is_global(g))
		return seen;
	__atomic_store_n(&lj.g, g, __ATOMIC_RELAXED);
	return g;
}

/*
 * The global_State (gs: G_SPAN bytes from vmstate) and the running state (L: its head), read
 * directly where they are proven mapped: the interrupted code is the VM's or a trace's and
 * DISPATCH (r14) points into the GG_State of the global_State found before, so that GG_State
 * is in use, and so are its cur_L (the state the VM runs), its main thread and their Lua stacks
 * (reallocated by C code only, lj_state_growstack, never while the VM or a trace runs). The
 * objects those point to are read through process_vm_readv (and cached). Elsewhere (LuaJIT's
 * C code) everything is.
 */
static bool read_state(const ucontext_t *uc, bool vm_or_trace, uintptr_t *g, unsigned char *gs,
		       unsigned char *L)
{
	uintptr_t cur, main;

	*g = global_of(uc, vm_or_trace);
	live = vm_or_trace && *g && *g == (uintptr_t)uc->uc_mcontext.gregs[REG_R14] - GG_G2DISP;
	if (live)
		selfread__vouch(*g + G_VMSTATE, *g + G_VMSTATE + G_SPAN);
	if (!*g || !peek(*g + G_VMSTATE, gs, G_SPAN))
		return false;
	cur = word(gs, G_CUR_L - G_VMSTATE);
	main = word(gs, G_MAINTHREF - G_VMSTATE);
	if (live) {
		selfread__vouch(cur, cur + L_HEAD);
		selfread__vouch(main, main + L_HEAD);
	}
	if (!peek(cur, L, L_HEAD) || L[L_GCT] != GCT_THREAD || word(L, L_GLREF) != *g)
		return false;
	if (live)
		vouch_stack(L);
	return true;
}

/*
 * The native walk again from the VM's C frame, after frames[0..k) kept: a trace's sample (the
 * C functions it called, up to the trace: no unwind tables there), or the interpreter's when
 * its walk stopped at once (k 0, its pc kept): the VM's one FDE says CFA = rsp + CFRAME_SIZE
 * everywhere, but its internal helpers (->vm_mod, ->vm_floor...) are called with a return
 * address pushed. The new count, 0: none.
 */
static unsigned int rewalk_from_vm(uint64_t *frames, unsigned int n, unsigned int max,
				   unsigned int k, uintptr_t cframe, const struct ljframes_walk *wk,
				   bool *truncated)
{
	uintptr_t pc = (uintptr_t)frames[0];
	ucontext_t *uc = &rewalk_uc;
	unsigned int m;

	if (k > n || !cframe || k + 2 >= max)
		return 0;
	memset(&uc->uc_mcontext, 0, sizeof(uc->uc_mcontext));
	/* CFA = rsp + CF_SIZE there; one byte in, as a return address (frames[k > 0]) counts */
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)lj.vm.exec_lo + 1;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)cframe;
	m = unwind__stack(uc, wk->stack_lo, wk->stack_hi, wk->mode, wk->cache, rewalk,
			  max - k - 1, truncated);
	if (!m || !in_vm((uintptr_t)rewalk[0]))
		return 0;
	memcpy(frames + k, rewalk, m * sizeof(frames[0]));
	if (in_vm(pc)) /* the interpreter's own pc, for a sample that stays native */
		frames[0] = pc;
	return k + m;
}

/* A walk's second try: its frames and runs forgotten. */
static void restart(unsigned int *pushed, unsigned int *runs, bool *cut)
{
	*pushed = *runs = 0;
	*cut = false;
	selfread__reset(&stack_window);
}

/*
 * Where the innermost Lua frame is and the frames from there: the registers in the interpreter
 * (falling back to L->base, as elsewhere, where they do not hold a frame: the VM between
 * bytecodes), G->jit_base in a trace (whose native walk is then redone from the VM). helper:
 * the VM called a C helper without writing L->base back (the cheap ones: lj_tab_len...) and
 * keeps BASE in rbp (RB, callee-saved) around the call: tried last, the leaf without a line
 * (PC's register, rbx, may be the helper's by then).
 */
static bool walk(const ucontext_t *uc, uintptr_t g, const unsigned char *gs,
		 const unsigned char *L, bool trace, bool helper, unsigned int *pushed,
		 unsigned int *runs, bool *cut)
{
	uintptr_t ins = 0;

	if (trace) { /* the label, then the frames below the trace */
		luaframes__push(ljframe__tag(0, LUAFRAME_PC_NONE), pushed, cut);
		return lua_runs(g, gs, L, word(gs, G_JIT_BASE - G_VMSTATE), 0, pushed, runs, cut);
	}
	if (in_vm((uintptr_t)uc->uc_mcontext.gregs[REG_RIP]) && luafield__int32(gs, 0) == VMST_INTERP &&
	    lua_runs(g, gs, L, (uintptr_t)uc->uc_mcontext.gregs[REG_RDX],
		     (uintptr_t)uc->uc_mcontext.gregs[REG_RBX], pushed, runs, cut))
		return true;
	restart(pushed, runs, cut);
	if (!peek((word(L, L_CFRAME) & ~(uintptr_t)3) + CF_PC, &ins, sizeof(ins)))
		ins = 0;
	if (lua_runs(g, gs, L, word(L, L_BASE), ins, pushed, runs, cut))
		return true;
	if (!helper || luafield__int32(gs, 0) != VMST_INTERP)
		return false;
	restart(pushed, runs, cut);
	return lua_runs(g, gs, L, (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], 0, pushed, runs, cut);
}

/* A walk without the VM that may be LuaJIT's all the same: in a trace (no module's code), or
 * through LuaJIT's C code, whose walk stops at the trace that called it. */
static bool in_luajit(const uint64_t *frames, unsigned int n)
{
	if (!modules__find((uintptr_t)frames[0]))
		return true;
	for (unsigned int i = 0; i < n; i++)
		if (frames[i] - (i > 0) >= lj.x_lo && frames[i] - (i > 0) < lj.x_hi)
			return true;
	return false;
}

static __attribute__((noinline)) unsigned int splice(uint64_t *frames, unsigned int n,
						     unsigned int max, const ucontext_t *uc,
						     const struct ljframes_walk *wk,
						     bool *truncated)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], g;
	unsigned int a, runs = 0, pushed = 0, m;
	bool cut = false, trace;

	a = luaframes__activations(&lj.vm, frames, n);
	if (!a && !in_luajit(frames, n)) /* C code, not LuaJIT's */
		return n;
	selfread__reset(&stack_window);
	if (!read_state(uc, in_vm(pc) || !modules__find(pc), &g, sample.g, sample.L)) {
		__atomic_fetch_add(&lj.vm.st->no_state, 1, __ATOMIC_RELAXED);
		return n;
	}
	trace = luafield__int32(sample.g, 0) >= 0 && word(sample.g, G_JIT_BASE - G_VMSTATE);
	if (trace || (in_vm(pc) && (n < 2 || !modules__find((uintptr_t)frames[1] - 1)))) {
		unsigned int k = 0;

		/* C called from the trace: its frames; the VM's helpers a trace calls (->vm_modi,
		 * ->vm_floor...; their walk is wrong, as above): none */
		while (trace && !in_vm(pc) && k < n && modules__find((uintptr_t)frames[k] - (k > 0)))
			k++;
		m = rewalk_from_vm(frames, n, max, k, word(sample.L, L_CFRAME) & ~(uintptr_t)3, wk,
				   truncated);
		if (!m) {
			__atomic_fetch_add(&lj.vm.st->mismatch, 1, __ATOMIC_RELAXED);
			return n;
		}
		n = m;
		a = luaframes__activations(&lj.vm, frames, n);
		__atomic_fetch_add(&lj.vm.st->traces, trace, __ATOMIC_RELAXED);
	} else if (!a) { /* LuaJIT's C code, not below the VM: profiled natively */
		return n;
	}
	if (!walk(uc, g, sample.g, sample.L, trace, !in_vm(pc) && n > 1 && in_vm((uintptr_t)frames[1] - 1),
		  &pushed, &runs, &cut)) {
		__atomic_fetch_add(&lj.vm.st->mismatch, 1, __ATOMIC_RELAXED);
		return n;
	}
	return luaframes__replace(&lj.vm, frames, n, max, a, runs, cut, truncated);
}

unsigned int ljframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
			      const void *uctx, const struct ljframes_walk *wk, bool *truncated)
{
	if (!lj.on || !n) /* no LuaJIT: no frame of the walk's on the stack */
		return n;
	return splice(frames, n, max, uctx, wk, truncated);
}
