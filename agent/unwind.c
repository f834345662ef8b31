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

#include "agent/unwind.h"

struct module {
	uintptr_t lo, hi;	    /* all PT_LOAD segments: bounds of unwind-table reads */
	uintptr_t text_lo, text_hi; /* executable segments */
	const uint8_t *eh_hdr;	    /* PT_GNU_EH_FRAME, or NULL */
};

static struct module modules[UNWIND_MAX_MODULES];
static unsigned int n_modules;	/* published with release after the table is written */
static unsigned int in_flight;	/* walks running now: the table is rewritten only at 0 */
static unsigned int generation; /* bumped per table: per-thread caches of older ones are void */
static struct unwind_stats ustats;

struct regs {
	uintptr_t pc, sp, fp, lr;
};

#if defined(__x86_64__)
#define DW_FP 6
#define DW_SP 7
#define DW_RA 16
#elif defined(__aarch64__)
#define DW_FP 29
#define DW_SP 31
#define DW_RA 30
#else
#define DW_FP 11
#define DW_SP 13
#define DW_RA 14
#endif

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
	struct module m = {.lo = UINTPTR_MAX, .text_lo = UINTPTR_MAX};

	if (*n >= UNWIND_MAX_MODULES)
		return 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;

		if (ph->p_type == PT_LOAD) {
			m.lo = a < m.lo ? a : m.lo;
			m.hi = b > m.hi ? b : m.hi;
			if (ph->p_flags & PF_X) {
				m.text_lo = a < m.text_lo ? a : m.text_lo;
				m.text_hi = b > m.text_hi ? b : m.text_hi;
			}
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			m.eh_hdr = (const uint8_t *)a;
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

/* ---- .eh_frame CFA rules ------------------------------------------------------------------ */

struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint8_t cur_u8(struct cursor *c)
{
	if (c->p >= c->end) {
		c->bad = true;
		return 0;
	}
	return *c->p++;
}

static uint64_t cur_uleb(struct cursor *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		b = cur_u8(c);
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while ((b & 0x80) && !c->bad);
	return v;
}

static int64_t cur_sleb(struct cursor *c)
{
	int64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		b = cur_u8(c);
		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
	} while ((b & 0x80) && !c->bad);
	if (shift < 64 && (b & 0x40))
		v |= -(int64_t)((uint64_t)1 << shift);
	return v;
}

static uint64_t cur_fixed(struct cursor *c, unsigned int n)
{
	uint64_t v = 0;

	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, n); /* little-endian targets only */
	c->p += n;
	return v;
}

/* A DW_EH_PE-encoded pointer; datarel is the base for DW_EH_PE_datarel. */
static uintptr_t cur_encoded(struct cursor *c, uint8_t enc, uintptr_t datarel)
{
	uintptr_t at = (uintptr_t)c->p, v;

	if (enc == 0xff)
		return 0;
	switch (enc & 0x0f) {
	case 0x00:
		v = (uintptr_t)cur_fixed(c, sizeof(uintptr_t));
		break;
	case 0x01:
		v = (uintptr_t)cur_uleb(c);
		break;
	case 0x02:
		v = (uintptr_t)cur_fixed(c, 2);
		break;
	case 0x03:
		v = (uintptr_t)cur_fixed(c, 4);
		break;
	case 0x04:
		v = (uintptr_t)cur_fixed(c, 8);
		break;
	case 0x09:
		v = (uintptr_t)cur_sleb(c);
		break;
	case 0x0a:
		v = (uintptr_t)(int16_t)cur_fixed(c, 2);
		break;
	case 0x0b:
		v = (uintptr_t)(int32_t)cur_fixed(c, 4);
		break;
	case 0x0c:
		v = (uintptr_t)cur_fixed(c, 8);
		break;
	default:
		c->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:
		v += at;
		break;
	case 0x30:
		v += datarel;
		break;
	default:
		c->bad = true;
		return 0;
	}
	if (enc & 0x80)
		c->bad = true; /* indirect: never used for pc ranges */
	return v;
}

