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

static inline void put32(unsigned char *b, unsigned int off, int32_t v)
{
	memcpy(b + off, &v, sizeof(v));
}

static inline void put_ptr(unsigned char *b, unsigned int off, const void *p)
{
	memcpy(b + off, &p, sizeof(p));
}

/* qemu-user (the ARM boards' unit tests) has no process_vm_readv: nothing to test there. */
static inline void need_process_vm_readv(void)
{
	int here = 1, there = 0;
	struct iovec local = {&there, sizeof(there)}, remote = {&here, sizeof(here)};

	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != sizeof(here) && errno == ENOSYS)
		skip();
	assert_int_equal(there, 1);
}

#endif /* EDGEPROF_TESTS_LUA_FAKE_H */
