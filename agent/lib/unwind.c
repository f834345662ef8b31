// SPDX-License-Identifier: MIT
/*
 * agent/lib/unwind.c — see unwind.h. Everything reachable from unwind__stack() is
 * async-signal-safe: no allocation, no locks, reads checked before they are made.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "elf/a64frame.h"
#include "elf/armframe.h"
#include "elf/cfi.h"
#include "elf/ehabi.h"
#include "agent/lib/modules.h"
#include "agent/lib/unwind.h"

static struct unwind_stats ustats;

struct regs {
	uintptr_t pc, sp, fp, lr;
};

/*
 * A return address as the code it returns to: arm64 code built with -mbranch-protection
 * (Debian 13's python3.13, for one) signs the link register (paciasp) before it saves it, and
 * the signature sits in the address's top bits. xpaclri (a hint: a no-op where the CPU has no
 * pointer authentication) strips it, so an unsigned address comes back as it was.
 */
#if defined(__aarch64__)
static uintptr_t code_address(uintptr_t ra)
{
	register uintptr_t x30 __asm__("x30") = ra;

	__asm__("hint #7" : "+r"(x30)); /* xpaclri */
	return x30;
}
#else
static uintptr_t code_address(uintptr_t ra)
{
	return ra;
}
#endif /* __aarch64__ */

static void regs_from_uctx(const void *uctx, struct regs *r)
{
	const ucontext_t *uc = uctx;

#if defined(__x86_64__)
	r->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	r->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	r->fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
	r->lr = 0;
#elif defined(__aarch64__)
	r->pc = uc->uc_mcontext.pc;
	r->sp = uc->uc_mcontext.sp;
	r->fp = uc->uc_mcontext.regs[29];
	r->lr = code_address(uc->uc_mcontext.regs[30]);
#elif defined(__arm__)
	r->pc = uc->uc_mcontext.arm_pc;
	r->sp = uc->uc_mcontext.arm_sp;
	r->fp = uc->uc_mcontext.arm_fp;
	r->lr = uc->uc_mcontext.arm_lr;
#else
	memset(r, 0, sizeof(*r));
#endif
}

/* ---- module table (agent/lib/modules.c) ------------------------------------------------------ */

void unwind__suspend(void)
{
	modules__suspend();
}

int unwind__init(void)
{
	return modules__rebuild();
}

void unwind__stats(struct unwind_stats *st)
{
	*st = ustats;
}

/* ---- one walk ------------------------------------------------------------------------------ */

/*
 * What one walk carries: the stack bounds, the thread's cache, the module the last pc was in
 * (consecutive frames are mostly in one module: no scan of the table for them) and counters
 * added to the shared ones once at the end (not one atomic operation per frame).
 */
struct walk {
	uintptr_t lo, hi; /* the thread's stack; hi == 0: unknown */
	struct unwind_cache *c;
	const struct module *last;	       /* the table's module of the last pc */
	const struct module *proven, *refused; /* loaded now, or not, by the loader's word */
	struct unwind_stats n;
};

/* The table's module of pc: its text ranges only (nothing of the module is read). */
static const struct module *walk_module(struct walk *w, uintptr_t pc)
{
	if (!w->last || pc < w->last->text_lo || pc >= w->last->text_hi)
		w->last = modules__find(pc);
	return w->last;
}

/*
 * The module of pc whose memory (unwind tables, code bytes) may be read: the table's entry,
 * proven loaded now by the loader (modules__readable: glibc unloads modules behind the
 * table's back). A walk proves each module it enters once.
 */
static const struct module *walk_tables(struct walk *w, uintptr_t pc)
{
	const struct module *m = walk_module(w, pc);

	if (m && m != w->proven && m != w->refused) {
		if (modules__readable(m, pc))
			w->proven = m;
		else
			w->refused = m;
	}
	return m && m == w->proven ? m : NULL;
}

static bool read_word(const struct walk *w, uintptr_t addr, uintptr_t *val)
{
	if (addr & (sizeof(uintptr_t) - 1))
		return false;
	if (w->hi) {
		if (addr < w->lo || addr > w->hi - sizeof(uintptr_t))
			return false;
		*val = *(const uintptr_t *)addr;
		return true;
	}
	/* stack bounds unknown (a thread that existed before we started): let the kernel check */
	struct iovec local = {val, sizeof(*val)}, remote = {(void *)addr, sizeof(*val)};

	return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) ==
	       (long)sizeof(*val);
}

