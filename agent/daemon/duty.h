/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/duty.h — when the samplers run: in a round the fleet's duty cycle gives this
 * device (agent_upload__round_samples(): the collector's schedule), and while a pulled profile
 * is sampled; paused in between, so a skipped round costs the device nothing.
 */
#ifndef EDGEPROF_AGENT_DAEMON_DUTY_H
#define EDGEPROF_AGENT_DAEMON_DUTY_H

#include <stdint.h>

#include "agent/core/rounds.h"
#include "agent/daemon/agent.h"

/* Pauses every sampler (SIGPROF producers, BPF) or lets them run, as the state says. */
void agent_duty__pause(struct agent *a);
/* A round starts (at start, monotonic): whether it samples (a->duty_skip), said when not. */
void agent_duty__round_start(struct agent *a, uint64_t start);
/* A round ends: the samplers run on only if the next starts at once and samples. */
void agent_duty__round_ended(struct agent *a, const struct rounds *rs, uint64_t now);

#endif /* EDGEPROF_AGENT_DAEMON_DUTY_H */
