// SPDX-License-Identifier: MIT
/* agent/core/rounds.c — see rounds.h. */
#include <errno.h>

#include "agent/core/rounds.h"

static uint64_t jittered(struct rounds *r, uint64_t nominal, uint64_t not_before)
{
	uint64_t s = nominal;

	if (r->jitter_ns) {
		uint64_t d = r->rand_below(2 * r->jitter_ns + 1);

		s = d >= r->jitter_ns
			? nominal + (d - r->jitter_ns)
			: (nominal > r->jitter_ns - d ? nominal - (r->jitter_ns - d) : 0);
	}
	return s < not_before ? not_before : s;
}

int rounds__init(struct rounds *r, uint64_t round_ns, uint64_t period_ns, unsigned int jitter_pct,
		 uint64_t now_ns, uint64_t (*rand_below)(uint64_t bound))
{
	if (!round_ns || !period_ns || round_ns > period_ns || jitter_pct > 50 || !rand_below)
		return -EINVAL;
	*r =
	    (struct rounds){.round_ns = round_ns, .period_ns = period_ns, .rand_below = rand_below};
	/* continuous profiling has no gaps to move rounds into */
	if (period_ns > round_ns)
		r->jitter_ns = period_ns / 100 * jitter_pct;
	r->nominal = now_ns;
	r->next_start = jittered(r, now_ns, now_ns);
	return 0;
}

enum round_event rounds__poll(struct rounds *r, uint64_t now_ns, uint64_t *wait_ns)
{
	enum round_event ev = ROUND_NONE;

	if (r->in_round && now_ns >= r->end) {
		r->in_round = false;
		ev = ROUND_END;
	} else if (!r->in_round && now_ns >= r->next_start) {
		r->in_round = true;
		r->start = r->next_start;
		r->end = r->start + r->round_ns;
		if (now_ns >= r->end) { /* woke up after the whole round: start it now instead */
			r->skipped++;
			r->start = now_ns;
			r->end = now_ns + r->round_ns;
		}
		r->nominal += r->period_ns;
		while (r->nominal + r->jitter_ns < r->end) { /* periods missed while asleep */
			r->nominal += r->period_ns;
			r->skipped++;
		}
		r->next_start = jittered(r, r->nominal, r->end);
		ev = ROUND_START;
	}
	if (wait_ns) {
		uint64_t at = r->in_round ? r->end : r->next_start;

		*wait_ns = at > now_ns ? at - now_ns : 0;
	}
	return ev;
}
