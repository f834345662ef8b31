// SPDX-License-Identifier: MIT
#include "agent/daemon/features.h"

struct feature {
	const char *name;
	int enabled;
};

void features_print(FILE *out, const char *prog)
{
	static const struct feature features[] = {
		{ "sampler-bpf", IS_ENABLED(CONFIG_SAMPLER_BPF) },
		{ "sampler-sigprof", IS_ENABLED(CONFIG_SAMPLER_SIGPROF) },
		{ "profile-heap", IS_ENABLED(CONFIG_PROFILE_HEAP) },
		{ "profile-wall", IS_ENABLED(CONFIG_PROFILE_WALL) },
		{ "bpf-offcpu", IS_ENABLED(CONFIG_BPF_OFFCPU) },
		{ "symbolize", IS_ENABLED(CONFIG_SYMBOLIZE) },
		{ "upload-mtls", IS_ENABLED(CONFIG_UPLOAD_MTLS) },
		{ "spool", IS_ENABLED(CONFIG_SPOOL) },
		{ "pull", IS_ENABLED(CONFIG_PULL_SERVER) },
		{ "static", IS_ENABLED(CONFIG_STATIC) },
	};

	fprintf(out, "%s %s (%s)\n", prog, EDGEPROF_VERSION, CONFIG_ARCH);
	fprintf(out, "features:");
	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
		fprintf(out, " %c%s", features[i].enabled ? '+' : '-', features[i].name);
	fprintf(out, "\nsample-hz=%d ring-kb=%d max-stack-depth=%d stack-table=%d\n", CONFIG_SAMPLE_HZ,
		CONFIG_RING_KB, CONFIG_MAX_STACK_DEPTH, CONFIG_STACK_TABLE_ENTRIES);
	fprintf(out, "round=%ds period=%ds jitter=%d%%\n", CONFIG_ROUND_SECONDS,
		CONFIG_PERIOD_SECONDS, CONFIG_JITTER_PERCENT);
}
