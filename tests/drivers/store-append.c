// SPDX-License-Identifier: MIT
/*
 * tests/drivers/store-append.c — drives the ring file for the crash, corruption and
 * wraparound tests and the benchmark.
 *
 *   store-append append PATH SIZE FSYNC_MS COUNT START
 *       appends COUNT records (record i = START, START+1, ...; payload derived from i, 100 to
 *       8 KiB), and after each one is durable prints "ack SEQ HASH I FIRST" (flushed).
 *   store-append verify PATH
 *       opens the ring, reads every live record back, checks each payload against the one
 *       record i must have, prints "rec SEQ HASH I" per record, then
 *       "stats first=F last=L records=N corrupt=C overwritten=O stale=S repaired=R"; exits 1
 *       when a served record is not byte-identical to what was written (a torn record served).
 *   store-append bench PATH SIZE FSYNC_MS COUNT LEN
 *       appends COUNT records of LEN bytes; prints "bytes=B seconds=S wm_syncs=W syncs=Y"
 *       (record bytes/s; W of the Y fdatasyncs declared an eviction in the header).
 *   store-append crash DIR TRIALS SEED MODE
 *       the crash trials of tests/bench/ring-crash.sh in one process (MODE kill or power, see
 *       cmd_crash); prints one line per failure and a closing "trials=..." line; exits 1 when
 *       an acknowledged record was lost or damaged or a torn record was served.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/crc32c.h"
#include "port/hash.h"
#include "port/ringfile.h"

/* Record i's payload: its length and bytes follow from i alone. */
static size_t payload_of(uint64_t i, unsigned char *buf, size_t maxlen)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
	size_t len = 100 + (size_t)(x >> 7) % (maxlen - 100);

	for (size_t k = 0; k < len; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[k] = (unsigned char)x;
	}
	return len;
}

static struct ringfile *open_ring(const char *path, uint64_t size, unsigned fsync_ms)
{
	struct ringfile_opts o = { .size = size, .fsync_ms = fsync_ms, .create = size != 0 };
	char err[256];
	struct ringfile *rf = ringfile__open(path, &o, err, sizeof(err));

	if (!rf)
		fprintf(stderr, "store-append: %s\n", err);
	return rf;
}

static int cmd_append(char **argv)
{
	uint64_t size = strtoull(argv[3], NULL, 0), count = strtoull(argv[5], NULL, 0);
	uint64_t start = strtoull(argv[6], NULL, 0);
	unsigned fsync_ms = strtoul(argv[4], NULL, 0);
	size_t maxlen = 8192;
	struct ringfile *rf = open_ring(argv[2], size, fsync_ms);
	unsigned char *buf = malloc(maxlen);
	struct record_label l[] = { { "driver", "store-append" } };

	if (!rf || !buf || maxlen <= 100)
		return 2;
	for (uint64_t i = start; i < start + count; i++) {
		char key[32];
		struct record_meta m = { .time_ns = port_clock_real_ns(), .service = "crash",
					 .type = "cpu", .device = "drv", .key = key,
					 .labels = l, .n_labels = 1 };
		size_t len = payload_of(i, buf, maxlen);
		uint64_t seq;
		int err;

		snprintf(key, sizeof(key), "i-%" PRIu64, i);
		err = ringfile__append_async(rf, &m, buf, len, &seq);
		if (!err)
			err = ringfile__wait_durable(rf, seq);
		if (err) {
			fprintf(stderr, "store-append: append %" PRIu64 ": %s\n", i,
				strerror(-err));
			return 1;
		}
		printf("ack %" PRIu64 " %016" PRIx64 " %" PRIu64 " %" PRIu64 "\n", seq,
		       hash_fnv64(buf, len), i, ringfile__first_seq(rf));
		fflush(stdout);
	}
	ringfile__free(rf);
	free(buf);
	return 0;
}

struct verify_ctx {
	unsigned char *buf;
	int bad;
};

static int verify_cb(void *ctx, uint64_t seq, const struct record_meta *m, const void *payload,
		     size_t len)
{
	struct verify_ctx *v = ctx;
	uint64_t i;
	size_t want;

	if (sscanf(m->key, "i-%" SCNu64, &i) != 1) {
		printf("BAD %" PRIu64 " key '%s'\n", seq, m->key);
		v->bad = 1;
		return 0;
	}
	want = payload_of(i, v->buf, 8192);
	if (want != len || memcmp(v->buf, payload, len) || strcmp(m->service, "crash") ||
	    m->n_labels != 1 || strcmp(m->labels[0].value, "store-append")) {
		printf("BAD %" PRIu64 " i=%" PRIu64 " len %zu want %zu\n", seq, i, len, want);
		v->bad = 1;
	}
	printf("rec %" PRIu64 " %016" PRIx64 " %" PRIu64 "\n", seq, hash_fnv64(payload, len), i);
	return 0;
}

