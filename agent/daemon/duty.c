// SPDX-License-Identifier: MIT
/* agent/daemon/duty.c — when the samplers run (agent/daemon/duty.h). */
#include <inttypes.h>

#include "agent/daemon/bpf.h"
#include "agent/daemon/duty.h"
#include "agent/daemon/sigprof-rings.h"
#include "agent/daemon/upload.h"
#include "port/clock.h"
#include "port/log.h"

/*
 * The samplers run in a round the fleet's duty cycle gives us (round_samples), and while a
 * pulled profile is being sampled.
 */
void agent_duty__pause(struct agent *a)
{
	bool skip = a->duty_next_known ? a->duty_next_skip : a->duty_skip;
	bool paused = !(a->in_round && !skip) && !a->pull_agg;

	agent_rings__pause(a, paused);
	agent_bpf__pause(a, paused);
}

/*
 * A round's window is that of its scheduled start (monotonic ns, on the wall clock here), not
 * of the moment the loop got to it: rounds of a window's length polled late were decided in
 * the next window, and the next round, on time, in it too: two rounds sampled in one window
 * (collector-duty saw 4 of 9 rounds sampled, not 2).
 */
static uint64_t start_s(uint64_t start)
{
	return (port_clock_real_ns() + start - port_clock_mono_ns()) / NSEC_PER_SEC;
}

static void decide(struct agent *a, uint64_t start, bool *skip, uint64_t *window)
{
	uint64_t s = start_s(start);

	*skip = !agent_upload__round_samples(a, s);
	*window = *skip ? 0 : agent_upload__told_window(a, s);
}

void agent_duty__round_start(struct agent *a, uint64_t start)
{
	a->in_round = true;
	if (a->duty_next_known) {
		a->duty_skip = a->duty_next_skip;
		a->duty_window = a->duty_next_window;
	} else {
		decide(a, start, &a->duty_skip, &a->duty_window);
	}
	a->duty_next_known = false;
	if (a->duty_skip)
		pr_info("round %" PRIu64 " skipped: not in this device's window of "
			"the fleet's duty cycle", ++a->duty_skipped);
	agent_duty__pause(a);
}

/*
 * Whether, a round having ended, the next starts at once: continuous rounds (period = round),
 * unless the last one began late and the next waits for its nominal start (samplers running
 * in that gap would take samples that ROUND_START throws away).
 */
static bool next_now(const struct rounds *rs, uint64_t now)
{
	return rs->period_ns == rs->round_ns && rs->next_start <= now;
}

/*
 * The next round is decided now, before this round is written (reading kallsyms and encoding
 * take a few hundred ms; what the samplers took meanwhile would go to a round that is skipped,
 * or be thrown away at the next round's start). The next ROUND_START takes the decision.
 */
void agent_duty__round_ended(struct agent *a, const struct rounds *rs, uint64_t now)
{
	a->in_round = next_now(rs, now);
	if (a->in_round && !a->cfg.once) {
		decide(a, rs->next_start, &a->duty_next_skip, &a->duty_next_window);
		a->duty_next_known = true;
	}
	agent_duty__pause(a);
}
