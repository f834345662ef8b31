/* SPDX-License-Identifier: MIT */
/* agent/daemon/features.h — what this build of the agent was configured with. */
#ifndef EDGEPROF_AGENT_FEATURES_H
#define EDGEPROF_AGENT_FEATURES_H

#include <stdio.h>

/* Prints the version, target and each compiled-in feature with its Kconfig value. */
void features_print(FILE *out, const char *prog);

#endif /* EDGEPROF_AGENT_FEATURES_H */
