/* SPDX-License-Identifier: MIT */
/*
 * tests/lib/lua-fake.h — for the unit tests of the Lua frame namers (agent/core/luaname.c,
 * lua51name.c): fields of fake Lua objects laid out in this process's memory, and the skip
 * where they cannot be read back as the profile writer reads a profiled process.
 */
#ifndef EDGEPROF_TESTS_LUA_FAKE_H
#define EDGEPROF_TESTS_LUA_FAKE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/core/framename.h"

static inline void put32(unsigned char *b, unsigned int off, int32_t v)
{
	memcpy(b + off, &v, sizeof(v));
}

static inline void put_ptr(unsigned char *b, unsigned int off, const void *p)
{
	memcpy(b + off, &p, sizeof(p));
}

/* The namers read this process's memory through framename__peek: process_vm_readv, or under
 * qemu-user (the ARM boards' unit tests), which has none, its fallbacks (/proc/self/mem on
 * qemu-aarch64, a pipe on qemu-arm). Nothing to test where none of them reads. */
static inline void need_self_read(void)
{
	int here = 1, there = 0;

	if (framename__peek((uint32_t)getpid(), (uintptr_t)&here, &there, sizeof(there)))
		skip();
	assert_int_equal(there, 1);
}

#endif /* EDGEPROF_TESTS_LUA_FAKE_H */