/*
 * Signal trampolines: the return address of a signal handler's frame is the restorer, whose
 * code is `mov $15, %rax; syscall` (x86_64 glibc's __restore_rt) or `mov x8, #139; svc #0`
 * (the arm64 vDSO's __kernel_rt_sigreturn, which has no usable CFI). Known by its bytes, as
 * the OpenTelemetry profiler does; the interrupted registers are then in the ucontext the
 * kernel left at sp: its uc_mcontext at sp + 40 (x86_64), regs[] at sp + 312 (arm64).
 */
#define RULE_SIGNAL 0x10ull /* in the packed rules' caller bits (cfi.h) */

#if defined(__x86_64__)
static const uint8_t sigreturn_code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
#elif defined(__aarch64__)
static const uint8_t sigreturn_code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
#else
static const uint8_t sigreturn_code[] = {0xff}; /* 32-bit ARM: not walked by these rules */
#endif

/*
 * Whether the 8 bytes at addr can be read: rt_sigprocmask copies its set in before it looks
 * at `how` (EFAULT: unreadable; EINVAL for the bad `how`: readable). One system call and no
 * change of the mask; the trick gperftools and abseil use. errno: the handler restores it.
 */
static bool readable8(uintptr_t addr)
{
	return syscall(SYS_rt_sigprocmask, ~0, (void *)addr, NULL, 8) == -1 && errno == EINVAL;
}

/*
 * Inside a module the code is read directly; elsewhere (qemu-user puts its trampoline on a
 * page of its own) after a check that it is mapped: that costs system calls, paid only where
 * a walk would otherwise end.
 */
static bool is_sigreturn(struct walk *w, uintptr_t pc)
{
	const struct module *m = walk_tables(w, pc);
	size_t len = sizeof(sigreturn_code);

	if (m)
		return pc + len <= m->text_hi && !memcmp((const void *)pc, sigreturn_code, len);
	return pc > 4096 && len > 1 && readable8(pc) && (len <= 8 || readable8(pc + len - 8)) &&
	       !memcmp((const void *)pc, sigreturn_code, len);
}

/* The cache set of a pc. Fibonacci hashing: code addresses share low and page bits often. */
static unsigned int cache_set(uintptr_t key)
{
	return (unsigned int)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 40) % UNWIND_CACHE_SETS;
}

/* Puts rule for key at the head of its set: the oldest of the set leaves. */
static void cache_put(struct unwind_cache *c, uintptr_t key, uint64_t rule)
{
	unsigned int i = cache_set(key);

	c->misses++;
	memmove(&c->e[i][1], &c->e[i][0], sizeof(c->e[i][0]) * (UNWIND_CACHE_WAYS - 1));
	c->e[i][0].rule = rule;
	c->e[i][0].pc = key;
}

#if defined(__arm__) || defined(__aarch64__)
/* Replaces key's rule (put there by an earlier lookup), or puts it: frames read from code. */
static void cache_replace(struct unwind_cache *c, uintptr_t key, uint64_t rule)
{
	unsigned int i = cache_set(key);

	for (unsigned int k = 0; k < UNWIND_CACHE_WAYS; k++) {
		if (c->e[i][k].pc == key) {
			c->e[i][k].rule = rule;
			return;
		}
	}
	cache_put(c, key, rule);
}
#endif /* __arm__ || __aarch64__ */

/*
 * A frame found by reading code (arm64: step_read_code), cached as its rules with this bit in
 * the caller bits; this bit alone: the reading found none (the code says so, whatever the
 * stack). Table lookups see such entries as "no tables".
 */
#define RULE_INFERRED 0x20ull

/*
 * Rules at pc (the frame's pc, minus 1 for a return address when !exact), through the
 * thread's cache: false when pc has none usable. *signal: the frame is a signal trampoline.
 */
