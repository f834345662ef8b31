// SPDX-License-Identifier: MIT
/* agent/core/pysplice.c — the eval loop's activations replaced by Python frames (pyname.h). */
#include "agent/core/pyname.h"

/*
 * Pure: no allocation, no system call of its own (libedgeprof.so's SIGPROF handler runs it;
 * its next() reads the thread's frames with process_vm_readv).
 */
unsigned int pyframes__splice_into(const struct pysplice *sp, const uint64_t *frames,
				   unsigned int n, uint64_t *out, unsigned int max,
				   unsigned int *pushed, unsigned int *activations, bool *truncated)
{
	unsigned int o = 0, budget = sp->budget, i;
	bool cut = false;

	*pushed = *activations = 0;
	for (i = 0; i < n && o < max; i++) {
		uint64_t pc = frames[i] - (i > 0); /* a return address: its call */
		unsigned int room = max - o < budget ? max - o : budget, k;

		if (pc < sp->eval_lo || pc >= sp->eval_hi) {
			out[o++] = frames[i];
			continue;
		}
		++*activations;
		k = sp->next(sp->ctx, out + o, room, &cut);
		if (!k) /* nothing to show for it: keep the native frame */
			out[o++] = frames[i];
		o += k;
		budget -= k;
		*pushed += k;
	}
	if (cut || i < n) /* Python frames took the room of native ones: the sample is cut */
		*truncated = true;
	return o;
}
