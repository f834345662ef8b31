/* SPDX-License-Identifier: MIT */
/*
 * agent/core/ring.h — a lock-free multi-producer / single-consumer ring of variable-length stack
 * records in shared memory (a file under the registry directory, mmap'd by the instrumented
 * process and by the agent), plus a small table of label sets the records refer to.
 *
 * Producers (SIGPROF handlers) never block and never allocate: a record is reserved with one
 * CAS on head, written, then published by storing its header word with the COMMIT bit
 * (release). When the ring is full the record is dropped and counted. The consumer only parses
 * records whose header carries the position tag it expects and the COMMIT bit, so torn or stale
 * bytes are never parsed; it zeroes what it consumed so free space is always zero. A producer
 * that dies (or stalls) mid-record is skipped after ring__set_stall_timeout() and counted.
 */
#ifndef EDGEPROF_AGENT_RING_H
#define EDGEPROF_AGENT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/core/sample.h"

#define RING_MAGIC 0x45505247u /* "EPRG" */
#define RING_VERSION 1
#define RING_LABEL_SETS 64	 /* label sets per ring (per process) */
#define RING_LABEL_SET_BYTES 256 /* "k\0v\0k\0v\0" per set */
#define RING_MAPS_BYTES 16384	 /* the producer's executable mappings, /proc/<pid>/maps text */

/* Header word of each record: tag (high 32) | flags | length in bytes (low 24). */
#define RING_HDR_COMMIT (1u << 31)
#define RING_HDR_PAD (1u << 30)
#define RING_HDR_LEN 0x00ffffffu

/*
 * What a record carries after its header word (frames follow, leaf first). A record flagged
 * SAMPLE_F_SNAPSHOT carries after its frames a snapshot blob (pprof/snapshot.h) padded to
 * 8 bytes and, last, one word RING_SNAP_DESC(frames, blob bytes): n_frames counts them all.
 */
#define RING_SNAP_DESC(n_chain, blob_len) ((uint64_t)(n_chain) | (uint64_t)(blob_len) << 16)
#define RING_SNAP_WORDS(blob_len) (((blob_len) + 7) / 8 + 1)
struct ring_rec {
	uint64_t time_ns;   /* CLOCK_MONOTONIC */
	uint64_t weight_ns; /* CPU time this sample stands for */
	uint32_t pid, tid;
	uint32_t labels_id; /* 0 = none, else a ring__labels_intern() id */
	uint16_t n_frames;
	uint16_t flags; /* SAMPLE_F_* */
	uint64_t frames[];
};

/* The shared header (first page of the file). Layout is the ABI between library and agent. */
struct ring_shared {
	uint32_t magic, version;
	uint32_t data_off, data_size; /* data_size is a power of two */
	uint32_t labels_off, pid;
	uint32_t hz, max_depth;
	char service[64];
	uint64_t start_real_ns;
	uint32_t paused;   /* set by the agent between rounds: producers skip sampling */
	uint32_t maps_len; /* bytes of maps text; 0 while the producer rewrites it */
	uint32_t maps_off;
	uint32_t pad2;
	uint64_t proc_start; /* the producer's start time (/proc/<pid>/stat field 22): pid reuse */
	uint64_t pad0;
	uint64_t head __attribute__((aligned(64))); /* producers: next free byte (CAS) */
	uint64_t dropped_full;			    /* producers: records not written */
	uint64_t written;			    /* producers: records committed */
	uint64_t labels_dropped;		    /* label sets that did not fit */
	uint64_t tail __attribute__((aligned(64))); /* consumer: next byte to read */
	uint64_t consumed, torn, torn_bytes;	    /* consumer counters */
	/* producer: what its samples miss, for the profiles' comments (0 from older producers) */
	uint64_t miss_skipped __attribute__((aligned(64))); /* stack margin, alternate stack */
	uint32_t miss_threads_blocking; /* threads that blocked the sampler's signal */
	uint32_t miss_stepped_aside;	/* 1: the program claimed the signal, sampling stopped */
};

struct ring_label_set {
	uint32_t state; /* 0 free, 1 being written, 2 ready */
	uint32_t len;
	char blob[RING_LABEL_SET_BYTES - 8];
};

struct ring;