static bool rules_cached(struct walk *w, uintptr_t pc, bool exact, struct cfi_rules *cr,
			 bool *signal)
{
	struct unwind_cache *c = w->c;
	uintptr_t key = exact ? pc : pc - 1, row[2];
	unsigned int i = cache_set(key);
	const struct module *m;
	uint64_t packed;
	bool ok;

	for (unsigned int k = 0; c && k < UNWIND_CACHE_WAYS; k++) {
		if (c->e[i][k].pc == key) {
			c->hits++;
			*signal = c->e[i][k].rule & RULE_SIGNAL;
			if (c->e[i][k].rule & RULE_INFERRED)
				return false;
			return *signal || cfi__unpack(c->e[i][k].rule, cr);
		}
	}
	for (unsigned int j = 0; c && exact && j < UNWIND_CACHE_ROWS; j++) {
		if (key >= c->row[j].lo && key < c->row[j].hi) {
			c->hits++;
			*signal = false;
			return cfi__unpack(c->row[j].rule, cr);
		}
	}
	/* not for the leaf, whose code bytes would cost a cold read per sample: a sample in
	 * the trampoline's two instructions is walked by its tables, or not at all */
	*signal = !exact && is_sigreturn(w, pc);
	if (*signal) {
		packed = RULE_SIGNAL;
		ok = true;
		goto store;
	}
	m = walk_tables(w, key);
	ok = m && cfi__rules_row(&m->cfi, key, cr, row) &&
	     (cr->cfa_reg == CFI_REG_SP || cr->cfa_reg == CFI_REG_FP || cr->cfa_reg == CFI_CFA_PLT);
	if (!c)
		return ok;
	if (!ok)
		packed = CFI_PACKED_NONE;
	else if (!cfi__pack(cr, &packed))
		return ok; /* a huge frame: correct but not cached */
	if (ok && exact) { /* the leaf: its row serves the next samples in the same stretch */
		unsigned int j = c->row_next++ % UNWIND_CACHE_ROWS;

		c->row[j].lo = row[0];
		c->row[j].hi = row[1];
		c->row[j].rule = packed;
	}
store:
	if (c)
		cache_put(c, key, packed);
	return ok;
}

enum step { STEP_OK, STEP_STOP, STEP_NONE };

/* The registers the kernel saved at a signal trampoline's sp; the next pc is exact. */
static enum step step_signal(struct walk *w, struct regs *r)
{
	uintptr_t pc = 0, sp = 0, fp = 0, lr = 0;
	bool ok = false;

#if defined(__x86_64__)
	uintptr_t g = r->sp + 40; /* uc_mcontext.gregs */

	ok = read_word(w, g + 8 * REG_RIP, &pc) && read_word(w, g + 8 * REG_RSP, &sp) &&
	     read_word(w, g + 8 * REG_RBP, &fp);
#elif defined(__aarch64__)
	uintptr_t g = r->sp + 312; /* uc_mcontext.regs */

	ok = read_word(w, g + 8 * 32, &pc) && read_word(w, g + 8 * 31, &sp) &&
	     read_word(w, g + 8 * 29, &fp) && read_word(w, g + 8 * 30, &lr);
#endif
	if (!ok || sp <= r->sp)
		return STEP_NONE;
	r->pc = pc;
	r->sp = sp;
	r->fp = fp;
	r->lr = code_address(lr);
	w->n.signal_frames++;
	return STEP_OK;
}

/*
 * One frame by unwind tables. exact: r->pc is where the thread was (the leaf, or the frame a
 * signal interrupted), so it is looked up as is and a return address still in the link
 * register is valid; otherwise r->pc is a return address, looked up at pc - 1 (the call).
 * STEP_STOP: the tables say this is the outermost frame. STEP_NONE: no usable rules here.
 */
static enum step step_cfi(struct walk *w, struct regs *r, bool *exact)
{
	struct cfi_rules cr;
	uintptr_t cfa, ra, fp = r->fp;
	bool signal, from_lr = false;

	if (!rules_cached(w, r->pc, *exact, &cr, &signal)) {
		w->n.no_fde++;
		return STEP_NONE;
	}
	if (signal) {
		*exact = true;
		return step_signal(w, r);
	}
	if (cr.ra_undefined) {
		w->n.outermost++;
		return STEP_STOP;
	}
	if (cr.cfa_reg == CFI_REG_FP)
		cfa = r->fp + (uintptr_t)cr.cfa_off;
	else if (cr.cfa_reg == CFI_CFA_PLT)
		cfa = r->sp + (uintptr_t)cr.cfa_off + ((r->pc & 15) >= cr.plt_min ? 8 : 0);
	else
		cfa = r->sp + (uintptr_t)cr.cfa_off;
	if (cr.ra_saved) {
		if (!read_word(w, cfa + (uintptr_t)cr.ra_off, &ra))
			return STEP_NONE;
	} else if (*exact && r->lr) {
		ra = r->lr; /* a leaf that kept its return address in the link register */
		from_lr = true;
	} else {
		return STEP_NONE;
	}
	/* stacks grow down: a caller's CFA is above ours (equal only for a frameless leaf) */
	ra = code_address(ra);
	if (cfa < r->sp || (cfa == r->sp && !from_lr))
		return STEP_NONE;
	if (cr.fp_saved && !read_word(w, cfa + (uintptr_t)cr.fp_off, &fp))
		return STEP_NONE;
	r->pc = ra;
	r->sp = cfa;
	r->fp = fp;
	r->lr = 0;
	*exact = false;
	return STEP_OK;
}

