// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-ingest.c — the ClickHouse backend's put(): an upload's rows (ch-rows.c) appended
 * to the open batch under the lock, which then waits until its batch is in ClickHouse (the
 * writer, ch-writer.c) or, with --ch-spool, until its record is durable (ch-spool.c). A batch
 * is sealed when it holds CONFIG_COLLECTOR_CH_BATCH_KB or CH_BATCH_ROWS rows, or is
 * CONFIG_COLLECTOR_CH_BATCH_MS old. The queue is bounded by CONFIG_COLLECTOR_CH_QUEUE_MB: beyond
 * it a put waits for room while ClickHouse takes batches, up to CONFIG_COLLECTOR_CH_WAIT_MS
 * (back-pressure); then, or at once while INSERTs fail, it is refused (503 with Retry-After:
 * the device's spool keeps the profile). A put whose batch is not in within
 * CONFIG_COLLECTOR_CH_ACK_MS answers 503, and a retry of its key waits for the same batch (no
 * duplicate). Also the batches' buffers, kept from one batch to the next.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "port/log.h"
#include "port/rand.h"
#include "store/ch/ch-store.h"

/* Idempotency keys seen (hash of the key -> profile id, batch): bounded like the id sets. */
static struct keyent *keymap__find(struct keymap *m, uint64_t kh, bool add)
{
	size_t i = kh & (m->cap - 1);

	while (m->v[i].kh) {
		if (m->v[i].kh == kh)
			return &m->v[i];
		i = (i + 1) & (m->cap - 1);
	}
	if (!add)
		return NULL;
	if (m->n >= m->cap / 4 * 3) {
		memset(m->v, 0, m->cap * sizeof(*m->v));
		m->n = 0;
		return keymap__find(m, kh, add);
	}
	m->n++;
	m->v[i].kh = kh;
	return &m->v[i];
}

void ch_batch__free(struct ch_batch *b)
{
	if (!b)
		return;
	for (int t = 0; t < T__N; t++)
		rb_free(&b->rows[t]);
	free(b->marks);
	free(b);
}

/* A new open batch (lock held): the spare, with a sent batch's emptied buffers, if any. */
static struct ch_batch *batch__new(struct ch_store *c)
{
	struct ch_batch *b = c->spare;

	if (!b)
		return calloc(1, sizeof(*b));
	c->spare = NULL;
	return b;
}

/*
 * What the writer keeps (lock held): the spare's buffers and its scratch, trimmed to max bytes
 * of capacity, the largest freed first.
 */
static void ch__keep_trim(struct ch_store *c, size_t max)
{
	struct rb *v[T__N + 5] = { &c->scratch.rrows, &c->scratch.slots, &c->scratch.native,
				   &c->scratch.seg, &c->scratch.key };
	size_t n = 5;

	for (int t = 0; c->spare && t < T__N; t++)
		v[n++] = &c->spare->rows[t];
	rb_keep_within(v, n, max);
}

/*
 * A sent batch (lock held): its buffers, emptied, become the spare that the next batch fills
 * (a batch's rows grow to about CONFIG_COLLECTOR_CH_BATCH_KB: faulted in anew for every batch
 * otherwise), unless there is one already; then the kept buffers are trimmed to the bound.
 */
void ch_batch__recycle(struct ch_store *c, struct ch_batch *b)
{
	struct ch_batch keep = { .marks = b->marks, .cap_marks = b->cap_marks };

	if (c->spare || !c->keep_bytes) {
		ch_batch__free(b);
	} else {
		for (int t = 0; t < T__N; t++)
			keep.rows[t] = (struct rb){ .p = b->rows[t].p, .cap = b->rows[t].cap };
		*b = keep;
		c->spare = b;
	}
	ch__keep_trim(c, c->keep_bytes);
}

/* After CH_KEEP_IDLE_NS without a batch sent (lock held): nothing kept. */
void ch__keep_idle(struct ch_store *c)
{
	if (!c->last_sent_ns || port_clock_mono_ns() - c->last_sent_ns < CH_KEEP_IDLE_NS)
		return;
	ch__keep_trim(c, 0);
	ch_batch__free(c->spare);
	c->spare = NULL;
	c->last_sent_ns = 0;
}

static size_t batch__bytes(const struct ch_batch *b)
{
	size_t n = 0;

	for (int t = 0; t < T__N; t++)
		n += b->rows[t].len;
	return n;
}


static bool gen_dropped(const struct ch_store *c, uint64_t gen)
{
	for (unsigned i = 0; i < CH_DROPPED_GENS && i < c->n_dropped; i++)
		if (c->dropped_gen[i] == gen)
			return true;
	return false;
}

/* The CLOCK_REALTIME time ms from now, for pthread_cond_timedwait. */
static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Waits (lock held) until batch gen is in ClickHouse: 0, or -EIO after ack_ms or if dropped. */
static int ch__wait(struct ch_store *c, uint64_t gen)
{
	struct timespec ts;
	int e = 0;

	deadline_in(&ts, c->ack_ms);
	while (c->done_gen < gen && !gen_dropped(c, gen) && !e)
		e = pthread_cond_timedwait(&c->done, &c->lock, &ts);
	if (c->done_gen >= gen)
		return 0;
	if (!gen_dropped(c, gen))
		c->ack_timeouts++;
	return -EIO;
}

/* Whether an upload's rows (and its record: rec, 0 without a spool) fit now (lock held). */
static bool ch__room(const struct ch_store *c, size_t rows, size_t rec)
{
	return !c->spill_from && c->queued_bytes + rows <= c->queue_bytes &&
	       (!c->spool || ch_spool__admits(c, rec));
}

/*
 * Back-pressure: while ClickHouse takes batches, an upload that finds the queue full waits
 * for batches to go in rather than spill (its rows thrown away, decoded again when read back)
 * or be refused, so that clients slow to ClickHouse's rate. Not when ClickHouse fails (the
 * spool is for that): a failed INSERT wakes the waiters. Bounded by wait_ms; a waiter holds
 * its connection's thread, so at most the listeners' --max-conns wait.
 */
bool ch__wait_room(struct ch_store *c, size_t rows, size_t rec)
{
	struct timespec ts;
	uint64_t t0;
	bool room = ch__room(c, rows, rec);

	if (room || !c->wait_ms || !c->ch_ok || c->stop || rows > c->queue_bytes)
		return room;
	t0 = port_clock_mono_ns();
	deadline_in(&ts, c->wait_ms);
	c->waits++;
	c->waiting++;
	while (!room && c->ch_ok && !c->stop &&
	       pthread_cond_timedwait(&c->done, &c->lock, &ts) != ETIMEDOUT)
		room = ch__room(c, rows, rec);
	room = ch__room(c, rows, rec);
	c->waiting--;
	if (!room)
		c->wait_timeouts++;
	c->wait_ns += port_clock_mono_ns() - t0;
	return room;
}

/*
 * Out of memory while adding to the open batch (lock held): its buffers are incomplete, so the
 * whole batch is dropped (none of it was acknowledged): its waiters get -EIO, its keys are
 * forgotten (a retry stores anew), and every dictionary row is sent again from now on.
 */
static void ch__drop_open(struct ch_store *c)
{
	struct ch_batch *b = c->open;

	if (c->spool) {
		pr_warn("clickhouse: out of memory building a batch: its %zu uploads are read "
			"back from the spool", b->n_profiles);
		ch_spool__respill(c, b);
	} else {
		pr_warn("clickhouse: out of memory building a batch: its %zu uploads are refused",
			b->n_profiles + 1);
		c->dropped_gen[c->n_dropped++ % CH_DROPPED_GENS] = b->gen;
		for (size_t i = 0; i < c->keys.cap; i++)
			if (c->keys.v[i].kh && c->keys.v[i].gen == b->gen)
				c->keys.v[i].id = 0; /* a tombstone: the probe chain stays intact */
	}
	idset__clear(&c->fns), idset__clear(&c->maps);
	idset__clear(&c->locs), idset__clear(&c->stacks);
	c->queued_bytes -= b->bytes;
	c->open = NULL;
	ch_batch__free(b);
	pthread_cond_broadcast(&c->done);
}

int ch__put_locked(struct ch_store *c, const struct record_meta *meta,
		   const struct pprof_profile *p, struct put_rows *r, const struct ch_put *w,
		   uint64_t *gen)
{
	struct ch_batch *b = c->open;
	size_t before;

	if (c->queued_bytes + r->samples.len + r->profile.len > c->queue_bytes) {
		c->refused_full++;
		return -ENOSPC;
	}
	if (!b) {
		b = c->open = batch__new(c);
		if (!b)
			return -ENOMEM;
		b->gen = ++c->next_gen;
		b->id = port_rand_u64();
		c->open_since = port_clock_mono_ns();
	}
	if (b->n_marks == b->cap_marks) {
		size_t cap = b->cap_marks ? 2 * b->cap_marks : 64;
		struct pmark *m = realloc(b->marks, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		b->marks = m;
		b->cap_marks = cap;
	}
	before = batch__bytes(b);
	ch__rows_dict(c, b, p, r);
	b->marks[b->n_marks] = (struct pmark){
		.id = w->id, .series = ch__series_of(meta),
		.grp = ch__group_of_meta(c->group_without, meta),
		.ts = meta->time_ns,
		.keyed = (meta->key && *meta->key) || w->lookup, .replay = w->lookup,
		.s_off = b->rows[T_SAMPLES].len, .s_len = r->samples.len,
		.p_off = b->rows[T_PROFILES].len, .p_len = r->profile.len,
	};
	rb_put(&b->rows[T_SAMPLES], r->samples.p, r->samples.len);
	rb_put(&b->rows[T_PROFILES], r->profile.p, r->profile.len);
	for (int t = 0; t < T__N; t++) {
		if (b->rows[t].oom) {
			ch__drop_open(c);
			return -ENOMEM;
		}
	}
	c->rows[T_SAMPLES] += r->n_samples;
	c->rows[T_PROFILES]++;
	b->n_profiles++;
	b->n_rows += r->n_samples;
	b->n_marks++;
	b->dirty |= w->lookup; /* replayed at start: batch__mark_dirty */
	if (w->seq) {
		b->first_seq = b->first_seq ? b->first_seq : w->seq;
		b->last_seq = w->seq;
		b->spool_bytes += w->spool_bytes;
	}
	b->bytes = batch__bytes(b);
	c->queued_bytes += b->bytes - before;
	*gen = b->gen;
	if (ch_batch_full(c, b))
		pthread_cond_signal(&c->wake);
	return 0;
}

void ch__key_set(struct ch_store *c, uint64_t kh, uint64_t id, uint64_t gen)
{
	struct keyent *k = keymap__find(&c->keys, kh, true);

	if (k) {
		k->id = id;
		k->gen = gen;
	}
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(((const struct record_label *)a)->key, ((const struct record_label *)b)->key);
}

static int ch__put_sorted(struct ch_store *c, const struct record_meta *meta,
			  const void *payload, size_t len, const struct pprof_profile *decoded,
			  uint64_t *seq_out, bool *duplicate);

/* Labels sorted by key (as the ring stores them): one label set, one series, in any order. */
int ch__put(struct store *base, const struct record_meta *meta, const void *payload,
		   size_t len, const struct pprof_profile *decoded, uint64_t *seq_out,
		   bool *duplicate)
{
	struct record_label labels[STORE_MAX_LABELS];
	struct record_meta m = *meta;

	if (m.n_labels > STORE_MAX_LABELS)
		return -EINVAL;
	if (m.n_labels)
		memcpy(labels, meta->labels, m.n_labels * sizeof(*labels));
	qsort(labels, m.n_labels, sizeof(*labels), label_cmp);
	m.labels = labels;
	return ch__put_sorted(ch_of(base), &m, payload, len, decoded, seq_out, duplicate);
}

static int ch__put_sorted(struct ch_store *c, const struct record_meta *meta,
			  const void *payload, size_t len, const struct pprof_profile *decoded,
			  uint64_t *seq_out, bool *duplicate)
{
	struct pprof_profile *own = NULL;
	struct put_rows r = { 0 };
	struct keyent *k = NULL;
	uint64_t id = 0, gen = 0, kh = meta->key && *meta->key ? ch__key_hash(meta) : 0;
	char err[200];
	int e;

	*duplicate = false;
	if (kh) {
		pthread_mutex_lock(&c->lock);
		k = keymap__find(&c->keys, kh, false);
		if (k && k->id) {
			id = k->id, gen = k->gen;
			c->duplicates++;
			if (c->spool) {	/* gen is its record: acked once that is durable */
				pthread_mutex_unlock(&c->lock);
				e = ringfile__wait_durable(c->spool, gen);
			} else {
				e = ch__wait(c, gen);
				pthread_mutex_unlock(&c->lock);
			}
			*duplicate = true;
			*seq_out = id;
			return e;
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (!decoded) {
		e = pprof_read(payload, len, &ch_read_limits, &own, err, sizeof(err));
		if (e)
			return -EINVAL;
		decoded = own;
	}
	id = ch__new_id(meta);
	if (c->spool) {
		bool spilling;

		/* while uploads spill because ClickHouse fails, their rows would be thrown away
		 * and built again when read back: not built; while it takes batches, the
		 * upload may wait for room (ch__wait_room) and needs them */
		pthread_mutex_lock(&c->lock);
		spilling = c->spill_from && (!c->ch_ok || !c->wait_ms);
		pthread_mutex_unlock(&c->lock);
		e = spilling ? 0 : ch__rows_build(meta, decoded, len, id, &r);
		if (!e)
			e = ch_spool__put(c, meta, payload, len, decoded, &r, id, kh, &gen);
		ch__rows_free(&r);
		pprof_profile__free(own);
		*seq_out = id;
		return e;	/* -ENOSPC: the spool is full */
	}
	e = ch__rows_build(meta, decoded, len, id, &r);
	pthread_mutex_lock(&c->lock);
	if (!e)
		ch__wait_room(c, r.samples.len + r.profile.len, 0);
	if (!e)
		e = ch__put_locked(c, meta, decoded, &r, &(struct ch_put){ .id = id }, &gen);
	if (!e && kh)
		ch__key_set(c, kh, id, gen);
	if (!e) {
		c->puts++;
		e = ch__wait(c, gen);
	}
	if (e)
		c->put_errors++;
	pthread_mutex_unlock(&c->lock);
	ch__rows_free(&r);
	pprof_profile__free(own);
	*seq_out = id;
	return e == -ENOSPC ? -EBUSY : e;	/* the queue is full */
}

void ch__seal(struct ch_store *c)
{
	struct ch_batch *b = c->open;

	if (!b)
		return;
	c->open = NULL;
	if (c->tail)
		c->tail->next = b;
	else
		c->head = b;
	c->tail = b;
}

