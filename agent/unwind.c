// SPDX-License-Identifier: MIT
/*
 * agent/unwind.c — see unwind.h. Everything reachable from unwind__stack() is
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

#include "elf/cfi.h"
#include "agent/modules.h"
#include "agent/unwind.h"

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

/* ---- module table (agent/modules.c) ----------------------------------------------------- */

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

/* Rules at pc, through the thread's cache: false when pc has none usable. */
static bool rules_cached(struct unwind_cache *c, uintptr_t pc, struct cfi_rules *cr)
{
	unsigned int i = (unsigned int)((pc >> 2) ^ (pc >> 11)) % UNWIND_CACHE_ENTRIES;
	unsigned int gen = modules__generation();
	struct cfi_table t;
	uint64_t packed;
	bool ok;

	if (c && c->gen != gen) { /* modules came or went: the addresses mean other code now */
		memset(c->pc, 0, sizeof(c->pc));
		c->gen = gen;
	}
	if (c && c->pc[i] == pc) {
		c->hits++;
		return cfi__unpack(c->rule[i], cr);
	}
	ok = modules__cfi(pc, &t) && cfi__rules_at(&t, pc, cr) &&
	     (cr->cfa_reg == CFI_REG_SP || cr->cfa_reg == CFI_REG_FP);
	if (!c)
		return ok;
	c->misses++;
	if (ok && !cfi__pack(cr, &packed))
		return ok; /* a huge frame: correct but not cached */
	c->rule[i] = ok ? packed : CFI_PACKED_NONE;
	c->pc[i] = pc;
	return ok;
}

/* One frame by unwind tables: false when pc has none or the rules cannot be followed. */
static bool step_cfi(struct regs *r, const struct stack *st, bool leaf, struct unwind_cache *c)
{
	struct cfi_rules cr;
	uintptr_t cfa, ra, fp = r->fp;

	if (!rules_cached(c, leaf ? r->pc : r->pc - 1, &cr)) {
		__atomic_fetch_add(&ustats.no_fde, 1, __ATOMIC_RELAXED);
		return false;
	}
	if (cr.cfa_reg == CFI_REG_SP)
		cfa = r->sp + (uintptr_t)cr.cfa_off;
	else if (cr.cfa_reg == CFI_REG_FP)
		cfa = r->fp + (uintptr_t)cr.cfa_off;
	else
		return false;
	if (cr.ra_saved) {
		if (!read_word(st, cfa + (uintptr_t)cr.ra_off, &ra))
			return false;
	} else if (leaf && r->lr) {
		ra = r->lr; /* a leaf that kept its return address in the link register */
	} else {
		return false;
	}
	if (cr.fp_saved && !read_word(st, cfa + (uintptr_t)cr.fp_off, &fp))
		return false;
	r->pc = ra;
	r->sp = cfa;
	r->fp = fp;
	r->lr = 0;
	return true;
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
	return pc > 4096 && modules__is_code(pc - 1);
}

static unsigned int walk(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
			 enum unwind_mode mode, struct unwind_cache *cache, uint64_t *frames,
			 unsigned int max, bool *truncated)
{
	struct stack st = {stack_lo, stack_hi};
	struct regs r;
	unsigned int n = 0;
	bool ok;

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
	ok = false;
	if (mode == UNWIND_FP_LEAF_CFI) {
		ok = step_cfi(&r, &st, true, cache);
		if (ok)
			__atomic_fetch_add(&ustats.cfi_leaf, 1, __ATOMIC_RELAXED);
	}
	if (!ok)
		ok = step_fp(&r, &st);
	while (ok && r.pc && plausible_pc(r.pc)) {
		if (n == max) {
			*truncated = true;
			break;
		}
		frames[n++] = r.pc;
		if (r.fp == 0)
			break; /* the outermost frame (_start / clone) clears the frame pointer */
		ok = step_fp(&r, &st);
		if (!ok && mode == UNWIND_FP_LEAF_CFI) {
			ok = step_cfi(&r, &st, false, cache);
			if (ok)
				__atomic_fetch_add(&ustats.cfi_rescue, 1, __ATOMIC_RELAXED);
		}
	}
	return n;
}

unsigned int unwind__stack(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
			   enum unwind_mode mode, struct unwind_cache *cache, uint64_t *frames,
			   unsigned int max, bool *truncated)
{
	unsigned int n;

	modules__enter();
	n = walk(uctx, stack_lo, stack_hi, mode, cache, frames, max, truncated);
	modules__leave();
	return n;
}