/* One frame by the frame pointer chain: [fp] = caller's fp, [fp + word] = return address. */
static bool step_fp(struct walk *w, struct regs *r)
{
	uintptr_t nfp, ra;

	if (r->fp < r->sp || !read_word(w, r->fp, &nfp) ||
	    !read_word(w, r->fp + sizeof(uintptr_t), &ra))
		return false;
	if (nfp && nfp <= r->fp)
		return false; /* stacks grow down: a caller's frame is above ours */
	r->sp = r->fp + 2 * sizeof(uintptr_t);
	r->fp = nfp;
	r->pc = code_address(ra);
	r->lr = 0;
	return true;
}

/*
 * aarch64 PLT stubs have no CFI (binutils emits none): a sample in one has the return address
 * in the link register and sp untouched. Known by the stub's last instruction, `br x17`, at
 * the end of its 16 bytes. Only for the interrupted frame.
 */
static bool step_plt_leaf(struct walk *w, struct regs *r)
{
#if defined(__aarch64__)
	const struct module *m = walk_tables(w, r->pc);
	uintptr_t stub = r->pc & ~(uintptr_t)15;
	uint32_t insn;

	if (!m || !r->lr || stub < m->text_lo || stub + 16 > m->text_hi)
		return false;
	memcpy(&insn, (const void *)(stub + 12), sizeof(insn));
	if (insn != 0xd61f0220) /* br x17 */
		return false;
	r->pc = r->lr;
	r->lr = 0;
	return true;
#else
	return false;
#endif
}

/*
 * A return address: inside some module's code (the table's, or one the loader has loaded
 * since), or a signal trampoline outside them.
 */
static bool plausible_pc(struct walk *w, uintptr_t pc)
{
	return pc > 4096 &&
	       (walk_module(w, pc - 1) || modules__is_code(pc - 1) || is_sigreturn(w, pc));
}

#if defined(__aarch64__)
/* The code of the module holding pc, proven loaded. */
static bool a64_code(struct walk *w, uintptr_t pc, struct a64frame_code *c)
{
	const struct module *m = pc > 4096 ? walk_tables(w, pc) : NULL;

	if (!m)
		return false;
	*c = (struct a64frame_code){(const uint8_t *)m->text_lo, m->text_lo, m->text_hi};
	return true;
}

static void inferred_rules(const struct a64frame *f, struct cfi_rules *cr)
{
	memset(cr, 0, sizeof(*cr));
	cr->cfa_reg = CFI_REG_SP;
	cr->cfa_off = f->cfa;
	cr->ra_saved = !f->ra_in_lr;
	cr->ra_off = (int64_t)f->ra_off - f->cfa;
	cr->fp_saved = f->fp_saved;
	cr->fp_off = (int64_t)f->fp_off - f->cfa;
}

/*
 * The caller's registers by an inferred frame's rules: its return address must follow a call
 * instruction (bl, blr) in a module's code, its sp be above ours (equal only where the
 * interrupted function saved nothing and returns through x30).
 */
/* ra follows a call in m's code (its own frame: not on the stack while the module is proven). */
static __attribute__((noinline)) bool after_call_in(const struct module *m, uintptr_t ra)
{
	const struct a64frame_code c = {(const uint8_t *)m->text_lo, m->text_lo, m->text_hi};

	return a64frame__after_call(&c, ra);
}

/* r becomes the caller by cr when it is found; else r is left as it was. */
static bool inferred_caller(struct walk *w, struct regs *r, const struct cfi_rules *cr,
			    bool exact)
{
	uintptr_t cfa = r->sp + (uintptr_t)cr->cfa_off, ra, fp = r->fp;
	const struct module *m;

	if (cr->ra_saved ? !read_word(w, cfa + (uintptr_t)cr->ra_off, &ra) : !exact || !r->lr)
		return false;
	ra = cr->ra_saved ? code_address(ra) : r->lr;
	if (cfa < r->sp || (cr->fp_saved && !read_word(w, cfa + (uintptr_t)cr->fp_off, &fp)))
		return false;
	m = ra > 4096 ? walk_tables(w, ra - 1) : NULL;
	if (!m || !after_call_in(m, ra))
		return false;
	*r = (struct regs){.pc = ra, .sp = cfa, .fp = fp, .lr = 0};
	return true;
}

