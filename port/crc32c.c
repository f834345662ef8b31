// SPDX-License-Identifier: MIT
/*
 * port/crc32c.c — CRC-32C. The ring file checks every record on write, on open and on read,
 * so this is on the hot path of the collector: the SSE4.2 / ARMv8 CRC instructions do about
 * 8 bytes per cycle; slicing-by-8 (tables built once, 8 KiB) is the portable fallback.
 */
#include <pthread.h>
#include <string.h>

#include "port/crc32c.h"

#define CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c__init_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
		crc32c_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8) ^
					     crc32c_table[0][crc32c_table[t - 1][i] & 0xff];
}

static uint32_t crc32c__sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		lo = __builtin_bswap32(lo);
		hi = __builtin_bswap32(hi);
#endif
		lo ^= crc;
		crc = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		      crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		      crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		      crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c__hw(uint32_t crc, const unsigned char *p,
							      size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}

static int crc32c__have_hw(void)
{
	return __builtin_cpu_supports("sse4.2");
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

__attribute__((target("+crc"))) static uint32_t crc32c__hw(uint32_t crc, const unsigned char *p,
							    size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = __builtin_aarch64_crc32cb(crc, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		crc = __builtin_aarch64_crc32cx(crc, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = __builtin_aarch64_crc32cb(crc, *p++);
	return crc;
}

static int crc32c__have_hw(void)
{
	return !!(getauxval(AT_HWCAP) & HWCAP_CRC32);
}
#else
static uint32_t crc32c__hw(uint32_t crc, const unsigned char *p, size_t len)
{
	return crc32c__sw(crc, p, len);
}

static int crc32c__have_hw(void)
{
	return 0;
}
#endif

static int crc32c_hw = -1;

static void crc32c__init(void)
{
	crc32c__init_tables();
	crc32c_hw = crc32c__have_hw();
}

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc32c_once, crc32c__init);
	crc = ~crc;
	if (crc32c_hw)
		crc = crc32c__hw(crc, data, len);
	else
		crc = crc32c__sw(crc, data, len);
	return ~crc;
}
