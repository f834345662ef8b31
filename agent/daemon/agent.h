/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/agent.h — the daemon's state, shared by main.c and each feature's glue file
 * (bpf.c, sigprof-rings.c, heap.c, pull-loop.c, scrape-loop.c, upload.c, duty.c, round.c,
 * services.c).
 * Only the daemon's own files include it: the features' libraries know nothing of it.
 */
#ifndef EDGEPROF_AGENT_DAEMON_AGENT_H
#define EDGEPROF_AGENT_DAEMON_AGENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/daemon/scrape.h"
#ifdef CONFIG_UPLOAD_MTLS
#include "agent/transport/transport.h"
#endif

#define MAX_RINGS 256
#define MAX_SERVICES 16
#define DRAIN_MS 50 /* SIGPROF rings are drained this often */

struct config {
	unsigned long hz, round_s, period_s, jitter_pct, seconds, stack_entries, max_procs;
	unsigned long bpf_ringbuf_kb;	/* 0: CONFIG_BPF_RINGBUF_KB */
	const char *registry, *output_dir, *sampler, *bpf_service, *pull_listen;
	const char *bpf_cgroup; /* --bpf-cgroup: only that cgroup v2's tasks (NULL: all) */
	bool once, symbolize, kernel_stacks, upload;
	const char *scrape[SCRAPE_MAX_TARGETS], *scrape_types;
	size_t n_scrape;
	bool no_cpu, offcpu; /* --profiles: the BPF sampler's kinds (default cpu) */
	bool offcpu_min_set;
	unsigned long offcpu_min_us; /* --offcpu-min-us, else CONFIG_BPF_OFFCPU_MIN_US */
#ifdef CONFIG_UPLOAD_MTLS
	struct transport_opts tr; /* also the pull server's and the scrapes' certificates */
#endif
};

/* Profiles of time other than CPU, each its own aggregate per service (made on first use). */
enum { KIND_WALL, KIND_OFFCPU, N_KINDS };

struct service {
	char name[64];
	struct aggregate *agg;		   /* cpu */
	struct aggregate *kinds[N_KINDS]; /* wall (sigprof producers), offcpu (BPF) */
};

struct agent {
	struct config cfg;
	struct ring *rings[MAX_RINGS];
	char ring_paths[MAX_RINGS][300];
	unsigned int n_rings;
	struct service services[MAX_SERVICES];
	unsigned int n_services;
	uint64_t dropped_services, dropped_rings;
	struct proctab *procs;
	struct symbolizer *sym;
	struct ksyms *ksyms; /* kernel names, lazily read (BPF with kernel stacks) */
	struct bpf_sampler *bpf;
	struct leaf *leaf;     /* the callers BPF stacks lost (NULL: not restored) */
	struct mmapev *mmapev; /* new programs' maps from mmap records (or NULL) */
	bool bpf_ordered; /* BPF samples arrive in time order (ring buffer, not perf buffers) */
	uint64_t leaf_trimmed_ns; /* when the unwind tables' pages last left the RSS */
	uint64_t mmap_rescanned_ns; /* when the mmap records' CPUs were last checked */
	struct transport *transport;
	uint64_t seq;
	uint64_t round_real_ns;
	bool in_round;
	unsigned round_profiles;	/* written by agent__write_round() this round */
	struct pull_server *pull;	/* pull mode (agent/daemon/pull.h), or NULL */
	struct aggregate *pull_agg;	/* a pulled CPU profile being sampled, or NULL */
	uint32_t pull_round;		/* the frame-name round it began in (framename.h) */
	uint64_t interp_sample_ns;	/* the last BPF sample with interpreter frames (bpf.c) */
	uint64_t pull_start, pull_end, pull_real_ns;
	struct scraper *scrape;		/* --scrape targets (agent/daemon/scrape.h), or NULL */
	bool duty_skip;		/* this round is not in the fleet's schedule for us: no samples */
	bool duty_next_known;	/* a round ended and the next, back to back, is decided: */
	bool duty_next_skip;	/* it is skipped (the samplers stop before the round is written) */
	uint64_t duty_skipped;
	/*
	 * The duty window the schedule told us to sample in, when this round (next: the round
	 * decided at the last one's end) samples because of it, else 0: sent with the round's
	 * profiles (duty_window), so that the collector weighs them.
	 */
	uint64_t duty_window, duty_next_window;
};

/* Set by SIGINT and SIGTERM: the main loop (and the waits of --once) end. */
extern volatile sig_atomic_t agent_stop;

#endif /* EDGEPROF_AGENT_DAEMON_AGENT_H */