/* The rules we track: CFA = reg + off; FP and RA saved at CFA + off (or still in a register). */
struct cfa_rules {
	unsigned int cfa_reg;
	int64_t cfa_off;
	bool fp_saved, ra_saved;
	int64_t fp_off, ra_off;
};

struct cie_info {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	const uint8_t *insns, *insns_end;
};

static bool parse_cie(const uint8_t *cie, const struct module *m, struct cie_info *ci)
{
	struct cursor c = {cie, (const uint8_t *)m->hi, false};
	uint32_t len = (uint32_t)cur_fixed(&c, 4);
	const char *aug;

	if (len == 0 || len == 0xffffffffu || len > (size_t)(c.end - c.p))
		return false;
	c.end = c.p + len;
	if (cur_fixed(&c, 4) != 0)
		return false;
	uint8_t version = cur_u8(&c);

	aug = (const char *)c.p;
	while (cur_u8(&c) && !c.bad)
		;
	ci->code_align = cur_uleb(&c);
	ci->data_align = cur_sleb(&c);
	if (version == 1)
		cur_u8(&c);
	else
		cur_uleb(&c);
	ci->fde_enc = 0;
	if (aug[0] == 'z') {
		uint64_t alen = cur_uleb(&c);
		const uint8_t *aend = c.p + alen;

		for (const char *a = aug + 1; *a && !c.bad; a++) {
			if (*a == 'R') {
				ci->fde_enc = cur_u8(&c);
			} else if (*a == 'P') {
				uint8_t e = cur_u8(&c);

				cur_encoded(&c, e & 0x7f, 0);
			} else if (*a == 'L') {
				cur_u8(&c);
			} else if (*a != 'S' && *a != 'B') {
				break;
			}
		}
		c.p = aend;
	} else if (aug[0]) {
		return false;
	}
	ci->insns = c.p;
	ci->insns_end = c.end;
	return !c.bad && c.p <= c.end;
}

/* Runs CFA instructions until the location passes pc. Returns false on anything unsupported. */
static bool run_cfa(const uint8_t *p, const uint8_t *end, const struct cie_info *ci, uintptr_t loc,
		    uintptr_t pc, struct cfa_rules *r, const struct cfa_rules *init)
{
	struct cfa_rules stack[4];
	unsigned int depth = 0;
	struct cursor c = {p, end, false};

	while (c.p < c.end && !c.bad) {
		uint8_t op = cur_u8(&c), lo = op & 0x3f;
		uint64_t reg;
		int64_t off;

		switch (op >> 6) {
		case 1: /* advance_loc */
			loc += lo * ci->code_align;
			if (loc > pc)
				return true;
			continue;
		case 2: /* offset */
			off = (int64_t)cur_uleb(&c) * ci->data_align;
			if (lo == DW_FP) {
				r->fp_saved = true;
				r->fp_off = off;
			}
			if (lo == DW_RA) {
				r->ra_saved = true;
				r->ra_off = off;
			}
			continue;
		case 3: /* restore */
			if (init && lo == DW_FP) {
				r->fp_saved = init->fp_saved;
				r->fp_off = init->fp_off;
			}
			if (init && lo == DW_RA) {
				r->ra_saved = init->ra_saved;
				r->ra_off = init->ra_off;
			}
			continue;
		}
		switch (op) {
		case 0x00:
			break;
		case 0x02:
			loc += cur_fixed(&c, 1) * ci->code_align;
			if (loc > pc)
				return true;
			break;
		case 0x03:
			loc += cur_fixed(&c, 2) * ci->code_align;
			if (loc > pc)
				return true;
			break;
		case 0x04:
			loc += cur_fixed(&c, 4) * ci->code_align;
			if (loc > pc)
				return true;
			break;
		case 0x05: /* offset_extended */
		case 0x11: /* offset_extended_sf */
			reg = cur_uleb(&c);
			off = op == 0x05 ? (int64_t)cur_uleb(&c) * ci->data_align
					 : cur_sleb(&c) * ci->data_align;
			if (reg == DW_FP) {
				r->fp_saved = true;
				r->fp_off = off;
			}
			if (reg == DW_RA) {
				r->ra_saved = true;
				r->ra_off = off;
			}
			break;
		case 0x06:
		case 0x07:
		case 0x08: /* restore_extended, undefined, same_value */
			reg = cur_uleb(&c);
			if (reg == DW_FP)
				r->fp_saved = op == 0x06 && init && init->fp_saved;
			if (reg == DW_RA)
				r->ra_saved = op == 0x06 && init && init->ra_saved;
			break;
		case 0x09: /* register: a saved value in another register, untracked */
			reg = cur_uleb(&c);
			cur_uleb(&c);
			if (reg == DW_FP || reg == DW_RA)
				return false;
			break;
		case 0x0a:
			if (depth == 4)
				return false;
			stack[depth++] = *r;
			break;
		case 0x0b:
			if (depth == 0)
				return false;
			*r = stack[--depth];
			break;
		case 0x0c:
			r->cfa_reg = (unsigned int)cur_uleb(&c);
			r->cfa_off = (int64_t)cur_uleb(&c);
			break;
		case 0x0d:
			r->cfa_reg = (unsigned int)cur_uleb(&c);
			break;
		case 0x0e:
			r->cfa_off = (int64_t)cur_uleb(&c);
			break;
		case 0x12:
			r->cfa_reg = (unsigned int)cur_uleb(&c);
			r->cfa_off = cur_sleb(&c) * ci->data_align;
			break;
		case 0x13:
			r->cfa_off = cur_sleb(&c) * ci->data_align;
			break;
		case 0x10:
		case 0x16: /* expression, val_expression */
			reg = cur_uleb(&c);
			c.p += cur_uleb(&c);
			if (reg == DW_FP || reg == DW_RA)
				return false;
			break;
		case 0x14:
		case 0x15: /* val_offset(_sf) */
			reg = cur_uleb(&c);
			if (op == 0x14)
				cur_uleb(&c);
			else
				cur_sleb(&c);
			if (reg == DW_FP || reg == DW_RA)
				return false;
			break;
		case 0x2e:
			cur_uleb(&c);
			break; /* GNU_args_size */
		default:
			return false; /* def_cfa_expression and the rest: give up */
		}
	}
	return !c.bad;
}

