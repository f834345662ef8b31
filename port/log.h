/* SPDX-License-Identifier: MIT */
/*
 * port/log.h — one-line log messages to stderr or syslog.
 * Levels below CONFIG_LOG_LEVEL compile out entirely (no code, no strings in flash);
 * port_log_set_level() lowers verbosity further at run time.
 */
#ifndef EDGEPROF_PORT_LOG_H
#define EDGEPROF_PORT_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum port_log_level { PORT_LOG_ERR = 0, PORT_LOG_WARN = 1, PORT_LOG_INFO = 2, PORT_LOG_DEBUG = 3 };

void port_log_open(const char *ident, bool use_syslog);
void port_log_set_level(int level);
void port_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * At most burst lines a second for events a client can cause at will (refused connections, bad
 * handshakes): true when this one may be logged, with *missed set to how many were not since
 * the last line. Zero-initialised.
 */
struct port_ratelimit {
	atomic_uint_fast64_t window_end;
	atomic_uint n, missed;
};
bool port_ratelimit(struct port_ratelimit *rl, unsigned burst, uint64_t *missed);

#define port_log_at(level, ...)                               \
	do {                                                  \
		if ((level) <= CONFIG_LOG_LEVEL)              \
			port_log((level), __VA_ARGS__);       \
	} while (0)

#define pr_err(...)   port_log_at(PORT_LOG_ERR, __VA_ARGS__)
#define pr_warn(...)  port_log_at(PORT_LOG_WARN, __VA_ARGS__)
#define pr_info(...)  port_log_at(PORT_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) port_log_at(PORT_LOG_DEBUG, __VA_ARGS__)

#endif /* EDGEPROF_PORT_LOG_H */