/* The frame's rules as the thread's cache holds them from an earlier reading. */
static bool inferred_cached(struct unwind_cache *c, uintptr_t key, uint64_t *rule)
{
	unsigned int i = cache_set(key);

	for (unsigned int k = 0; c && k < UNWIND_CACHE_WAYS; k++) {
		if (c->e[i][k].pc == key && (c->e[i][k].rule & RULE_INFERRED)) {
			*rule = c->e[i][k].rule & ~RULE_INFERRED;
			return true;
		}
	}
	return false;
}

/*
 * A frame without unwind tables, by reading its code (elf/a64frame.h), or as the cache holds
 * it: r becomes the caller's. Where the forward reading's return address proves wrong (a path
 * through a noreturn call runs into whatever follows it), the prologue's. Inferred, not exact.
 * Not inlined: the reading's state stays off the stack of walks that do not read code (the
 * handler's stack use is the deepest of its paths: harm stackuse).
 */
static __attribute__((noinline)) bool step_read_code(struct walk *w, struct regs *r, bool exact)
{
	uintptr_t key = exact ? r->pc : r->pc - 1;
	struct a64frame_work *work = w->c ? &w->c->a64 : NULL;
	struct a64frame_code c;
	struct cfi_rules cr;
	struct a64frame f;
	uint64_t rule;
	bool ok;

	if (inferred_cached(w->c, key, &rule))
		ok = cfi__unpack(rule, &cr) && inferred_caller(w, r, &cr, exact);
	else if (!a64_code(w, key, &c))
		return false;
	else if (!a64frame__analyze(&c, r->pc, exact, CONFIG_UNWIND_A64_SCAN_INSNS, &f, work)) {
		if (w->c) /* the code has none: not read again */
			cache_replace(w->c, key, RULE_INFERRED);
		return false;
	} else {
		inferred_rules(&f, &cr);
		ok = inferred_caller(w, r, &cr, exact);
		if (!ok && f.how == A64FRAME_FORWARD &&
		    a64frame__prologue(&c, r->pc, exact, CONFIG_UNWIND_A64_SCAN_INSNS, &f, work)) {
			inferred_rules(&f, &cr);
			ok = inferred_caller(w, r, &cr, exact);
		}
		/* hot loops repeat their pcs: a reading costs ~100 instructions */
		if (ok && w->c && cfi__pack(&cr, &rule))
			cache_replace(w->c, key, rule | RULE_INFERRED);
	}
	return ok;
}
#else
static bool step_read_code(struct walk *w, struct regs *r, bool exact)
{
	(void)w, (void)r, (void)exact;
	return false; /* x86_64 code keeps its tables; armv7 has walk_arm */
}
#endif /* __aarch64__ */

static void add_stats(const struct unwind_stats *n)
{
	const uint64_t *src = (const uint64_t *)n;
	uint64_t *dst = (uint64_t *)&ustats;

	for (size_t i = 0; i < sizeof(*n) / sizeof(uint64_t); i++)
		if (src[i])
			__atomic_fetch_add(&dst[i], src[i], __ATOMIC_RELAXED);
}

#if defined(__arm__)
static bool arm_read(void *ctx, uint32_t addr, uint32_t *val)
{
	uintptr_t v;

	if (!read_word(ctx, addr, &v))
		return false;
	*val = (uint32_t)v;
	return true;
}

/*
 * The .ARM.exidx entry of key (its index in *m's table, or -1), through the thread's cache for
 * return addresses: the binary search costs a cold cache line per step, the hit one line.
 * Cached as the module (32-bit pointer) and the index + 1; or, once step_inferred found the
 * frame by reading the code, as that frame (INFERRED_TAG, see pack_inferred): -2, *frame.
 */
#define INFERRED_TAG 0x80000000u