/* Finds pc's FDE through .eh_frame_hdr's sorted table and computes the rules at pc. */
static bool cfa_rules_at(const struct module *m, uintptr_t pc, struct cfa_rules *r)
{
	const uint8_t *hdr = m->eh_hdr;
	struct cursor c;
	struct cie_info ci;

	if (!hdr || hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b)
		return false;
	c = (struct cursor){hdr + 4, (const uint8_t *)m->hi, false};
	cur_encoded(&c, hdr[1], (uintptr_t)hdr);
	uint32_t count = (uint32_t)cur_fixed(&c, 4);
	const int32_t *table = (const int32_t *)c.p;

	if (c.bad || count == 0 || (uintptr_t)(table + 2 * (size_t)count) > m->hi)
		return false;
	uint32_t lo = 0, hi = count;

	while (hi - lo > 1) { /* last entry whose initial location <= pc */
		uint32_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)hdr + (intptr_t)table[2 * mid] <= pc)
			lo = mid;
		else
			hi = mid;
	}
	const uint8_t *fde = hdr + table[2 * lo + 1];

	if ((uintptr_t)fde < m->lo || (uintptr_t)fde + 16 > m->hi)
		return false;
	c = (struct cursor){fde, (const uint8_t *)m->hi, false};
	uint32_t len = (uint32_t)cur_fixed(&c, 4);

	if (len == 0 || len == 0xffffffffu || len > (size_t)(c.end - c.p))
		return false;
	c.end = c.p + len;
	const uint8_t *cie = c.p - (uint32_t)cur_fixed(&c, 4);

	if ((uintptr_t)cie < m->lo || (uintptr_t)cie >= m->hi || !parse_cie(cie, m, &ci))
		return false;
	uintptr_t begin = cur_encoded(&c, ci.fde_enc, 0);
	uintptr_t range = cur_encoded(&c, ci.fde_enc & 0x0f, 0);

	if (c.bad || pc < begin || pc >= begin + range)
		return false;
	c.p += cur_uleb(&c); /* 'z' augmentation data (the CIEs here all have it) */
	if (c.bad || c.p > c.end)
		return false;

	struct cfa_rules init = {.cfa_reg = DW_SP};

	if (!run_cfa(ci.insns, ci.insns_end, &ci, begin, UINTPTR_MAX, &init, NULL))
		return false;
	*r = init;
	return run_cfa(c.p, c.end, &ci, begin, pc, r, &init);
}

