// SPDX-License-Identifier: MIT
/*
 * agent/unwind.c — see unwind.h. Everything reachable from unwind__stack() is
 * async-signal-safe: no allocation, no locks, reads checked before they are made.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "elf/cfi.h"
#include "agent/unwind.h"

struct module {
	struct cfi_table cfi;	    /* all PT_LOAD segments bound its reads; eh_hdr may be NULL */
	uintptr_t text_lo, text_hi; /* executable segments */
};

static struct module modules[UNWIND_MAX_MODULES];
static unsigned int n_modules;	/* published with release after the table is written */
static unsigned int in_flight;	/* walks running now: the table is rewritten only at 0 */
static unsigned int generation; /* bumped per table: per-thread caches of older ones are void */
static struct unwind_stats ustats;

struct regs {
	uintptr_t pc, sp, fp, lr;
};

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
	r->lr = uc->uc_mcontext.regs[30];
#elif defined(__arm__)
	r->pc = uc->uc_mcontext.arm_pc;
	r->sp = uc->uc_mcontext.arm_sp;
	r->fp = uc->uc_mcontext.arm_fp;
	r->lr = uc->uc_mcontext.arm_lr;
#else
	memset(r, 0, sizeof(*r));
#endif
}

/* ---- module table (not signal-safe) ------------------------------------------------------- */

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
	unsigned int *n = data;
	struct module m = {.cfi.lo = UINTPTR_MAX, .text_lo = UINTPTR_MAX};

	if (*n >= UNWIND_MAX_MODULES)
		return 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;

		if (ph->p_type == PT_LOAD) {
			m.cfi.lo = a < m.cfi.lo ? a : m.cfi.lo;
			m.cfi.hi = b > m.cfi.hi ? b : m.cfi.hi;
			if (ph->p_flags & PF_X) {
				m.text_lo = a < m.text_lo ? a : m.text_lo;
				m.text_hi = b > m.text_hi ? b : m.text_hi;
			}
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			m.cfi.eh_hdr = (const uint8_t *)a;
		}
	}
	if (m.text_lo == UINTPTR_MAX)
		return 0;
	modules[(*n)++] = m;
	return 0;
}

/*
 * Empties the table and waits for the walks that may still read it (they take microseconds,
 * on other threads: this thread's own handler cannot be in the middle of one while it runs
 * here). A walk that starts afterwards sees no modules and follows frame pointers only.
 */
void unwind__suspend(void)
{
	__atomic_store_n(&n_modules, 0, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&in_flight, __ATOMIC_SEQ_CST))
		sched_yield();
}

int unwind__init(void)
{
	unsigned int n = 0;

	unwind__suspend();
	dl_iterate_phdr(add_module, &n);
	__atomic_fetch_add(&generation, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&n_modules, n, __ATOMIC_SEQ_CST);
	return (int)n;
}

void unwind__stats(struct unwind_stats *st)
{
	*st = ustats;
}

static const struct module *module_of(uintptr_t pc)
{
	unsigned int n = __atomic_load_n(&n_modules, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++)
		if (pc >= modules[i].text_lo && pc < modules[i].text_hi)
			return &modules[i];
	return NULL;
}

/* ---- checked reads ------------------------------------------------------------------------- */

struct stack {
	uintptr_t lo, hi;
};