struct ring_stats {
	uint64_t written, dropped_full, consumed, torn, torn_bytes, labels_dropped;
};

/*
 * Creates a ring of data_bytes (rounded up to a power of two, >= 4 KiB) at path (created
 * 0600, replaced if present), or in private anonymous memory when path is NULL.
 */
int ring__create(const char *path, size_t data_bytes, const char *service, uint32_t hz,
		 struct ring **out);
/* Maps an existing ring file for consuming; -EINVAL when it is not a valid ring. */
int ring__open(const char *path, struct ring **out);
void ring__free(struct ring *r); /* unmaps; NULL-safe; does not unlink */

struct ring_shared *ring__shared(struct ring *r);

/*
 * Async-signal-safe. Reserves room for a record of n frames. Returns a pointer to fill and
 * publish with ring__commit(), or NULL when full (counted in dropped_full).
 */
struct ring_rec *ring__reserve(struct ring *r, unsigned int n_frames);
/* The same, for a larger record the caller can do without: a failure is not counted. */
struct ring_rec *ring__try_reserve(struct ring *r, unsigned int n_frames);
void ring__commit(struct ring *r, struct ring_rec *rec);
/* Reserve + copy + commit: 0 or -ENOSPC. Async-signal-safe. */
int ring__write(struct ring *r, const struct ring_rec *h, const uint64_t *frames, unsigned n);

/*
 * Consumer: calls fn for up to max committed records in order and frees their space. A record
 * not committed for stall_ns (measured by now_ns across calls) is skipped and counted as torn.
 * Returns the number of records delivered, or the fn's negative return (the record is consumed).
 */
typedef int (*ring_rec_fn)(void *ctx, const struct ring_rec *rec);
int ring__drain(struct ring *r, unsigned int max, uint64_t now_ns, ring_rec_fn fn, void *ctx);
void ring__set_stall_timeout(struct ring *r, uint64_t stall_ns);
bool ring__is_empty(struct ring *r);
void ring__stats(struct ring *r, struct ring_stats *st);

/*
 * Label sets: blob is "k\0v\0k\0v\0..." of len bytes. Returns the id (>= 1) of an identical
 * set or of a new one, 0 when the table is full or the blob too long (counted). Not for signal
 * handlers (it may spin on a concurrent writer); the handler only reads the id.
 */
uint32_t ring__labels_intern(struct ring *r, const char *blob, size_t len);
/* The blob of id, or NULL. */
const char *ring__labels_get(struct ring *r, uint32_t id, size_t *len);

/*
 * The producer's executable mappings (lines of /proc/self/maps), so the agent can symbolize a
 * process that exited before it looked: set by the producer (truncated at whole lines to
 * RING_MAPS_BYTES), read by the agent into buf (NUL-terminated; 0 when none or being rewritten).
 */
void ring__set_maps(struct ring *r, const char *text, size_t len);
size_t ring__get_maps(struct ring *r, char *buf, size_t max);

/* Start time of pid in clock ticks since boot (/proc/<pid>/stat field 22), 0 if unknown. */
uint64_t ring_proc_start(uint32_t pid);
/*
 * The same, and the start of the main program's text (field 26; NULL: not wanted), in one read
 * of /proc/<pid>/stat (pid 0: self). 0 or -errno.
 */
int ring_proc_stat(uint32_t pid, uint64_t *start_time, uint64_t *start_code);
/* The ring's producer still runs (same pid and same start time). */
bool ring__producer_alive(struct ring *r);

/*
 * The producer is done with the ring at path: removes the file when no agent needs it (no
 * record was ever written, or an agent has it mapped: it drains through its mapping), keeps
 * it for an agent to come otherwise. Returns true when removed.
 */
bool ring__release(struct ring *r, const char *path);
/*
 * Keeps the registry dir at most max ring files of exited producers: removes the oldest
 * (mtime) of those beyond it. Rings of live producers are never touched. Returns how many
 * were removed. One readdir when under the bound.
 */
int ring__registry_trim(const char *dir, unsigned int max);

/* Fills s from rec (labels point into r's label table, frames into rec: use s before the next
 * ring__drain()). All frames are user frames. */
void ring__rec_to_sample(struct ring *r, const struct ring_rec *rec, struct agent_sample *s);

#endif /* EDGEPROF_AGENT_RING_H */