static int cmd_verify(char **argv)
{
	struct ringfile *rf = open_ring(argv[2], 0, 0);
	struct verify_ctx v = { .buf = malloc(65536) };
	struct ringfile_stats st;
	int err;

	if (!rf || !v.buf)
		return 2;
	err = ringfile__foreach(rf, 0, true, verify_cb, &v);
	ringfile__stats(rf, &st);
	printf("stats first=%" PRIu64 " last=%" PRIu64 " records=%" PRIu64 " corrupt=%" PRIu64
	       " overwritten=%" PRIu64 " stale=%" PRIu64 " repaired=%d reinit=%d\n",
	       st.first_seq, st.last_seq, st.records, st.corrupt, st.overwritten, st.stale,
	       st.header_repaired, st.reinitialised);
	ringfile__free(rf);
	free(v.buf);
	return err || v.bad;
}

static int cmd_bench(char **argv)
{
	uint64_t size = strtoull(argv[3], NULL, 0), count = strtoull(argv[5], NULL, 0);
	size_t len = strtoul(argv[6], NULL, 0);
	struct ringfile *rf = open_ring(argv[2], size, strtoul(argv[4], NULL, 0));
	unsigned char *buf = malloc(len);
	struct record_meta m = { .service = "bench", .type = "cpu", .device = "d" };
	struct ringfile_stats st;
	uint64_t t0, seq = 0;
	double secs;

	if (!rf || !buf)
		return 2;
	for (size_t k = 0; k < len; k++)
		buf[k] = (unsigned char)(k * 131 + 7);
	t0 = port_clock_mono_ns();
	for (uint64_t i = 0; i < count; i++) {
		int err = ringfile__append(rf, &m, buf, len, &seq);

		if (err) {
			fprintf(stderr, "store-append: %s\n", strerror(-err));
			return 1;
		}
	}
	ringfile__sync(rf);
	secs = (port_clock_mono_ns() - t0) / 1e9;
	ringfile__stats(rf, &st);
	printf("bytes=%" PRIu64 " seconds=%.6f wm_syncs=%" PRIu64 " syncs=%" PRIu64 "\n",
	       (uint64_t)(count * len), secs, st.wm_syncs, st.syncs);
	ringfile__free(rf);
	free(buf);
	return 0;
}

/* ---- crash trials (tests/bench/ring-crash.sh) ------------------------------------------- */

/*
 * One acknowledgement, written by the forked writer into memory it shares with the parent:
 * valid is set last, so a kill between the fields leaves an entry that does not count (an
 * acknowledgement the writer never completed is not one the caller saw).
 */
struct crash_ack {
	uint64_t seq, i, hash, first;
	atomic_int valid;
};

#define CRASH_MAX_ACKS 65536u

struct crash_shared {
	atomic_ullong next_i;	/* record numbers, unique over all trials */
	atomic_uint n_acks;
	struct crash_ack acks[CRASH_MAX_ACKS];
};

struct crash_writer {
	struct ringfile *rf;
	struct crash_shared *sh;
	bool spool;	/* drain like the agent's spool: consume markers between records */
	bool durable;
};

/* A writer thread: appends records until it is killed (or the ack table is full). */
static void *crash_write(void *arg)
{
	struct crash_writer *w = arg;
	unsigned char *buf = malloc(8192);
	struct record_label l[] = { { "driver", "store-append" } };

	while (buf) {
		uint64_t i = atomic_fetch_add(&w->sh->next_i, 1), seq;
		char key[32];
		struct record_meta m = { .time_ns = port_clock_real_ns(), .service = "crash",
					 .type = "cpu", .device = "drv", .key = key,
					 .labels = l, .n_labels = 1 };
		size_t len = payload_of(i, buf, 8192);
		unsigned k;

		snprintf(key, sizeof(key), "i-%" PRIu64, i);
		if (ringfile__append_async(w->rf, &m, buf, len, &seq) ||
		    ringfile__wait_durable(w->rf, seq))
			_exit(3);
		k = atomic_fetch_add(&w->sh->n_acks, 1);
		if (k >= CRASH_MAX_ACKS)
			break;
		w->sh->acks[k] = (struct crash_ack){ .seq = seq, .i = i, .hash = hash_fnv64(buf, len),
						     .first = ringfile__first_seq(w->rf) };
		atomic_store(&w->sh->acks[k].valid, 1);
		/* consumed records stay until overwritten: the oracle is the same */
		if (w->spool && i % 3 == 0 && ringfile__consume(w->rf, seq - 1, w->durable))
			_exit(3);
	}
	for (;;)
		pause(); /* the parent kills us */
	return NULL;
}

