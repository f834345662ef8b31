// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "port/clock.h"
#include "port/log.h"
#include "port/text.h"

static const char *log_ident = "edgeprof";
static bool log_syslog;
static int log_level = CONFIG_LOG_LEVEL;

void port_log_open(const char *ident, bool use_syslog)
{
	log_ident = ident;
	log_syslog = use_syslog;
	if (use_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void port_log_set_level(int level)
{
	log_level = level;
}

void port_log(int level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[512], safe[1024];
	int saved_errno = errno;
	va_list ap;

	if (level > log_level || level < 0 || level > PORT_LOG_DEBUG)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Names, labels and errors from devices and users are in it: one event, one line. */
	log_escape(line, safe, sizeof(safe));
	if (log_syslog)
		syslog(prio[level], "%s", safe);
	else
		fprintf(stderr, "%s: %s: %s\n", log_ident, names[level], safe);
	errno = saved_errno;
}

bool port_ratelimit(struct port_ratelimit *rl, unsigned burst, uint64_t *missed)
{
	uint64_t now = port_clock_mono_ns(), end = atomic_load(&rl->window_end);

	if (now >= end && atomic_compare_exchange_strong(&rl->window_end, &end,
							 now + 1000000000ull))
		atomic_store(&rl->n, 0); /* a new one-second window */
	if (atomic_fetch_add(&rl->n, 1) >= burst) {
		atomic_fetch_add(&rl->missed, 1);
		return false;
	}
	*missed = atomic_exchange(&rl->missed, 0);
	return true;
}
