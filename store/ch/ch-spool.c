// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-spool.c — the ClickHouse backend's durable queue (--ch-spool FILE): an upload is
 * acknowledged once it is in a ring file (port/ringfile.c, as the agent's spool), not once
 * ClickHouse has it, so that ClickHouse may restart, or be down for a while, without an upload
 * waiting or being refused, and a collector killed with acknowledged uploads not yet in
 * ClickHouse sends them after its restart.
 *
 * A record is the upload as received (metadata, and its gzip pprof after the profile's 64-bit
 * id, so that a replay after a restart has the same id and is looked up before it is sent
 * again: a batch may have landed just before the kill, and not been consumed).
 *
 * Order: the record's seq is taken under the store's lock together with the rows' place in the
 * batches, so the batches hold seqs in order; a batch in ClickHouse consumes up to its last seq.
 * While the memory queue is full (CONFIG_COLLECTOR_CH_QUEUE_MB) and ClickHouse takes batches, an
 * upload waits for room (up to CONFIG_COLLECTOR_CH_WAIT_MS: back-pressure, decoded once); when
 * it fails, or the wait ends without room, uploads only go to the spool (spilled): the writer reads them back, decodes them and builds their rows once the memory
 * batches before them are sent, and new uploads go to memory again only once it caught up.
 *
 * Bounded: the spool never overwrites what is not in ClickHouse. An upload is refused (503, the
 * device keeps it) when the unconsumed records, it, and a margin (the ring's end-of-lap gap and
 * consume markers: 1/16 of the ring and twice the largest record) would not fit; counted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "port/log.h"
#include "port/ringfile.h"
#include "store/ch/ch-store.h"

#define SPOOL_ID_BYTES 8u
/*
 * A record of a duty-cycled upload: its weight (u32, milli) follows the id, so that a replay
 * weighs the decoded profile as its first decode was (the upload's bytes are as sent). A
 * record flag (RINGFILE_F_USER_MASK), cleared when read back: records without it read as before.
 */
#define SPOOL_F_WEIGHT 0x0800u
#define SPOOL_WEIGHT_BYTES 4u

static int pending_cb(void *ctx, uint64_t seq, const struct record_meta *meta,
		      const void *payload, size_t len)
{
	struct ch_store *c = ctx;
	size_t n = ringfile__record_size(meta, len);

	(void)seq, (void)payload;
	c->spool_pending += n;
	if (n > c->spool_max_rec)
		c->spool_max_rec = n;
	return 0;
}

int ch_spool__open(struct ch_store *c, const struct store_opts *opts,
		   const struct ch_batch_ops *ops, char *err, size_t errlen)
{
	struct ringfile_opts o = { .size = opts->size, .fsync_ms = opts->fsync_ms, .create = true };
	const char *path = opts->ch_spool;
	struct ringfile_stats st;

	c->batch_ops = ops;
	if (!o.size && access(path, F_OK))
		o.size = (uint64_t)CONFIG_COLLECTOR_CH_SPOOL_MB << 20;
	c->spool = ringfile__open(path, &o, err, errlen);
	if (!c->spool)
		return -errno;
	ringfile__stats(c->spool, &st);
	c->spool_capacity = st.capacity;
	if (st.last_seq > st.consumed_seq) {
		uint64_t from = st.consumed_seq + 1;

		if (from < st.first_seq)
			from = st.first_seq;
		ringfile__foreach(c->spool, from, false, pending_cb, c);
		c->spill_from = from;
		c->spill_to = st.last_seq;
		c->spool_boot_last = st.last_seq;
		pr_info("clickhouse: spool %s: %zu bytes not yet in ClickHouse (records %" PRIu64
			"..%" PRIu64 "): sent first", path, c->spool_pending, from, st.last_seq);
	}
	return 0;
}

bool ch_spool__admits(const struct ch_store *c, size_t n)
{
	size_t big = n > c->spool_max_rec ? n : c->spool_max_rec;

	return c->spool_pending + 2 * n + 2 * big + c->spool_capacity / 16 <= c->spool_capacity;
}

/* Records seq as spilled: its rows are read back from the spool (lock held). */
static void spill(struct ch_store *c, uint64_t from, uint64_t to)
{
	if (!c->spill_from || from < c->spill_from)
		c->spill_from = from;
	if (to > c->spill_to)
		c->spill_to = to;
}

/*
 * Under the lock: admission, the record's place (its seq), its rows or a spill, its key. Rows
 * not built (r->profile empty: uploads were spilling when it came) spill.
 */
static int spool_put_locked(struct ch_store *c, const struct record_meta *meta,
			    const unsigned char *idb, size_t pre, const void *payload, size_t len,
			    const struct pprof_profile *p, struct put_rows *r, uint64_t id,
			    uint64_t kh, struct ringfile_append *ap)
{
	size_t need = ringfile__record_size(meta, pre + len),
	       rows = r->samples.len + r->profile.len;
	uint64_t gen;
	int e;

	/* while ClickHouse takes batches, wait for room rather than spill (or be refused) */
	if (r->profile.len)
		c->batch_ops->wait_room(c, rows, need);
	if (!ch_spool__admits(c, need)) {
		c->spool_refused++;
		return -ENOSPC;
	}
	e = ringfile__append_begin_pre(c->spool, meta, idb, pre, payload, len, ap);
	if (e)
		return e;
	c->spool_pending += need;
	if (need > c->spool_max_rec)
		c->spool_max_rec = need;
	e = -ENOSPC;
	if (!c->spill_from && r->profile.len && c->queued_bytes + rows <= c->queue_bytes) {
		struct ch_put w = { .id = id, .seq = ap->seq, .spool_bytes = need };

		e = c->batch_ops->put_locked(c, meta, p, r, &w, &gen);
	}
	if (e) {
		c->spool_spilled++;
		spill(c, ap->seq, ap->seq);
		pthread_cond_signal(&c->refill);
	}
	if (kh)	/* with a spool: the record a retry waits for */
		c->batch_ops->key_set(c, kh, id, ap->seq);
	c->puts++;
	return 0;
}

/*
 * The record is the id (and a duty weight), then the upload: written from both (not copied
 * together first).
 */
int ch_spool__put(struct ch_store *c, const struct record_meta *meta, const void *payload,
		  size_t len, const struct pprof_profile *p, struct put_rows *r, uint64_t id,
		  uint64_t kh, uint64_t *seq)
{
	unsigned char idb[SPOOL_ID_BYTES + SPOOL_WEIGHT_BYTES];
	struct record_meta m = *meta;
	size_t pre = SPOOL_ID_BYTES;
	struct ringfile_append ap;
	int e;

	for (unsigned i = 0; i < SPOOL_ID_BYTES; i++)
		idb[i] = (unsigned char)(id >> (8 * i));
	if (m.weight_milli && m.weight_milli != 1000) {
		for (unsigned i = 0; i < SPOOL_WEIGHT_BYTES; i++)
			idb[pre + i] = (unsigned char)(m.weight_milli >> (8 * i));
		pre += SPOOL_WEIGHT_BYTES;
		m.flags |= SPOOL_F_WEIGHT;
	}
	pthread_mutex_lock(&c->lock);
	e = spool_put_locked(c, &m, idb, pre, payload, len, p, r, id, kh, &ap);
	if (e)
		c->put_errors++;
	pthread_mutex_unlock(&c->lock);
	if (!e) {
		e = ringfile__append_finish(c->spool, &ap);
		if (!e)
			e = ringfile__wait_durable(c->spool, ap.seq);
		*seq = ap.seq;
	}
	return e;
}

/*
 * One spilled record's rows (lock not held): 0, -ENOENT (a consume marker's seq: nothing
 * to send), or another error (unreadable: lost, counted).
 */
static int spool_read(struct ch_store *c, uint64_t seq, struct record_meta *meta,
		      struct put_rows *r, struct pprof_profile **p, struct ch_put *w,
		      void **buf)
{
	const unsigned char *b;
	size_t len, pre = SPOOL_ID_BYTES;
	uint32_t weight = 0;
	char err[200];
	int e = ringfile__read(c->spool, seq, meta, buf, &len);

	if (e == -ENOENT)	/* a consume marker, or overwritten (never while unconsumed) */
		return seq >= ringfile__first_seq(c->spool) ? -ENOENT : -ESTALE;
	if (e)
		return e;
	if (meta->flags & SPOOL_F_WEIGHT)
		pre += SPOOL_WEIGHT_BYTES;
	if (len < pre)
		return -EIO;
	b = *buf;
	w->id = 0;
	for (unsigned i = 0; i < SPOOL_ID_BYTES; i++)
		w->id |= (uint64_t)b[i] << (8 * i);
	for (unsigned i = 0; pre > SPOOL_ID_BYTES && i < SPOOL_WEIGHT_BYTES; i++)
		weight |= (uint32_t)b[SPOOL_ID_BYTES + i] << (8 * i);
	w->seq = seq;
	w->spool_bytes = ringfile__record_size(meta, len);
	meta->flags &= (uint16_t)~SPOOL_F_WEIGHT;
	meta->weight_milli = weight;
	/* only a record from before this start may be in ClickHouse already (a batch that
	 * landed just before a kill -9): one spilled since was never sent, and a lookup per
	 * batch costs ClickHouse a read of samples just when it is behind */
	w->lookup = seq <= c->spool_boot_last;
	e = pprof_read(b + pre, len - pre, &ch_read_limits, p, err, sizeof(err));
	if (e)
		return -EIO;
	if (weight && weight != 1000)	/* as api.c weighed it before it spilled */
		pprof_profile__weigh(*p, weight);
	return c->batch_ops->rows_build(meta, *p, len - pre, w->id, r);
}

/* Refills the open batch from spilled records, then seals it (lock held): records read. */
static size_t ch_spool__replay(struct ch_store *c)
{
	size_t n = 0;

	while (c->spill_from && !c->stop && (!c->open || !ch_batch_full(c, c->open))) {
		uint64_t seq = c->spill_from, gen;
		struct pprof_profile *p = NULL;
		struct put_rows r = { 0 };
		struct record_meta meta;
		struct ch_put w = { 0 };
		void *buf = NULL;
		int e;

		pthread_mutex_unlock(&c->lock);
		e = spool_read(c, seq, &meta, &r, &p, &w, &buf);
		pthread_mutex_lock(&c->lock);
		if (!e)
			e = c->batch_ops->put_locked(c, &meta, p, &r, &w, &gen);
		if (e == -ENOMEM || e == -ENOSPC) {
			/* the batch was dropped (its records respilled) or memory is full */
			c->batch_ops->rows_free(&r);
			pprof_profile__free(p);
			free(buf);
			break;
		}
		if (!e)
			c->spool_replayed++;
		if (e && e != -ENOENT) {
			if (!c->spool_lost++)
				pr_warn("clickhouse: spool record %" PRIu64 " unreadable (%s): lost",
					seq, strerror(-e));
		}
		if (c->spill_from == seq)
			c->spill_from = seq >= c->spill_to ? 0 : seq + 1;
		n++;
		c->batch_ops->rows_free(&r);
		pprof_profile__free(p);
		free(buf);
	}
	c->batch_ops->seal(c);
	return n;
}

/*
 * Whether the replayer may build another batch: at most CH_REPLAY_AHEAD sealed ones wait, and
 * a whole batch fits in the memory queue (or it is empty: a queue smaller than a batch), so
 * that a record is seldom decoded and then found not to fit (decoded again later).
 */
static bool replay_room(const struct ch_store *c)
{
	unsigned n = 0;

	for (const struct ch_batch *b = c->head; b && n < CH_REPLAY_AHEAD; b = b->next)
		n++;
	return n < CH_REPLAY_AHEAD && (!c->queued_bytes ||
				       c->queued_bytes + c->batch_bytes <= c->queue_bytes);
}

/*
 * The replayer thread: reads spilled records back, decodes them and builds their batches while
 * the writer sends the batches before them, so that decoding overlaps ClickHouse's INSERTs
 * (it was the writer's, in turn with them: the drain of a spool was decode, wait, decode).
 * Order holds: records are read in seq order, and new uploads go to memory only once it
 * caught up. Bounded: CH_REPLAY_AHEAD sealed batches, and the memory queue.
 */
void *ch_spool__replayer(void *arg)
{
	struct ch_store *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		struct timespec ts;

		if (c->spill_from && replay_room(c) && ch_spool__replay(c)) {
			pthread_cond_signal(&c->wake);
			continue;	/* else the queue is full: wait for a batch to be in */
		}
		/*
		 * Spilled records waiting: look again in 20 ms (room in the queue). None: a
		 * spill signals refill, so this wait is only a safety net (it woke the thread
		 * 50 times a second for nothing: ~0.2 futex calls per upload at 900 uploads/s).
		 */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (c->spill_from ? 20 : 1000) * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&c->refill, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

void ch_spool__done(struct ch_store *c, const struct ch_batch *b)
{
	int e = 0;

	if (b->last_seq)
		e = ringfile__consume(c->spool, b->last_seq, false);
	pthread_mutex_lock(&c->lock);
	c->spool_pending -= b->spool_bytes < c->spool_pending ? b->spool_bytes : c->spool_pending;
	pthread_mutex_unlock(&c->lock);
	if (e)
		pr_warn("clickhouse: spool: marking records sent: %s", strerror(-e));
}

void ch_spool__respill(struct ch_store *c, const struct ch_batch *b)
{
	if (b->first_seq) {
		spill(c, b->first_seq, b->last_seq);
		pthread_cond_signal(&c->refill);
	}
}