/* The forked writer: opens the ring (the kill may land in the open and its scan) and writes. */
static void crash_child(const char *path, uint64_t size, unsigned fsync_ms, int threads,
			bool spool, int shim_mode, unsigned long shim_k, uint64_t seed,
			struct crash_shared *sh)
{
	void (*arm)(int, unsigned long, uint64_t) = (void (*)(int, unsigned long, uint64_t))
		dlsym(RTLD_DEFAULT, "rf_shim_arm");
	struct ringfile_opts o = { .size = size, .fsync_ms = fsync_ms, .create = true,
				   .quiet = true };
	struct crash_writer w = { .sh = sh, .spool = spool, .durable = !fsync_ms };
	pthread_t t[4];
	char err[256];

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the bench */
	if (shim_mode && arm)
		arm(shim_mode, shim_k, seed);
	w.rf = ringfile__open(path, &o, err, sizeof(err));
	if (!w.rf)
		_exit(2);
	for (int k = 1; k < threads; k++)
		pthread_create(&t[k], NULL, crash_write, &w);
	crash_write(&w);
}

struct seq_hash {
	uint64_t seq, hash;
};

static int seq_hash__cmp(const void *a, const void *b)
{
	const struct seq_hash *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct crash_verify {
	unsigned char *buf;
	struct seq_hash *served;
	size_t n;
	uint64_t bad;
};

static int crash_verify_cb(void *ctx, uint64_t seq, const struct record_meta *m,
			   const void *payload, size_t len)
{
	struct crash_verify *v = ctx;
	uint64_t i;

	if (sscanf(m->key, "i-%" SCNu64, &i) != 1 || payload_of(i, v->buf, 8192) != len ||
	    memcmp(v->buf, payload, len)) {
		printf("  served a record that differs from what was written: seq %" PRIu64
		       " key '%s' len %zu\n", seq, m->key, len);
		v->bad++;
	}
	v->served[v->n++] = (struct seq_hash){ seq, hash_fnv64(payload, len) };
	return 0;
}

static uint64_t crash_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void copy_file(const char *from, const char *to)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	if (system(cmd))
		fprintf(stderr, "store-append: cannot keep %s\n", to);
}

/*
 * TRIALS kill -9 (or power-cut) trials. Rings of 64 KiB to 4 MiB, a new one every 40 trials
 * (the same ring meanwhile, so it wraps over and over), records of 190 B to 8 KiB, fsync per
 * record and group commit alternating (power: per record only), one writer or 2-3 concurrent
 * ones, a third of the rings drained like the agent's spool (a consume marker after every
 * third record). Group commit waits 2 ms, not the collector's 20-1000: the protocol is the same and a
 * trial costs a tenth. The crash is a SIGKILL from here after a random 0-20 ms, or, when the
 * shim (ring-crash-shim.so) is preloaded, in half the trials (all with power) the shim's torn
 * write at a random write among the first 300 (60 with group commit) or a power cut there.
 * After each, the ring is opened here and:
 *  - every record it serves is byte-identical to what was written (nothing torn served);
 *  - every acknowledged record from the oldest live one on is served and identical (lost:
 *    not served; damaged: served different);
 *  - with one writer, the oldest live record moved at most by what the one record in flight
 *    can evict (its 8 KiB, the end-of-lap gap, its evict-ahead: 88 records of >= 190 B), and
 *    not at all when nothing newer reached the ring.
 * A failing trial's ring is kept in DIR (fail-T.ring, and the ring before the trial in
 * fail-T.before) and the lineage starts over on a new ring.
 */
