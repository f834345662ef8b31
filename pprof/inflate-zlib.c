// SPDX-License-Identifier: MIT
/*
 * pprof/inflate-zlib.c — boards without libdeflate (CONFIG_PPROF_LIBDEFLATE=n): there is no
 * fast path, the reader always runs zlib's streaming inflate.
 */
#include <errno.h>

#include "pprof/internal.h"

int pp_inflate_fast(const uint8_t *in, size_t len, size_t max, struct pp_scratch *s,
		    size_t *out_len)
{
	(void)in, (void)len, (void)max, (void)s, (void)out_len;
	return -EAGAIN;
}

void pp_inflater_free(void *inflater)
{
	(void)inflater;
}