static bool read_word(const struct stack *st, uintptr_t addr, uintptr_t *val)
{
	if (addr & (sizeof(uintptr_t) - 1))
		return false;
	if (st->hi) {
		if (addr < st->lo || addr > st->hi - sizeof(uintptr_t))
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

static bool is_sigreturn(uintptr_t pc)
{
	const struct module *m = module_of(pc);

#if defined(__x86_64__)
	static const uint8_t code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
#elif defined(__aarch64__)
	static const uint8_t code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
#else
	static const uint8_t code[] = {0};

	return false;
#endif
	return m && pc + sizeof(code) <= m->text_hi && !memcmp((const void *)pc, code, sizeof(code));
}

/*
 * Rules at pc (the frame's pc, minus 1 for a return address when !exact), through the
 * thread's cache: false when pc has none usable. *signal: the frame is a signal trampoline.
 */
static bool rules_cached(struct unwind_cache *c, uintptr_t pc, bool exact, struct cfi_rules *cr,
			 bool *signal)
{
	uintptr_t key = exact ? pc : pc - 1;
	unsigned int i = (unsigned int)((key >> 2) ^ (key >> 11)) % UNWIND_CACHE_ENTRIES;
	unsigned int gen = __atomic_load_n(&generation, __ATOMIC_RELAXED);
	const struct module *m;
	uint64_t packed;
	bool ok;

	if (c && c->gen != gen) { /* modules came or went: the addresses mean other code now */
		memset(c->pc, 0, sizeof(c->pc));
		c->gen = gen;
	}
	if (c && c->pc[i] == key) {
		c->hits++;
		*signal = c->rule[i] & RULE_SIGNAL;
		return *signal || cfi__unpack(c->rule[i], cr);
	}
	*signal = is_sigreturn(pc);
	m = *signal ? NULL : module_of(key);
	ok = m && cfi__rules_at(&m->cfi, key, cr) &&
	     (cr->cfa_reg == CFI_REG_SP || cr->cfa_reg == CFI_REG_FP || cr->cfa_reg == CFI_CFA_PLT);
	if (!c)
		return ok || *signal;
	c->misses++;
	if (*signal) {
		packed = RULE_SIGNAL;
	} else if (!ok) {
		packed = CFI_PACKED_NONE;
	} else if (!cfi__pack(cr, &packed)) {
		return ok; /* a huge frame: correct but not cached */
	}
	c->rule[i] = packed;
	c->pc[i] = key;
	return ok || *signal;
}

enum step { STEP_OK, STEP_STOP, STEP_NONE };

/* The registers the kernel saved at a signal trampoline's sp; the next pc is exact. */
static enum step step_signal(struct regs *r, const struct stack *st)
{
	uintptr_t pc, sp, fp, lr = 0;

#if defined(__x86_64__)
	uintptr_t g = r->sp + 40; /* uc_mcontext.gregs */

	if (!read_word(st, g + 8 * REG_RIP, &pc) || !read_word(st, g + 8 * REG_RSP, &sp) ||
	    !read_word(st, g + 8 * REG_RBP, &fp))
		return STEP_NONE;
#elif defined(__aarch64__)
	uintptr_t g = r->sp + 312; /* uc_mcontext.regs */

	if (!read_word(st, g + 8 * 32, &pc) || !read_word(st, g + 8 * 31, &sp) ||
	    !read_word(st, g + 8 * 29, &fp) || !read_word(st, g + 8 * 30, &lr))
		return STEP_NONE;
#else
	return STEP_NONE;
#endif
	if (sp <= r->sp)
		return STEP_NONE;
	r->pc = pc;
	r->sp = sp;
	r->fp = fp;
	r->lr = lr;
	__atomic_fetch_add(&ustats.signal_frames, 1, __ATOMIC_RELAXED);
	return STEP_OK;
}

/*
 * One frame by unwind tables. exact: r->pc is where the thread was (the leaf, or the frame a
 * signal interrupted), so it is looked up as is and a return address still in the link
 * register is valid; otherwise r->pc is a return address, looked up at pc - 1 (the call).
 * STEP_STOP: the tables say this is the outermost frame. STEP_NONE: no usable rules here.
 */
static enum step step_cfi(struct regs *r, const struct stack *st, bool *exact,
			  struct unwind_cache *c)
{
	struct cfi_rules cr;
	uintptr_t cfa, ra, fp = r->fp;
	bool signal, from_lr = false;

	if (!rules_cached(c, r->pc, *exact, &cr, &signal)) {
		__atomic_fetch_add(&ustats.no_fde, 1, __ATOMIC_RELAXED);
		return STEP_NONE;
	}
	if (signal) {
		*exact = true;
		return step_signal(r, st);
	}
	if (cr.ra_undefined) {
		__atomic_fetch_add(&ustats.outermost, 1, __ATOMIC_RELAXED);
		return STEP_STOP;
	}
	if (cr.cfa_reg == CFI_REG_FP)
		cfa = r->fp + (uintptr_t)cr.cfa_off;
	else if (cr.cfa_reg == CFI_CFA_PLT)
		cfa = r->sp + (uintptr_t)cr.cfa_off + ((r->pc & 15) >= cr.plt_min ? 8 : 0);
	else
		cfa = r->sp + (uintptr_t)cr.cfa_off;
	if (cr.ra_saved) {
		if (!read_word(st, cfa + (uintptr_t)cr.ra_off, &ra))
			return STEP_NONE;
	} else if (*exact && r->lr) {
		ra = r->lr; /* a leaf that kept its return address in the link register */
		from_lr = true;
	} else {
		return STEP_NONE;
	}
	/* stacks grow down: a caller's CFA is above ours (equal only for a frameless leaf) */
	if (cfa < r->sp || (cfa == r->sp && !from_lr))
		return STEP_NONE;
	if (cr.fp_saved && !read_word(st, cfa + (uintptr_t)cr.fp_off, &fp))
		return STEP_NONE;
	r->pc = ra;
	r->sp = cfa;
	r->fp = fp;
	r->lr = 0;
	*exact = false;
	return STEP_OK;
}

/* One frame by the frame pointer chain: [fp] = caller's fp, [fp + word] = return address. */
static bool step_fp(struct regs *r, const struct stack *st)
{
	uintptr_t nfp, ra;

	if (r->fp < r->sp || !read_word(st, r->fp, &nfp) ||
	    !read_word(st, r->fp + sizeof(uintptr_t), &ra))
		return false;
	if (nfp && nfp <= r->fp)
		return false; /* stacks grow down: a caller's frame is above ours */
	r->sp = r->fp + 2 * sizeof(uintptr_t);
	r->fp = nfp;
	r->pc = ra;
	r->lr = 0;
	return true;
}

static bool plausible_pc(uintptr_t pc)
{
	unsigned int n = __atomic_load_n(&n_modules, __ATOMIC_ACQUIRE);

	return pc > 4096 && (n == 0 || module_of(pc - 1));
}

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
	struct stack st = {stack_lo, stack_hi};
	struct regs r;
	unsigned int n = 0;
	bool exact = true, by_fp;
	enum step s;

	*truncated = false;
	if (max == 0)
		return 0;
	regs_from_uctx(uctx, &r);
	frames[n++] = r.pc;
#if defined(__arm__)
	if (n < max && plausible_pc(r.lr))
		frames[n++] = r.lr;
	return n;
#endif
	for (;;) {
		bool leaf = n == 1;

		s = mode == UNWIND_FP ? STEP_NONE : step_cfi(&r, &st, &exact, cache);
		by_fp = s == STEP_NONE;
		if (s == STEP_STOP)
			break;
		if (by_fp) {
			if (!leaf && r.fp == 0)
				break; /* the outermost frame (_start / clone) clears the frame pointer */
			if (!step_fp(&r, &st))
				break;
			exact = false;
			__atomic_fetch_add(&ustats.fp_steps, 1, __ATOMIC_RELAXED);
		} else if (leaf) {
			__atomic_fetch_add(&ustats.cfi_leaf, 1, __ATOMIC_RELAXED);
		} else {
			__atomic_fetch_add(&ustats.cfi_rescue, 1, __ATOMIC_RELAXED);
		}
		if (!r.pc || !plausible_pc(r.pc))
			break;
		if (n == max) {
			*truncated = true;
			break;
		}
		frames[n++] = r.pc;
	}
	return n;
}

unsigned int unwind__stack(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
			   enum unwind_mode mode, struct unwind_cache *cache, uint64_t *frames,
			   unsigned int max, bool *truncated)
{
	unsigned int n;

	/* counted before the table is read (see unwind__suspend) */
	__atomic_fetch_add(&in_flight, 1, __ATOMIC_SEQ_CST);
	n = walk(uctx, stack_lo, stack_hi, mode, cache, frames, max, truncated);
	__atomic_fetch_sub(&in_flight, 1, __ATOMIC_SEQ_CST);
	return n;
}