static int32_t exidx_cached(struct walk *w, uint32_t key, bool exact, const struct module **m,
			    uint64_t *frame)
{
	struct unwind_cache *c = w->c;
	unsigned int i = cache_set(key);
	int32_t idx;

	for (unsigned int k = 0; c && k < UNWIND_CACHE_WAYS; k++) {
		if (c->e[i][k].pc == key) {
			c->hits++;
			*m = (const struct module *)(uintptr_t)(c->e[i][k].rule >> 32);
			if ((uint32_t)c->e[i][k].rule & INFERRED_TAG) {
				*frame = c->e[i][k].rule;
				return -2;
			}
			return (int32_t)(uint32_t)c->e[i][k].rule - 1;
		}
	}
	*m = walk_tables(w, key);
	idx = *m && (*m)->ehabi.n ? ehabi__find(&(*m)->ehabi, key) : -1;
	if (c && !exact) /* leaves rarely repeat their pc */
		cache_put(c, key, (uint64_t)(uintptr_t)*m << 32 | (uint32_t)(idx + 1));
	return idx;
}

/*
 * A frame found by reading code, for the cache: cfa (< 1 MiB, bits 0-19), the return
 * address's offset in words (bits 20-27: ra_off < 1 KiB), in lr (bit 30: interrupted pcs
 * only, whose keys are even where return addresses' are odd) and the saved r4-r11 (bits
 * 32-39); 0 when it does not fit (read again next time).
 */
#define INFERRED_LR 0x40000000u

static uint64_t pack_inferred(const struct armframe *f)
{
	if (f->cfa >= (1u << 20) || f->ra_off >= 1024 || (f->ra_off & 3))
		return 0;
	return (uint64_t)(f->saved_mask >> 4) << 32 | INFERRED_TAG |
	       (f->ra_in_lr ? INFERRED_LR : 0) | (f->ra_off / 4) << 20 | f->cfa;
}

static void unpack_inferred(uint64_t v, struct armframe *f)
{
	memset(f, 0, sizeof(*f));
	f->cfa = (uint32_t)v & 0xfffff;
	f->ra_off = ((uint32_t)v >> 20 & 0xff) * 4;
	f->ra_in_lr = (uint32_t)v & INFERRED_LR;
	f->saved_mask = (uint16_t)((v >> 32 & 0xff) << 4);
	f->saved_off = f->ra_off - 4 * (uint32_t)__builtin_popcount(f->saved_mask);
}

/* ra follows a call instruction in the code of a module proven loaded (armframe.h). */
static bool arm_after_call(struct walk *w, uint32_t ra)
{
	const struct module *m = ra > 4 ? walk_tables(w, (ra & ~1u) - 1) : NULL;
	struct armframe_code c;

	if (!m)
		return false;
	c = (struct armframe_code){(const uint8_t *)m->text_lo, (uint32_t)m->text_lo,
				   (uint32_t)m->text_hi};
	return armframe__after_call(&c, ra);
}

/*
 * A frame without unwind tables, by reading its code (elf/armframe.h), or as the cache holds
 * it (*cached != 0): r[] becomes the caller's. The return address found must follow a call
 * instruction, the caller's sp must be above ours (equal only where the interrupted function
 * saved nothing). Inferred, not exact.
 */
static bool inferred_ra(struct walk *w, const uint32_t r[16], const struct armframe *f,
			bool exact, uint32_t *ra)
{
	if (f->ra_in_lr)
		*ra = r[14];
	else if (!arm_read(w, r[13] + f->ra_off, ra))
		return false;
	return r[13] + f->cfa >= r[13] && (f->cfa || exact) && arm_after_call(w, *ra);
}

/* Functions whose edges a walker knows (unwind__arm_body): set at start, read by handlers. */
static struct {
	uintptr_t lo, hi;
} arm_bodies[UNWIND_ARM_BODIES];

