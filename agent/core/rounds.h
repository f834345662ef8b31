/* SPDX-License-Identifier: MIT */
/*
 * agent/core/rounds.h — the round schedule: a round of round_ns starts every period_ns, each start
 * moved by a uniformly random +/- jitter_pct % of the period so a fleet never profiles (or
 * uploads) in lockstep. period == round is continuous profiling: rounds back to back, no
 * jitter. A round never starts before the previous one ended; rounds missed while the agent
 * was not polled (suspend, a stopped process) are skipped, not replayed in a burst.
 * The clock and the random source are passed in, so the schedule is tested with a fake clock.
 */
#ifndef EDGEPROF_AGENT_ROUNDS_H
#define EDGEPROF_AGENT_ROUNDS_H

#include <stdbool.h>
#include <stdint.h>

enum round_event { ROUND_NONE = 0, ROUND_START, ROUND_END };

struct rounds {
	uint64_t round_ns, period_ns, jitter_ns;
	uint64_t nominal;    /* nominal start of the next round */
	uint64_t next_start; /* its jittered start */
	uint64_t start, end; /* current (or last) round */
	bool in_round;
	uint64_t skipped; /* rounds missed because nobody polled in time */
	uint64_t (*rand_below)(uint64_t bound);
};

/* 0, or -EINVAL when round > period or a value is 0 or jitter_pct > 50. */
int rounds__init(struct rounds *r, uint64_t round_ns, uint64_t period_ns, unsigned int jitter_pct,
		 uint64_t now_ns, uint64_t (*rand_below)(uint64_t bound));
/* The event due at now (call again until ROUND_NONE); *wait_ns = time to the next event. */
enum round_event rounds__poll(struct rounds *r, uint64_t now_ns, uint64_t *wait_ns);

#endif /* EDGEPROF_AGENT_ROUNDS_H */
