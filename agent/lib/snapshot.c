// SPDX-License-Identifier: MIT
/* agent/lib/snapshot.c — registers and stack copies for the collector to unwind; see snapshot.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/lib/env.h"
#include "agent/lib/snapshot.h"
#include "pprof/snapshot.h"

#if CONFIG_SNAPSHOT_BYTES > SNAPSHOT_MAX_STACK
#error "CONFIG_SNAPSHOT_BYTES beyond what the collector accepts (pprof/snapshot.h)"
#endif

static unsigned int every = CONFIG_SNAPSHOT_EVERY;
static size_t stack_bytes = CONFIG_SNAPSHOT_BYTES;
static struct snapshot_stats stats;

void snapshot__init(void)
{
	every = (unsigned int)env__ulong("EDGEPROF_SNAPSHOT_EVERY", CONFIG_SNAPSHOT_EVERY, 0,
					 1000000);
	stack_bytes = env__ulong("EDGEPROF_SNAPSHOT_BYTES", CONFIG_SNAPSHOT_BYTES, 256,
				 SNAPSHOT_MAX_STACK);
}

bool snapshot__due(unsigned int *countdown)
{
	if (!every)
		return false;
	if (*countdown > 1) {
		(*countdown)--;
		return false;
	}
	*countdown = every;
	return true;
}

size_t snapshot__max_bytes(void)
{
	return every ? SNAPSHOT_ARM_HDR + stack_bytes : 0;
}

/* Copies [sp, sp + len) into out: how many bytes could be read (the kernel checks them). */
static size_t copy_unbounded(uintptr_t sp, size_t len, uint8_t *out)
{
	/* process_vm_readv stops at the first page it cannot read: the stack's top end */
	struct iovec local = {out, len}, remote = {(void *)sp, len};
	long n = syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);

	return n > 0 ? (size_t)n : 0;
}

size_t snapshot__take(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi, uint8_t *out)
{
	const ucontext_t *uc = uctx;
	uint32_t regs[SNAPSHOT_ARM_REGS];
	size_t len = stack_bytes, got;
	uintptr_t sp;

	memcpy(regs, &uc->uc_mcontext.arm_r0, sizeof(regs)); /* r0..r10, fp, ip, sp, lr, pc */
	if (uc->uc_mcontext.arm_cpsr & 0x20)
		regs[15] |= 1; /* Thumb state, as a return address would say */
	snapshot__arm_header(regs, out);
	sp = regs[13];
	if (stack_hi && sp >= stack_lo && sp < stack_hi) {
		got = stack_hi - sp < len ? stack_hi - sp : len;
		memcpy(out + SNAPSHOT_ARM_HDR, (const void *)sp, got);
	} else {
		got = copy_unbounded(sp, len, out + SNAPSHOT_ARM_HDR);
	}
	__atomic_fetch_add(&stats.taken, 1, __ATOMIC_RELAXED);
	if (got < len)
		__atomic_fetch_add(&stats.short_stack, 1, __ATOMIC_RELAXED);
	return SNAPSHOT_ARM_HDR + got;
}

void snapshot__count_no_room(void)
{
	__atomic_fetch_add(&stats.no_room, 1, __ATOMIC_RELAXED);
}

void snapshot__stats(struct snapshot_stats *st)
{
	st->taken = __atomic_load_n(&stats.taken, __ATOMIC_RELAXED);
	st->no_room = __atomic_load_n(&stats.no_room, __ATOMIC_RELAXED);
	st->short_stack = __atomic_load_n(&stats.short_stack, __ATOMIC_RELAXED);
}
