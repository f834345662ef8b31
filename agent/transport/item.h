/* SPDX-License-Identifier: MIT */
/*
 * agent/transport/item.h — one profile on its way to the collector, as the transport takes it
 * and the spool keeps it (both include this; the transport drives the spool, not the reverse).
 */
#ifndef EDGEPROF_AGENT_TRANSPORT_ITEM_H
#define EDGEPROF_AGENT_TRANSPORT_ITEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/transport/upload.h"

/* Labels the transport adds itself (not allowed in an item's labels). */
#define TRANSPORT_LABEL_DROPPED "edgeprof_spool_dropped"
#define TRANSPORT_LABEL_CLOCK	"clock"
#define TRANSPORT_LABEL_AGE	"age_s"

struct transport_item {
	const char *service;
	const char *type;		/* "cpu" */
	const struct upload_label *labels;
	size_t n_labels;		/* at most UPLOAD_MAX_LABELS - 3 */
	/* "<device>-<round start>-<seq>", device = transport__device(): keys are fleet-wide */
	const char *key;
	uint64_t time_ns;		/* unix ns, or CLOCK_MONOTONIC ns when clock_unset */
	bool clock_unset;
	const void *data;		/* the gzip pprof */
	size_t len;
};

#endif /* EDGEPROF_AGENT_TRANSPORT_ITEM_H */