bool unwind__arm_body(uintptr_t lo, uintptr_t hi)
{
	for (unsigned int i = 0; i < UNWIND_ARM_BODIES; i++) {
		uintptr_t expect = 0;

		if (__atomic_compare_exchange_n(&arm_bodies[i].lo, &expect, lo, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
		    expect == lo) { /* hi 0 until set: an empty range meanwhile */
			__atomic_store_n(&arm_bodies[i].hi, hi, __ATOMIC_RELEASE);
			return true;
		}
	}
	return false;
}

/* The known function whose code holds pc: its start (bit 0 as pc's), else 0. */
static uint32_t arm_body(uint32_t pc)
{
	for (unsigned int i = 0; i < UNWIND_ARM_BODIES; i++) {
		uintptr_t hi = __atomic_load_n(&arm_bodies[i].hi, __ATOMIC_ACQUIRE);
		uintptr_t lo = __atomic_load_n(&arm_bodies[i].lo, __ATOMIC_RELAXED);

		if (lo && (pc & ~1u) >= lo && (pc & ~1u) < hi)
			return (uint32_t)lo | (pc & 1);
	}
	return 0;
}

/* The frame at pc by the code: a known function's body first (its inferred_ra checked), the
 * readings of elf/armframe.h otherwise. */
static bool arm_frame(struct walk *w, const struct armframe_code *c, const uint32_t r[16],
		      bool exact, struct armframe *f, uint32_t *ra)
{
	uint32_t start = arm_body(r[15]);

	if (start && armframe__body(c, start, r[15], f) && inferred_ra(w, r, f, exact, ra))
		return true;
	if (!armframe__analyze(c, r[15], exact, CONFIG_UNWIND_ARM_SCAN_INSNS, f))
		return false;
	/* a path through a noreturn call runs into whatever follows it: the prologue's word then */
	return inferred_ra(w, r, f, exact, ra) ||
	       (f->how == ARMFRAME_FORWARD &&
		armframe__prologue(c, r[15], exact, CONFIG_UNWIND_ARM_SCAN_INSNS, f) &&
		inferred_ra(w, r, f, exact, ra));
}

static bool step_inferred(struct walk *w, uint32_t r[16], bool exact, uint32_t key,
			  uint64_t cached)
{
	const struct module *m = cached ? NULL : walk_tables(w, r[15] & ~1u);
	struct armframe_code c;
	struct armframe f;
	uint32_t sp = r[13], ra, v, off;
	uint64_t packed;

	if (cached) {
		unpack_inferred(cached, &f);
		if (!inferred_ra(w, r, &f, exact, &ra))
			return false;
	} else {
		if (!m)
			return false;
		c = (struct armframe_code){(const uint8_t *)m->text_lo, (uint32_t)m->text_lo,
					   (uint32_t)m->text_hi};
		if (!arm_frame(w, &c, r, exact, &f, &ra))
			return false;
	}
	off = f.saved_off;
	for (unsigned int k = 4; k < 12; k++) {
		if (!(f.saved_mask >> k & 1))
			continue;
		if (!arm_read(w, sp + off, &v))
			return false;
		r[k] = v;
		off += 4;
	}
	/* interrupted pcs too: a reading costs ~100 instructions, and hot loops repeat theirs */
	if (!cached && w->c && (packed = pack_inferred(&f)))
		cache_replace(w->c, key, packed);
	r[13] = sp + f.cfa;
	r[15] = ra;
	w->n.inferred++;
	return true;
}

/*
 * The armv7 walk: every frame by its .ARM.exidx entry (ARM EHABI; Thumb-2 frame pointers
 * are not walkable, notes/unwinding.md §6) where it has one; where it has none (code built
 * without -funwind-tables, or the CANTUNWIND that ld fills such code with) by reading the
 * code (step_inferred), the interrupted frame's link register last. A frame whose opcodes
 * restore no return address got it from the link register: valid for the interrupted frame
 * only. The walk ends where neither finds the caller.
 */
static unsigned int walk_arm(struct walk *w, const void *uctx, enum unwind_mode mode,
			     uint64_t *frames, unsigned int max, bool *truncated)
{
	const ucontext_t *uc = uctx;
	struct ehabi_entry e;
	unsigned int n = 0;
	bool exact = true;
	uint32_t r[16];

	memcpy(r, &uc->uc_mcontext.arm_r0, sizeof(r)); /* r0..r10, fp, ip, sp, lr, pc */
	frames[n++] = r[15];
	if (uc->uc_mcontext.arm_cpsr & 0x20)
		r[15] |= 1; /* Thumb: as return addresses say it (the code reading needs it) */
	if (mode == UNWIND_FP) { /* tables off: the pc and the link register */
		if (n < max && plausible_pc(w, r[14]))
			frames[n++] = r[14];
		return n;
	}
	for (;;) {
		uint32_t key = exact ? r[15] & ~1u : (r[15] & ~1u) - 1, sp = r[13];
		const struct module *m;
		uint64_t cached = 0;
		int32_t idx = exidx_cached(w, key, exact, &m, &cached);
		enum ehabi_result res;
		bool ra;

		e.kind = EHABI_NONE;
		if (idx >= 0)
			ehabi__entry_at(&m->ehabi, (uint32_t)idx, &e);
		if (e.kind != EHABI_OPS) {
			/* no entry, or CANTUNWIND: ld fills code without tables with it, so it
			 * means "no tables" more often than "outermost" */
			w->n.no_fde++;
			if (mode == UNWIND_CFI && step_inferred(w, r, exact, key, cached)) {
				res = EHABI_STEP_OK;
				ra = true;
			} else {
				if (exact && n < max && plausible_pc(w, r[14])) {
					frames[n++] = r[14]; /* the caller is in lr, or was */
					w->n.inferred++;
				}
				break;
			}
		} else if (exact && key == e.start) {
			r[15] = r[14]; /* first instruction: nothing pushed yet */
			ra = false;
			res = EHABI_STEP_OK;
		} else {
			res = ehabi__execute(&e, r, arm_read, w, &ra);
		}
		if (res == EHABI_STEP_STOP)
			w->n.outermost++;
		if (res != EHABI_STEP_OK || (!ra && !exact) || r[13] < sp || (r[13] == sp && !exact))
			break;
		if (n == 1)
			w->n.cfi_leaf++;
		else
			w->n.cfi_rescue++;
		exact = false;
		if (!r[15] || !plausible_pc(w, r[15]))
			break;
		if (n == max) {
			*truncated = true;
			break;
		}
		frames[n++] = r[15]; /* with the Thumb bit, as the return address was */
	}
	return n;
}
#else
bool unwind__arm_body(uintptr_t lo, uintptr_t hi)
{
	(void)lo;
	(void)hi;
	return false;
}
#endif /* __arm__ */

/*
 * Every frame by the unwind tables where its module has them; by the frame pointer where it
 * has none (or the rules cannot be followed), so frame-pointer code without tables is walked
 * as before. The walk ends at the outermost frame (its tables say so, or, walking frame
 * pointers, a zero frame pointer), at a pc outside every module, or at max frames.
 */
static unsigned int walk(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
			 enum unwind_mode mode, struct unwind_cache *cache, uint64_t *frames,
			 unsigned int max, bool *truncated)
{
	struct walk w = {.lo = stack_lo, .hi = stack_hi, .c = cache};
	unsigned int gen = modules__generation();
	struct regs r;
	unsigned int n = 0;
	bool exact = true;
	enum step s;

	*truncated = false;
	if (max == 0)
		return 0;
	if (cache && cache->gen != gen) { /* modules came or went: addresses mean other code */
		memset(cache->e, 0, sizeof(cache->e));
		memset(cache->row, 0, sizeof(cache->row));
		cache->gen = gen;
	}
	regs_from_uctx(uctx, &r);
	frames[n++] = r.pc;
#if defined(__arm__)
	n = walk_arm(&w, uctx, mode, frames, max, truncated);
	if (cache)
		cache->inferred = (unsigned int)w.n.inferred;
	add_stats(&w.n);
	return n;
#endif
	for (;;) {
		bool leaf = n == 1;

		s = mode == UNWIND_FP ? STEP_NONE : step_cfi(&w, &r, &exact);
		if (s == STEP_STOP)
			break;
		if (s == STEP_NONE && leaf && mode != UNWIND_FP && step_plt_leaf(&w, &r)) {
			exact = false;
			w.n.cfi_leaf++;
		} else if (s == STEP_NONE && mode == UNWIND_CFI && step_read_code(&w, &r, exact)) {
			exact = false;
			w.n.inferred++;
		} else if (s == STEP_NONE) {
			if (!leaf && r.fp == 0)
				break; /* the outermost frame (_start / clone) clears the frame pointer */
			if (!step_fp(&w, &r))
				break;
			exact = false;
			w.n.fp_steps++;
		} else if (leaf) {
			w.n.cfi_leaf++;
		} else {
			w.n.cfi_rescue++;
		}
		if (!r.pc || !plausible_pc(&w, r.pc))
			break;
		if (n == max) {
			*truncated = true;
			break;
		}
		frames[n++] = r.pc;
	}
	if (cache)
		cache->inferred = (unsigned int)w.n.inferred;
	add_stats(&w.n);
	return n;
}

unsigned int unwind__stack(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
			   enum unwind_mode mode, struct unwind_cache *cache, uint64_t *frames,
			   unsigned int max, bool *truncated)
{
	unsigned int n;

	modules__enter(); /* before the table is read (see modules__suspend) */
	n = walk(uctx, stack_lo, stack_hi, mode, cache, frames, max, truncated);
	modules__leave();
	return n;
}
