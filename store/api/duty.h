/* SPDX-License-Identifier: MIT */
/*
 * store/api/duty.h — fleet-wide duty cycling: the collector answers each upload with the device's
 * schedule, so that at most budget % of each group of devices (by labels: firmware version,
 * region) samples in any window (Google-Wide Profiling's two dimensions: few machines, short
 * windows).
 *
 * Time is cut into windows of window_s seconds. The devices of a group are numbered in the
 * order they were first seen (0 .. n-1); with k = max(1, n * budget / 100) slots, window w
 * samples the k devices from (w * k) mod n on (wrapping): every device samples one window in
 * n / k, each window k of n. A profile sampled so stands for n / k windows of its device: its
 * weight (milli-units), by which fleet totals are scaled to stay unbiased.
 *
 * A device's schedule says whether it samples in the current window, when its next sampling
 * window starts, the window length, the weight, and the rate/round/period to use. Without one
 * (collector unreachable, first contact) an agent samples a window with probability budget %
 * on its own (duty__default()), with weight 100 / budget: the budget holds in expectation.
 *
 * Bounded: at most max_devices devices and as many groups are tracked (open addressing); a
 * device unseen for a few of its periods is forgotten when the table is full (or when it comes
 * back); a device beyond is answered the default and counted (untracked).
 *
 * A profile is weighed only when its device was told to sample in the window it was taken in
 * (the agent sends that window with the upload: label duty_window): everything else (other
 * clients, the collector's scrapes, the agent's own default) stands for itself, weight 1.
 */
#ifndef EDGEPROF_STORE_DUTY_H
#define EDGEPROF_STORE_DUTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/ringfile.h"

/* The label an agent's upload names its told window with (taken out before storing). */
#define DUTY_WINDOW_LABEL "duty_window"

struct duty_opts {
	unsigned budget_percent;	/* 1..100 */
	unsigned window_s;		/* >= 1 */
	const char *group_by;		/* label keys, comma-separated ("version,region") */
	size_t max_devices;
	unsigned rate_hz, round_s, period_s;	/* passed on to the agents */
};

struct duty_schedule {
	bool sample;			/* in the window now */
	uint64_t window_s;
	uint64_t window_start_s;	/* the window now */
	uint64_t next_start_s;		/* the next window this device samples in */
	uint64_t weight_milli;		/* n / k * 1000 */
	unsigned rate_hz, round_s, period_s;
	uint32_t group_devices, group_slots;
	unsigned budget_percent;	/* for the agent's default once this schedule expired */
};

struct duty_stats {
	uint64_t devices, groups, untracked, schedules;
	uint64_t expired;	/* devices forgotten (unseen for a few of their periods) */
	uint64_t moved;		/* devices whose labels put them in another group */
	uint64_t weighed, unweighed;	/* profiles with a told window / without (weight 1) */
};

struct duty;

#ifdef CONFIG_COLLECTOR_DUTY
/* NULL + a message in err when the options are out of range. */
struct duty *duty__new(const struct duty_opts *o, char *err, size_t errlen);
void duty__free(struct duty *d);

/*
 * The schedule of the device at now_s (unix seconds). A device is its certificate name: one
 * entry whatever its labels, whose group-by values (the latest upload's) place it in a group.
 */
void duty__schedule(struct duty *d, const char *device, const struct record_label *labels,
		    size_t n_labels, uint64_t now_s, struct duty_schedule *out);
/*
 * The weight (milli) of a profile the device sampled in window (unix s / window_s, the agent's
 * duty_window label): the one it was told with that window, or 1000 when it was told none
 * (Pyroscope, Alloy, scrapes, a device without a schedule, a window it was not given).
 */
uint64_t duty__weight(struct duty *d, const char *device, uint64_t window);
#else
#include <stdio.h>
static inline struct duty *duty__new(const struct duty_opts *o, char *err, size_t errlen)
{
	(void)o;
	snprintf(err, errlen, "duty cycling is not built in (CONFIG_COLLECTOR_DUTY)");
	return NULL;
}
static inline void duty__free(struct duty *d) { (void)d; }
static inline void duty__schedule(struct duty *d, const char *device,
				  const struct record_label *labels, size_t n_labels,
				  uint64_t now_s, struct duty_schedule *out)
{
	(void)d, (void)device, (void)labels, (void)n_labels, (void)now_s;
	*out = (struct duty_schedule){ .sample = true, .weight_milli = 1000 };
}
static inline uint64_t duty__weight(struct duty *d, const char *device, uint64_t window)
{
	(void)d, (void)device, (void)window;
	return 1000;
}
#endif

#ifdef CONFIG_COLLECTOR_DUTY
/* The agent's default without a schedule: whether device samples in window w, pseudo-random. */
bool duty__default(const char *device, uint64_t window, unsigned budget_percent);

/* JSON object of a schedule ({"sample":true,...}) into buf; its length, or -1 if too short. */
int duty__json(const struct duty_schedule *s, char *buf, size_t len);

void duty__stats(struct duty *d, struct duty_stats *st);
#else
static inline int duty__json(const struct duty_schedule *s, char *buf, size_t len)
{
	(void)s, (void)buf, (void)len;
	return -1;
}
#endif

#endif /* EDGEPROF_STORE_DUTY_H */