static int cmd_crash(char **argv)
{
	const char *dir = argv[2];
	uint64_t trials = strtoull(argv[3], NULL, 0), rnd = strtoull(argv[4], NULL, 0) | 1;
	bool power = !strcmp(argv[5], "power");
	bool shim = dlsym(RTLD_DEFAULT, "rf_shim_arm") != NULL;
	struct crash_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct crash_verify v = { .buf = malloc(8192) };
	struct seq_hash *acked = NULL;
	size_t n_acked = 0, cap_acked = 0, cap_served = 0;
	uint64_t size = 0, last_first = 0, last_seq = 0, t0 = port_clock_mono_ns();
	uint64_t n_trials = 0, n_acks = 0, lost = 0, damaged = 0, failed = 0, torn = 0;
	uint64_t wraps_seen = 0;
	char path[512], before[512], keep[600];
	int threads = 1;
	bool spool = false;

	if (sh == MAP_FAILED || !v.buf)
		return 2;
	if (power && !shim) {
		fprintf(stderr, "store-append: power mode needs LD_PRELOAD=ring-crash-shim.so\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/ring", dir);
	snprintf(before, sizeof(before), "%s/ring.before", dir);
	atomic_store(&sh->next_i, 1);
	for (uint64_t t = 1; t <= trials; t++) {
		unsigned fsync_ms = power || t % 2 ? 0 : 2;
		int shim_mode = 0, status;
		bool jumped, moved;
		unsigned long shim_k = 0;
		uint64_t first, n_new, trial_lost = 0, trial_damaged = 0;
		struct ringfile_stats st;
		struct ringfile *rf;
		char err[256];
		pid_t pid;

		if (!size || t % 40 == 1) {
			/* a new lineage: 64 KiB to 4 MiB, log-uniform, 4 KiB multiples */
			size = (uint64_t)(65536.0 * (1 << (crash_rand(&rnd) % 6)) *
					  (1.0 + (crash_rand(&rnd) % 1000) / 1000.0)) & ~4095ull;
			if (size > (4u << 20))
				size = 4u << 20;
			threads = power || crash_rand(&rnd) % 4 ? 1
							       : 2 + (int)(crash_rand(&rnd) % 2);
			spool = crash_rand(&rnd) % 3 == 0;
			unlink(path);
			n_acked = 0;
			last_first = last_seq = 0;
		}
		if (getenv("KEEP") && !access(path, F_OK))
			copy_file(path, before);
		atomic_store(&sh->n_acks, 0);
		if (shim && (power || crash_rand(&rnd) % 2)) {
			shim_mode = power ? 2 : 1;
			shim_k = 1 + crash_rand(&rnd) % (fsync_ms ? 60 : 300);
		}
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0)
			crash_child(path, size, fsync_ms, threads, spool, shim_mode, shim_k,
				    crash_rand(&rnd), sh);
		if (shim_mode) {
			/* the shim kills it; a writer that never gets there is killed at 2 s */
			for (int k = 0; k < 2000 && waitpid(pid, &status, WNOHANG) == 0; k++)
				usleep(1000);
			kill(pid, SIGKILL);
		} else {
			usleep(crash_rand(&rnd) % 20000);
			kill(pid, SIGKILL);
		}
		waitpid(pid, &status, 0);
		if (!WIFSIGNALED(status)) {
			printf("trial %" PRIu64 ": writer exited %d instead of being killed\n", t,
			       WEXITSTATUS(status));
			failed++;
			size = 0;
			continue;
		}
		n_trials++;
		/* the acknowledgements of this trial join those of the lineage */
		n_new = atomic_load(&sh->n_acks);
		n_new = n_new > CRASH_MAX_ACKS ? CRASH_MAX_ACKS : n_new;
		if (n_acked + n_new > cap_acked) {
			cap_acked = 2 * (n_acked + n_new);
			acked = realloc(acked, cap_acked * sizeof(*acked));
			if (!acked)
				return 2;
		}
		for (uint64_t k = 0; k < n_new; k++) {
			const struct crash_ack *a = &sh->acks[k];

			if (!atomic_load(&a->valid))
				continue;
			atomic_store(&sh->acks[k].valid, 0); /* the next trial's writer reuses it */
			acked[n_acked++] = (struct seq_hash){ a->seq, a->hash };
			n_acks++;
			if (threads == 1) {
				last_first = a->first;
				last_seq = a->seq;
			}
		}
		qsort(acked, n_acked, sizeof(*acked), seq_hash__cmp);

		struct ringfile_opts o = { .quiet = true };

		rf = ringfile__open(path, &o, err, sizeof(err));
		if (!rf) {
			struct stat fst;

			/* killed before the file was created or sized: start over */
			if (n_acked || (!stat(path, &fst) && fst.st_size >= RINGFILE_HDR_SIZE)) {
				printf("trial %" PRIu64 ": reopen failed: %s\n", t, err);
				failed++;
			}
			size = 0;
			continue;
		}
		ringfile__stats(rf, &st);
		if (st.records + 1 > cap_served) {
			cap_served = 2 * (st.records + 1);
			v.served = realloc(v.served, cap_served * sizeof(*v.served));
			if (!v.served)
				return 2;
		}
		v.n = 0;
		v.bad = 0;
		ringfile__foreach(rf, 0, true, crash_verify_cb, &v);
		ringfile__stats(rf, &st);
		ringfile__free(rf);
		if (st.first_seq > 1)
			wraps_seen++;
		torn += st.corrupt;
		first = st.first_seq ? st.first_seq : st.last_seq + 1;
		for (size_t k = 0; k < n_acked; k++) {
			struct seq_hash *s;

			if (acked[k].seq < first)
				continue;
			s = bsearch(&acked[k], v.served, v.n, sizeof(*v.served), seq_hash__cmp);
			if (!s) {
				trial_lost++;
				if (trial_lost <= 5)
					printf("  acknowledged seq %" PRIu64 " missing\n",
					       acked[k].seq);
			} else if (s->hash != acked[k].hash) {
				trial_damaged++;
				printf("  acknowledged seq %" PRIu64 " different\n", acked[k].seq);
			}
		}
		lost += trial_lost;
		damaged += trial_damaged;
		/* consume markers are 80-byte records: more seqs in the same bytes */
		jumped = threads == 1 && last_first && first > last_first + (spool ? 210 : 88);
		moved = threads == 1 && last_seq && st.last_seq == last_seq && !st.corrupt &&
			!st.overwritten && first != last_first;
		if (trial_lost || trial_damaged || v.bad || jumped || moved) {
			printf("trial %" PRIu64 ": ring %" PRIu64 " B, fsync_ms %u, %d writer(s)%s, %s: ",
			       t, size, fsync_ms, threads, spool ? " + consume" : "",
			       shim_mode == 2 ? "power cut"
			       : shim_mode    ? "torn write + SIGKILL"
					      : "SIGKILL");
			printf("lost %" PRIu64 " damaged %" PRIu64 " bad %" PRIu64 "%s%s; first %" PRIu64
			       " (at the last ack %" PRIu64 ") last %" PRIu64 " (last ack %" PRIu64
			       ") records %" PRIu64 " corrupt %" PRIu64 " overwritten %" PRIu64
			       " stale %" PRIu64 "\n", trial_lost, trial_damaged, v.bad,
			       jumped ? ", oldest jumped" : "", moved ? ", oldest moved" : "", first,
			       last_first, st.last_seq, last_seq, st.records, st.corrupt,
			       st.overwritten, st.stale);
			failed++;
			snprintf(keep, sizeof(keep), "%s/fail-%" PRIu64 ".ring", dir, t);
			copy_file(path, keep);
			if (getenv("KEEP")) {
				snprintf(keep, sizeof(keep), "%s/fail-%" PRIu64 ".before", dir, t);
				copy_file(before, keep);
			}
			size = 0; /* start over on a new ring */
			if (failed >= 20)
				break;
			continue;
		}
		/* what can still be in the ring */
		{
			size_t k = 0;

			for (size_t j = 0; j < n_acked; j++)
				if (acked[j].seq >= first)
					acked[k++] = acked[j];
			n_acked = k;
		}
		if (threads == 1) {
			last_first = first;
			last_seq = st.last_seq;
		}
	}
	printf("mode=%s trials=%" PRIu64 " acked=%" PRIu64 " lost=%" PRIu64 " damaged=%" PRIu64
	       " failed_trials=%" PRIu64 " torn_seen=%" PRIu64 " wrapped_rings=%" PRIu64
	       " shim=%s seconds=%.1f\n", power ? "power" : "kill", n_trials, n_acks, lost,
	       damaged, failed, torn, wraps_seen, shim ? "yes" : "no",
	       (port_clock_mono_ns() - t0) / 1e9);
	free(acked);
	free(v.served);
	free(v.buf);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "append"))
		return cmd_append(argv);
	if (argc == 3 && !strcmp(argv[1], "verify"))
		return cmd_verify(argv);
	if (argc == 7 && !strcmp(argv[1], "bench"))
		return cmd_bench(argv);
	if (argc == 6 && !strcmp(argv[1], "crash"))
		return cmd_crash(argv);
	fprintf(stderr, "usage: store-append append PATH SIZE FSYNC_MS COUNT START\n"
			"       store-append verify PATH\n"
			"       store-append bench PATH SIZE FSYNC_MS COUNT LEN\n"
			"       store-append crash DIR TRIALS SEED kill|power\n");
	return 2;
}