#define RULE_OK 0x1ull
#define RULE_CFA_FP 0x2ull
#define RULE_FP 0x4ull
#define RULE_RA 0x8ull

static bool fits16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

/* Rules at pc, through the thread's cache: false when pc has none usable. */
static bool rules_cached(struct unwind_cache *c, uintptr_t pc, struct cfa_rules *cr)
{
	unsigned int i = (unsigned int)((pc >> 2) ^ (pc >> 11)) % UNWIND_CACHE_ENTRIES;
	unsigned int gen = __atomic_load_n(&generation, __ATOMIC_RELAXED);
	const struct module *m;
	uint64_t rule;
	bool ok;

	if (c && c->gen != gen) { /* modules came or went: the addresses mean other code now */
		memset(c->pc, 0, sizeof(c->pc));
		c->gen = gen;
	}
	if (c && c->pc[i] == pc) {
		rule = c->rule[i];
		c->hits++;
		if (!(rule & RULE_OK))
			return false;
		*cr = (struct cfa_rules){
		    .cfa_reg = rule & RULE_CFA_FP ? DW_FP : DW_SP,
		    .cfa_off = (int16_t)(rule >> 16),
		    .fp_saved = rule & RULE_FP,
		    .fp_off = (int16_t)(rule >> 32),
		    .ra_saved = rule & RULE_RA,
		    .ra_off = (int16_t)(rule >> 48),
		};
		return true;
	}
	m = module_of(pc);
	ok = m && cfa_rules_at(m, pc, cr) && (cr->cfa_reg == DW_SP || cr->cfa_reg == DW_FP);
	if (!c)
		return ok;
	c->misses++;
	if (ok && !(fits16(cr->cfa_off) && fits16(cr->fp_off) && fits16(cr->ra_off)))
		return ok; /* a huge frame: correct but not cached */
	rule = ok ? RULE_OK | (cr->cfa_reg == DW_FP ? RULE_CFA_FP : 0) |
			(cr->fp_saved ? RULE_FP : 0) | (cr->ra_saved ? RULE_RA : 0) |
			(uint64_t)(uint16_t)cr->cfa_off << 16 |
			(uint64_t)(uint16_t)cr->fp_off << 32 | (uint64_t)(uint16_t)cr->ra_off << 48
		  : 0;
	c->rule[i] = rule;
	c->pc[i] = pc;
	return ok;
}

/* One frame by unwind tables: false when pc has none or the rules cannot be followed. */
static bool step_cfi(struct regs *r, const struct stack *st, bool leaf, struct unwind_cache *c)
{
	struct cfa_rules cr;
	uintptr_t cfa, ra, fp = r->fp;

	if (!rules_cached(c, leaf ? r->pc : r->pc - 1, &cr)) {
		__atomic_fetch_add(&ustats.no_fde, 1, __ATOMIC_RELAXED);
		return false;
	}
	if (cr.cfa_reg == DW_SP)
		cfa = r->sp + (uintptr_t)cr.cfa_off;
	else if (cr.cfa_reg == DW_FP)
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
	unsigned int n = __atomic_load_n(&n_modules, __ATOMIC_ACQUIRE);

	return pc > 4096 && (n == 0 || module_of(pc - 1));
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

	/* counted before the table is read (see unwind__suspend) */
	__atomic_fetch_add(&in_flight, 1, __ATOMIC_SEQ_CST);
	n = walk(uctx, stack_lo, stack_hi, mode, cache, frames, max, truncated);
	__atomic_fetch_sub(&in_flight, 1, __ATOMIC_SEQ_CST);
	return n;
}
