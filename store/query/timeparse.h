/* SPDX-License-Identifier: MIT */
/*
 * store/query/timeparse.h — the time forms the query API accepts (from=, to=, --from, --to):
 *   2006-01-02T15:04:05         profefe's form, UTC (also with a trailing 'Z', fractional
 *                               seconds ".123", or a "+02:00" offset; "2006-01-02" = midnight)
 *   1700000000                  unix seconds; by digit count as Pyroscope does: 13 digits = ms,
 *                               16 = µs, 19 = ns
 *   now, now-1h, now-15m, now-30s, now-7d, now-500ms, now+1h (units ms s m h d w)
 */
#ifndef EDGEPROF_STORE_TIMEPARSE_H
#define EDGEPROF_STORE_TIMEPARSE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses s into unix nanoseconds; now_ns is "now" (port_clock_real_ns() in production).
 * Returns 0 or -EINVAL with a message in err, e.g. "time: unknown unit 'x' in 'now-3x'".
 */
int timeparse(const char *s, int64_t now_ns, int64_t *out_ns, char *err, size_t errlen);

#endif /* EDGEPROF_STORE_TIMEPARSE_H */
