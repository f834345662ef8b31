// SPDX-License-Identifier: MIT
/*
 * port/ringfile.c — the ring file (format and rules in ringfile.h).
 *
 * In memory we keep one small slot per live sequence number (offset, length, flags, time) in a
 * circular array: seqs are dense, so slot(seq) is O(1), and a seq whose record was torn or
 * corrupt is a hole (len 0) that is never served.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/file.h"
#include "port/log.h"
#include "port/rand.h"
#include "port/crc32c.h"
#include "port/ringfile.h"

#define HDR_MAGIC	"EPRING\0\1"
#define HDR_VERSION	1u
#define HDR_CRC_OFF	48u
#define HDR_WM_OFF	56u	/* the eviction watermark: u64 seq, u32 generation, u32 CRC */
#define HDR_WM_LEN	16u
#define REC_MAGIC	0x43525045u /* "EPRC" */
#define REC_ALIGN	8u

struct rf_slot {
	uint64_t off;	/* 0 = hole (torn/corrupt, never served) */
	uint64_t time_ns;
	uint32_t len;	/* total record length (unpadded) */
	uint16_t flags;
	bool pending;	/* reserved, its pwrite not finished: not readable, not evictable */
};

struct ringfile {
	int fd;
	char *path;
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* durable_seq advanced or a sync finished */
	pthread_cond_t written;	/* a pending record was written: signalled only when awaited */
	unsigned written_waiters;
	/*
	 * ringfile__wait_durable waits for the sync that will cover its record: sync number g
	 * broadcasts synced[g & 1] when it ends. A record written after the running sync began
	 * waits for the next one, and sleeps through the end of this one: all waited on cond, and
	 * fdatasync being slow here (10-50 ms) most uploads came in during a sync, were woken by
	 * its end only to find the next one running and wait again, each time all of them queueing
	 * for the lock (~2.2 context switches per upload in wait_durable at 750 uploads/s).
	 * One waiter of the next sync waits for its group-commit deadline (leading) and begins
	 * it; the end of a sync wakes one of the next one's when none leads.
	 * The waits are futex waits on sync_word[g & 1], bumped for every wake of its waiters,
	 * not a condition variable: a waiter woken by the end of the sync that covers its record
	 * sees durable_seq (atomic) past it and leaves without taking the lock again. With a
	 * condition variable each of the N woken waiters queued for the mutex (a futex wait and a
	 * wake each: ~2 of the ~4.4 futex calls per upload of tests/bench/fleet-bench.sh).
	 */
	atomic_uint sync_word[2];
	atomic_uint sync_waiters[2];
	uint64_t sync_gen;	/* syncs begun */
	uint64_t sync_target;	/* the running sync covers the records up to it */
	bool leading;
	uint64_t size, data_off, data_end;
	uint32_t gen;
	uint64_t head;		/* where the next record goes */
	/* slots for seqs [first_seq, next_seq): slots[(slot0 + seq - first_seq) % cap] */
	struct rf_slot *slots;
	size_t cap, slot0;
	uint64_t first_seq, next_seq;
	uint64_t consumed;
	uint64_t live_records, live_bytes;
	unsigned fsync_ms;
	uint64_t written_seq;	/* every record up to it is written (none pending) */
	/*
	 * Eviction is declared before it happens (see rf__reserve_locked): every record carries
	 * as its watermark the oldest seq that survives both its own write and the next record
	 * of up to max_need bytes, so that when that next write is torn by a crash, the record
	 * before it already tells the scan that what it was overwriting is gone.
	 * wm_reserved: the highest watermark declared so far (by a record reserved, written or
	 * not, or by the header); wm_written: by a record whose write is complete or by the
	 * header. A record may write over records below wm_written only: appends wait for it.
	 */
	uint64_t wm_reserved;
	_Atomic uint64_t wm_written;
	uint64_t hdr_wm;	/* watermark in the header block (0: none) */
	uint64_t max_need;	/* largest record (aligned) seen: the evict-ahead */
	_Atomic uint64_t durable_seq;	/* written under the lock; read without it by waiters */
	size_t pending;		/* records reserved and not yet written */
	uint64_t dirty_since_ns; /* mono time of the oldest unsynced write, 0 = clean */
	bool syncing, broken;
	bool foreign;		/* at open: neither our header, nor zeros, nor any record */
	struct ringfile_stats st; /* counters only; the rest is filled in by stats() */
};

/* ---- little-endian helpers ---------------------------------------------------------------- */

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = v >> (8 * i);
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = v >> (8 * i);
}

static inline uint16_t get16(const uint8_t *p)
{
	return p[0] | (uint16_t)p[1] << 8;
}

static inline uint32_t get32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static inline uint64_t align8(uint64_t v)
{
	return (v + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
}

/* ---- record header ------------------------------------------------------------------------ */

struct rec_hdr {
	uint16_t hdr_len, flags;
	uint32_t total, crc, gen, payload_len;
	uint64_t seq, time_ns, wm_oldest, wm_consumed;
};

static void rec__put_fixed(uint8_t *p, const struct rec_hdr *h)
{
	put32(p, REC_MAGIC);
	put16(p + 4, h->hdr_len);
	put16(p + 6, h->flags);
	put32(p + 8, h->total);
	put32(p + 12, 0);
	put64(p + 16, h->seq);
	put64(p + 24, h->time_ns);
	put64(p + 32, h->wm_oldest);
	put64(p + 40, h->wm_consumed);
	put32(p + 48, h->gen);
	put32(p + 52, h->payload_len);
}

/* Decodes and sanity-checks the fixed header (not the CRC): false when it cannot be a record. */
static bool rec__get_fixed(const uint8_t *p, uint64_t room, struct rec_hdr *h)
{
	if (room < RINGFILE_REC_FIXED || get32(p) != REC_MAGIC)
		return false;
	h->hdr_len = get16(p + 4);
	h->flags = get16(p + 6);
	h->total = get32(p + 8);
	h->crc = get32(p + 12);
	h->seq = get64(p + 16);
	h->time_ns = get64(p + 24);
	h->wm_oldest = get64(p + 32);
	h->wm_consumed = get64(p + 40);
	h->gen = get32(p + 48);
	h->payload_len = get32(p + 52);
	return h->hdr_len >= RINGFILE_REC_FIXED && h->total <= room &&
	       (uint64_t)h->hdr_len + h->payload_len == h->total;
}

static uint32_t rec__crc(const uint8_t *rec, size_t len)
{
	static const uint8_t zero[4];
	uint32_t c = crc32c(0, rec, 12);

	c = crc32c(c, zero, 4);
	return crc32c(c, rec + 16, len - 16);
}

static size_t meta__str_len(const char *s)
{
	return s ? strlen(s) : 0;
}

/* Metadata bytes for meta, or 0 with -EINVAL in *err when something is too long. */
static size_t meta__encoded_len(const struct record_meta *m, int *err)
{
	const char *strs[4] = { m->service, m->type, m->device, m->key };
	size_t n = 2;

	*err = 0;
	if (m->n_labels > RINGFILE_MAX_LABELS || (m->n_labels && !m->labels)) {
		*err = -EINVAL;
		return 0;
	}
	for (int i = 0; i < 4; i++) {
		size_t l = meta__str_len(strs[i]);

		if (l > RINGFILE_MAX_STR)
			*err = -EINVAL;
		n += 2 + l;
	}
	for (size_t i = 0; i < m->n_labels; i++) {
		size_t kl = meta__str_len(m->labels[i].key), vl = meta__str_len(m->labels[i].value);

		if (!kl || kl > RINGFILE_MAX_STR || vl > RINGFILE_MAX_STR)
			*err = -EINVAL;
		n += 4 + kl + vl;
	}
	n += 8; /* value */
	if (m->weight_milli && m->weight_milli != 1000)
		n += 4; /* weight: only when there is one (records stay as they were) */
	return *err ? 0 : n;
}

static uint8_t *meta__put_str(uint8_t *p, const char *s)
{
	size_t l = meta__str_len(s);

	put16(p, l);
	if (l)
		memcpy(p + 2, s, l);
	return p + 2 + l;
}

static int label__cmp(const void *a, const void *b)
{
	const struct record_label *x = a, *y = b;

	return strcmp(x->key, y->key);
}

/* Writes the metadata block; labels are sorted by key, a duplicate key is -EINVAL. */
static int meta__encode(uint8_t *p, const struct record_meta *m)
{
	struct record_label sorted[RINGFILE_MAX_LABELS];

	p = meta__put_str(p, m->service);
	p = meta__put_str(p, m->type);
	p = meta__put_str(p, m->device);
	p = meta__put_str(p, m->key);
	if (m->n_labels) {
		memcpy(sorted, m->labels, m->n_labels * sizeof(*sorted));
		qsort(sorted, m->n_labels, sizeof(*sorted), label__cmp);
	}
	put16(p, m->n_labels);
	p += 2;
	for (size_t i = 0; i < m->n_labels; i++) {
		if (i && !strcmp(sorted[i - 1].key, sorted[i].key))
			return -EINVAL;
		p = meta__put_str(p, sorted[i].key);
		p = meta__put_str(p, sorted[i].value);
	}
	put64(p, (uint64_t)m->value);
	if (m->weight_milli && m->weight_milli != 1000)
		put32(p + 8, m->weight_milli);
	return 0;
}

size_t ringfile__record_size(const struct record_meta *meta, size_t len)
{
	int err;
	size_t m = meta__encoded_len(meta, &err);

	return err ? 0 : align8(RINGFILE_REC_FIXED + m + len);
}

/*
 * Decodes the metadata at rec + RINGFILE_REC_FIXED into meta, with strings copied NUL-terminated
 * into out (which has room for hdr_len + 8 + RINGFILE_MAX_LABELS * sizeof(label) bytes), after
 * the label array. Returns 0 or -EIO when the metadata is inconsistent.
 */
static int meta__decode(const uint8_t *rec, const struct rec_hdr *h, uint8_t *out,
			struct record_meta *meta)
{
	const uint8_t *p = rec + RINGFILE_REC_FIXED, *end = rec + h->hdr_len;
	const char **strs[4] = { &meta->service, &meta->type, &meta->device, &meta->key };
	struct record_label *labels = (struct record_label *)out;
	char *sp;
	size_t n_labels;

	memset(meta, 0, sizeof(*meta));
	meta->time_ns = h->time_ns;
	meta->flags = h->flags;
	if (end - p < 2 * 4 + 2)
		return -EIO;
	/* labels count sits after the four strings: find it first to place the string area */
	{
		const uint8_t *q = p;

		for (int i = 0; i < 4; i++) {
			if (end - q < 2 || end - q - 2 < get16(q))
				return -EIO;
			q += 2 + get16(q);
		}
		if (end - q < 2)
			return -EIO;
		n_labels = get16(q);
		if (n_labels > RINGFILE_MAX_LABELS)
			return -EIO;
	}
	sp = (char *)(labels + n_labels);
	for (int i = 0; i < 4; i++) {
		size_t l = get16(p);

		memcpy(sp, p + 2, l);
		sp[l] = 0;
		*strs[i] = sp;
		sp += l + 1;
		p += 2 + l;
	}
	p += 2;
	for (size_t i = 0; i < n_labels; i++) {
		const char **kv[2] = { &labels[i].key, &labels[i].value };

		for (int j = 0; j < 2; j++) {
			size_t l;

			if (end - p < 2 || end - p - 2 < get16(p))
				return -EIO;
			l = get16(p);
			memcpy(sp, p + 2, l);
			sp[l] = 0;
			*kv[j] = sp;
			sp += l + 1;
			p += 2 + l;
		}
	}
	meta->labels = n_labels ? labels : NULL;
	meta->n_labels = n_labels;
	if (end - p >= 8)
		meta->value = (int64_t)get64(p);
	if (end - p >= 12)
		meta->weight_milli = get32(p + 8);
	return 0;
}

/* Bytes the decoded metadata needs (see meta__decode). */
static size_t meta__decoded_room(const struct rec_hdr *h)
{
	return h->hdr_len + 16 + RINGFILE_MAX_LABELS * sizeof(struct record_label) + 2 * 8 +
	       (RINGFILE_MAX_LABELS * 2 + 4);
}

/* ---- slots -------------------------------------------------------------------------------- */

static struct rf_slot *rf__slot(struct ringfile *rf, uint64_t seq)
{
	return &rf->slots[(rf->slot0 + (seq - rf->first_seq)) % rf->cap];
}

static bool rf__empty_slots(const struct ringfile *rf)
{
	return rf->first_seq == rf->next_seq;
}

static int rf__push_slot(struct ringfile *rf, const struct rf_slot *s)
{
	size_t n = rf->next_seq - rf->first_seq;

	if (n == rf->cap) {
		size_t ncap = rf->cap ? rf->cap * 2 : 64;
		struct rf_slot *ns = malloc(ncap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			ns[i] = rf->slots[(rf->slot0 + i) % rf->cap];
		free(rf->slots);
		rf->slots = ns;
		rf->cap = ncap;
		rf->slot0 = 0;
	}
	rf->next_seq++;
	*rf__slot(rf, rf->next_seq - 1) = *s;
	if (s->off && !(s->flags & (RINGFILE_F_CONSUME | RINGFILE_F_SKIP))) {
		rf->live_records++;
		rf->live_bytes += s->len;
	}
	return 0;
}

/* Drops the oldest slot; counted as overwritten when it held a data record. */
static void rf__pop_slot(struct ringfile *rf, bool count)
{
	struct rf_slot *s = rf__slot(rf, rf->first_seq);

	if (s->off && !(s->flags & RINGFILE_F_CONSUME)) {
		rf->live_records--;
		rf->live_bytes -= s->len;
		if (count)
			rf->st.overwritten++;
	}
	rf->first_seq++;
	rf->slot0 = (rf->slot0 + 1) % rf->cap;
}

/* A record whose write failed becomes a hole: never served, counted nowhere as live. */
static void rf__forget_slot(struct ringfile *rf, struct rf_slot *s)
{
	if (s->off && !(s->flags & (RINGFILE_F_CONSUME | RINGFILE_F_SKIP))) {
		rf->live_records--;
		rf->live_bytes -= s->len;
	}
	s->off = 0;
}

/* Holes at the front occupy no space: drop them so the oldest slot is a real record. */
static void rf__trim_holes(struct ringfile *rf)
{
	while (!rf__empty_slots(rf) && !rf__slot(rf, rf->first_seq)->off)
		rf__pop_slot(rf, false);
}

/* ---- header ------------------------------------------------------------------------------- */

static void hdr__encode(uint8_t *b, const struct ringfile *rf)
{
	memset(b, 0, RINGFILE_HDR_SIZE);
	memcpy(b, HDR_MAGIC, 8);
	put32(b + 8, HDR_VERSION);
	put32(b + 12, RINGFILE_HDR_SIZE);
	put64(b + 16, rf->size);
	put64(b + 24, rf->data_off);
	put32(b + 32, rf->gen);
	put64(b + 40, port_clock_real_ns());
	put32(b + HDR_CRC_OFF, crc32c(0, b, HDR_CRC_OFF));
	if (rf->hdr_wm) {
		put64(b + HDR_WM_OFF, rf->hdr_wm);
		put32(b + HDR_WM_OFF + 8, rf->gen);
		put32(b + HDR_WM_OFF + 12, crc32c(0, b + HDR_WM_OFF, HDR_WM_LEN - 4));
	}
}

/* The header's eviction watermark, 0 when there is none of this generation. */
static uint64_t hdr__decode_wm(const uint8_t *b, uint32_t gen)
{
	const uint8_t *w = b + HDR_WM_OFF;

	if (get32(w + 8) != gen || get32(w + 12) != crc32c(0, w, HDR_WM_LEN - 4))
		return 0;
	return get64(w);
}

static bool hdr__decode(const uint8_t *b, struct ringfile *rf)
{
	if (memcmp(b, HDR_MAGIC, 8) || get32(b + 8) != HDR_VERSION ||
	    get32(b + 12) != RINGFILE_HDR_SIZE ||
	    get32(b + HDR_CRC_OFF) != crc32c(0, b, HDR_CRC_OFF))
		return false;
	if (get64(b + 24) != RINGFILE_HDR_SIZE || get64(b + 16) < RINGFILE_MIN_SIZE ||
	    get64(b + 16) % REC_ALIGN)
		return false;
	rf->size = get64(b + 16);
	rf->gen = get32(b + 32);
	rf->hdr_wm = hdr__decode_wm(b, rf->gen);
	return true;
}

static int rf__write_header(struct ringfile *rf)
{
	uint8_t b[RINGFILE_HDR_SIZE];
	int err;

	hdr__encode(b, rf);
	err = port_pwrite_full(rf->fd, b, sizeof(b), 0);
	if (!err && fdatasync(rf->fd))
		err = -errno;
	return err;
}

static uint32_t rf__new_gen(void)
{
	uint32_t g = 0;

	while (!g)
		g = (uint32_t)port_rand_u64();
	return g;
}

/* ---- open: scan and rebuild ------------------------------------------------------------- */

struct scan_rec {
	uint64_t seq, off, time_ns, wm_oldest, wm_consumed;
	uint32_t len, gen;
	uint16_t flags;
};

struct scan {
	struct scan_rec *v;
	size_t n, cap;
};

static int scan__push(struct scan *sc, const struct scan_rec *r)
{
	if (sc->n == sc->cap) {
		size_t ncap = sc->cap ? sc->cap * 2 : 256;
		struct scan_rec *nv = realloc(sc->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		sc->v = nv;
		sc->cap = ncap;
	}
	sc->v[sc->n++] = *r;
	return 0;
}

/* Walks the data area: valid records (any generation when gen == 0) go into sc. */
static int rf__scan_area(struct ringfile *rf, const uint8_t *map, uint32_t gen, struct scan *sc)
{
	uint64_t pos = rf->data_off;

	while (pos + RINGFILE_REC_FIXED <= rf->data_end) {
		struct rec_hdr h;
		struct scan_rec r;
		int err;

		if (!rec__get_fixed(map + pos, rf->data_end - pos, &h) || (gen && h.gen != gen) ||
		    !h.gen || rec__crc(map + pos, h.total) != h.crc) {
			pos += REC_ALIGN;
			continue;
		}
		if (!(h.flags & RINGFILE_F_SKIP) && h.seq) {
			r = (struct scan_rec){ .seq = h.seq, .off = pos, .time_ns = h.time_ns,
					       .wm_oldest = h.wm_oldest,
					       .wm_consumed = h.wm_consumed, .len = h.total,
					       .gen = h.gen, .flags = h.flags };
			err = scan__push(sc, &r);
			if (err)
				return err;
		}
		pos += align8(h.total);
	}
	return 0;
}

static int scan_rec__cmp(const void *a, const void *b)
{
	const struct scan_rec *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* The generation most valid records carry (used when the header is unreadable). */
static uint32_t scan__majority_gen(const struct scan *sc)
{
	uint32_t best = 0;
	size_t best_n = 0;

	for (size_t i = 0; i < sc->n; i++) {
		size_t n = 0;

		for (size_t j = 0; j < sc->n && sc->v[i].gen != best; j++)
			n += sc->v[j].gen == sc->v[i].gen;
		if (n > best_n) {
			best_n = n;
			best = sc->v[i].gen;
		}
	}
	return best;
}

/* Keeps only generation gen, sorted by seq, duplicates dropped (counted stale). */
static void scan__filter(struct ringfile *rf, struct scan *sc, uint32_t gen)
{
	size_t k = 0;

	for (size_t i = 0; i < sc->n; i++)
		if (sc->v[i].gen == gen)
			sc->v[k++] = sc->v[i];
	sc->n = k;
	if (sc->n)
		qsort(sc->v, sc->n, sizeof(*sc->v), scan_rec__cmp);
	k = 0;
	for (size_t i = 0; i < sc->n; i++) {
		if (k && sc->v[k - 1].seq == sc->v[i].seq) {
			rf->st.stale++;
			continue;
		}
		sc->v[k++] = sc->v[i];
	}
	sc->n = k;
}

/* Rebuilds the slots, head and watermarks from the scanned records. */
static int rf__rebuild(struct ringfile *rf, const uint8_t *map, struct scan *sc)
{
	const struct scan_rec *newest;
	uint64_t first;
	size_t i = 0;
	struct rec_hdr h;

	rf->head = rf->data_off;
	rf->first_seq = rf->next_seq = 1;
	if (!sc->n)
		return 0;
	newest = &sc->v[sc->n - 1];
	first = newest->wm_oldest && newest->wm_oldest <= newest->seq ? newest->wm_oldest
								       : newest->seq;
	/*
	 * The header's watermark is newer when an append had to declare its eviction there (no
	 * record had declared it) and a crash stopped it before its record was whole: what it
	 * evicted counts as overwritten, as it would have been.
	 */
	if (rf->hdr_wm > first) {
		uint64_t wm = rf->hdr_wm <= newest->seq + 1 ? rf->hdr_wm : newest->seq + 1;

		rf->st.overwritten += wm - first;
		first = wm;
	}
	while (i < sc->n && sc->v[i].seq < first) {
		rf->st.stale++;
		i++;
	}
	/*
	 * Every append declares what it evicts before it writes over it (rf__reserve_locked):
	 * a seq missing from first on was not being overwritten, it is torn or corrupt.
	 */
	rf->first_seq = rf->next_seq = first;
	for (; i < sc->n; i++) {
		struct rf_slot s = { .off = sc->v[i].off, .time_ns = sc->v[i].time_ns,
				     .len = sc->v[i].len, .flags = sc->v[i].flags };
		int err;

		while (rf->next_seq < sc->v[i].seq) {
			struct rf_slot hole = { 0 };

			err = rf__push_slot(rf, &hole);
			if (err)
				return err;
			rf->st.corrupt++;
		}
		err = rf__push_slot(rf, &s);
		if (err)
			return err;
		if (align8(s.len) > rf->max_need)
			rf->max_need = align8(s.len);
	}
	rf->consumed = newest->wm_consumed;
	rf->head = align8(newest->off + newest->len);
	/* A torn record at the head: count it, and never reuse its seq. */
	if (rf->head + RINGFILE_REC_FIXED <= rf->data_end &&
	    get32(map + rf->head) == REC_MAGIC) {
		bool plausible = get64(map + rf->head + 16) == rf->next_seq &&
				 get32(map + rf->head + 48) == rf->gen;

		if (!rec__get_fixed(map + rf->head, rf->data_end - rf->head, &h) ||
		    rec__crc(map + rf->head, h.total) != h.crc || h.gen != rf->gen) {
			rf->st.corrupt++;
			if (plausible) {
				struct rf_slot hole = { 0 };

				return rf__push_slot(rf, &hole);
			}
		}
	}
	return 0;
}

/*
 * Hands every live data record's metadata to opts->on_record, oldest first, straight from the
 * mapping the scan just validated: a collector rebuilds its index without reading twice.
 */
static int rf__replay(struct ringfile *rf, const uint8_t *map, const struct ringfile_opts *opts)
{
	uint8_t *buf = NULL;
	size_t cap = 0;
	int ret = 0;

	for (uint64_t seq = rf->first_seq; seq < rf->next_seq && !ret; seq++) {
		const struct rf_slot *sl = rf__slot(rf, seq);
		struct record_meta meta;
		struct rec_hdr h;
		size_t need;

		if (!sl->off || (sl->flags & RINGFILE_F_CONSUME))
			continue;
		rec__get_fixed(map + sl->off, sl->len, &h);
		need = meta__decoded_room(&h);
		if (need > cap) {
			free(buf);
			cap = need * 2;
			buf = malloc(cap);
			if (!buf)
				return -ENOMEM;
		}
		if (meta__decode(map + sl->off, &h, buf, &meta))
			continue; /* cannot happen: the scan validated it */
		ret = opts->on_record(opts->ctx, seq, &meta, h.payload_len);
	}
	free(buf);
	return ret;
}

static int rf__scan(struct ringfile *rf, bool header_ok, const struct ringfile_opts *opts)
{
	bool quiet = opts->quiet;
	struct scan sc = { 0 };
	uint8_t *map;
	int err = 0;

	if (rf->size > SIZE_MAX)
		return -EFBIG; /* a 32-bit process scans rings below 4 GiB only */
	map = mmap(NULL, rf->size, PROT_READ, MAP_SHARED, rf->fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	madvise(map, rf->size, MADV_SEQUENTIAL);
	err = rf__scan_area(rf, map, header_ok ? rf->gen : 0, &sc);
	if (err)
		goto out;
	if (!header_ok) {
		rf->gen = scan__majority_gen(&sc);
		rf->st.header_repaired = true;
		if (!rf->gen && rf->foreign) {
			/* never overwrite a file that was not a ring (a wrong --ring path?) */
			err = -EBADF;
			goto out;
		}
		if (!rf->gen) {
			rf->gen = rf__new_gen();
			rf->st.reinitialised = true;
		}
		if (!quiet)
			pr_warn("ringfile: %s: header unreadable; %s", rf->path,
				rf->st.reinitialised ? "no records found, ring reinitialised"
						     : "rebuilt from the records' generation");
		err = rf__write_header(rf);
		if (err)
			goto out;
	}
	scan__filter(rf, &sc, rf->gen);
	err = rf__rebuild(rf, map, &sc);
	if (!err && opts->on_record)
		err = rf__replay(rf, map, opts);
out:
	munmap(map, rf->size);
	free(sc.v);
	return err;
}

/* ---- open --------------------------------------------------------------------------------- */

static int rf__preallocate(struct ringfile *rf, uint64_t from)
{
	int err = posix_fallocate(rf->fd, from, rf->size - from);

	if (err == EOPNOTSUPP || err == EINVAL)
		err = ftruncate(rf->fd, rf->size) ? errno : 0;
	return -err;
}

static int rf__create(struct ringfile *rf)
{
	int err;

	rf->gen = rf__new_gen();
	err = rf__preallocate(rf, 0);
	if (!err)
		err = rf__write_header(rf);
	if (!err)
		err = port_fsync_parent_dir(rf->path);
	rf->head = rf->data_off;
	rf->first_seq = rf->next_seq = 1;
	return err;
}

/* Opens an existing file: checks the header, repairs a truncation, then scans. */
static int rf__load(struct ringfile *rf, const struct ringfile_opts *opts, uint64_t st_size,
		    char *err, size_t errlen)
{
	uint8_t b[RINGFILE_HDR_SIZE] = { 0 };
	bool header_ok = false;
	int e;

	if (port_pread_full(rf->fd, b, st_size < sizeof(b) ? st_size : sizeof(b), 0) == 0)
		header_ok = hdr__decode(b, rf);
	if (!header_ok) {
		static const uint8_t zero[RINGFILE_HDR_SIZE];

		rf->foreign = memcmp(b, zero, sizeof(b)) && memcmp(b, HDR_MAGIC, 6);
	}
	if (!header_ok)
		rf->size = (opts->size ? opts->size : st_size) & ~(uint64_t)(REC_ALIGN - 1);
	if (rf->size < RINGFILE_MIN_SIZE) {
		snprintf(err, errlen, "ringfile: %s: size %" PRIu64 " is below the minimum %u",
			 rf->path, rf->size, RINGFILE_MIN_SIZE);
		return -EINVAL;
	}
	if (header_ok && opts->size && opts->size != rf->size && !opts->quiet)
		pr_warn("ringfile: %s: keeping its size %" PRIu64 " (asked %" PRIu64
			"): a new size needs a new file", rf->path, rf->size, opts->size);
	if (st_size < rf->size) {
		if (!opts->quiet)
			pr_warn("ringfile: %s: truncated to %" PRIu64 " of %" PRIu64
				" bytes; extending it, records past the cut are lost",
				rf->path, st_size, rf->size);
		e = rf__preallocate(rf, st_size > RINGFILE_HDR_SIZE ? st_size : 0);
		if (e) {
			snprintf(err, errlen, "ringfile: %s: cannot extend: %s", rf->path,
				 strerror(-e));
			return e;
		}
	}
	rf->data_end = rf->size;
	e = rf__scan(rf, header_ok, opts);
	if (e == -EBADF)
		snprintf(err, errlen, "ringfile: %s: not a ring file (no header, no records); "
			 "refusing to overwrite it", rf->path);
	else if (e)
		snprintf(err, errlen, "ringfile: %s: scan failed: %s", rf->path, strerror(-e));
	return e;
}

struct ringfile *ringfile__open(const char *path, const struct ringfile_opts *opts, char *err,
				size_t errlen)
{
	struct ringfile *rf = calloc(1, sizeof(*rf));
	pthread_condattr_t ca;
	struct stat st;
	int e;

	if (!rf || !(rf->path = strdup(path))) {
		free(rf);
		snprintf(err, errlen, "ringfile: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	rf->fd = -1;
	pthread_mutex_init(&rf->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rf->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&rf->written, NULL);
	rf->fsync_ms = opts->fsync_ms;
	rf->data_off = RINGFILE_HDR_SIZE;
	/* a new ring's directory is made like mkdir -p (the spool's and the collector's --ring) */
	e = opts->create ? port_mkdir_parent(path, 0750) : 0;
	if (e) {
		snprintf(err, errlen, "ringfile: %s: cannot create its directory: %s", path,
			 strerror(-e));
		goto err_free;
	}
	rf->fd = open(path, O_RDWR | O_CLOEXEC | (opts->create ? O_CREAT : 0), 0600);
	if (rf->fd < 0 || fstat(rf->fd, &st)) {
		e = -errno;
		snprintf(err, errlen, "ringfile: %s: %s", path, strerror(-e));
		goto err_free;
	}
	if (st.st_size == 0) {
		rf->size = opts->size & ~(uint64_t)(REC_ALIGN - 1);
		if (rf->size < RINGFILE_MIN_SIZE) {
			e = -EINVAL;
			snprintf(err, errlen, "ringfile: %s: size %" PRIu64
				 " is below the minimum %u", path, opts->size, RINGFILE_MIN_SIZE);
			goto err_free;
		}
		rf->data_end = rf->size;
		e = rf__create(rf);
		if (e)
			snprintf(err, errlen, "ringfile: %s: cannot create: %s", path,
				 strerror(-e));
	} else {
		e = rf__load(rf, opts, st.st_size, err, errlen);
	}
	if (e)
		goto err_free;
	rf->written_seq = rf->durable_seq = rf->next_seq - 1;
	/* the newest record (or the header) declared this much evicted: writes may go there */
	rf->wm_reserved = rf->wm_written = rf->first_seq;
	/* what a previous process left in the page cache is made durable before we build on it */
	fdatasync(rf->fd);
	return rf;

err_free:
	ringfile__free(rf);
	errno = -e;
	return NULL;
}

/* ---- append --------------------------------------------------------------------------------- */

/*
 * Evicts the oldest records that start inside [lo, hi). -EAGAIN when one of them is still
 * being written (possible only when the ring is smaller than the writes in flight).
 */
static int rf__evict_range(struct ringfile *rf, uint64_t lo, uint64_t hi)
{
	rf__trim_holes(rf);
	while (!rf__empty_slots(rf)) {
		struct rf_slot *s = rf__slot(rf, rf->first_seq);

		if (s->off < lo || s->off >= hi)
			break;
		if (s->pending)
			return -EAGAIN;
		rf__pop_slot(rf, true);
		rf__trim_holes(rf);
	}
	return 0;
}

/*
 * Evicts, ahead of need, what the next record after one ending at end may write over: up to
 * max_need bytes from end, or when those cross the end of the lap, the rest of the lap and
 * max_need bytes from the start (it may wrap). Capped at a 16th of the ring, which is what
 * the ClickHouse spool keeps free beyond its records (ch_spool__admits), so that it never
 * evicts an unconsumed record; a record beyond the cap declares its eviction in the header.
 * Best effort: it stops at a record still being written.
 */
static void rf__evict_ahead(struct ringfile *rf, uint64_t end)
{
	uint64_t ahead = rf->max_need, cap = ((rf->data_end - rf->data_off) / 16) & ~7ull;

	if (ahead > cap)
		ahead = cap;
	if (end + ahead <= rf->data_end) {
		rf__evict_range(rf, end, end + ahead);
		return;
	}
	if (!rf__evict_range(rf, end, rf->data_end))
		rf__evict_range(rf, rf->data_off, rf->data_off + ahead);
}

/*
 * Makes the eviction watermark durable in the header block: for an append that writes over
 * records no earlier record declared evicted (the first wrap after open, a record larger than
 * the evict-ahead). Synced before that write, whatever the fsync policy: a power cut must not
 * find the write on the disk without it. In place, so rare by design.
 */
static int rf__write_wm(struct ringfile *rf, uint64_t wm)
{
	uint8_t b[HDR_WM_LEN];
	int err;

	put64(b, wm);
	put32(b + 8, rf->gen);
	put32(b + 12, crc32c(0, b, HDR_WM_LEN - 4));
	err = port_pwrite_full(rf->fd, b, sizeof(b), HDR_WM_OFF);
	if (!err && fdatasync(rf->fd))
		err = -errno;
	if (err)
		return err;
	rf->hdr_wm = wm;
	rf->st.wm_syncs++;
	if (wm > rf->wm_written)
		rf->wm_written = wm;
	return 0;
}

static int rf__write_skip(struct ringfile *rf)
{
	uint8_t b[RINGFILE_REC_FIXED];
	struct rec_hdr h = { .hdr_len = RINGFILE_REC_FIXED, .flags = RINGFILE_F_SKIP,
			     .total = RINGFILE_REC_FIXED, .gen = rf->gen };

	rec__put_fixed(b, &h);
	put32(b + 12, rec__crc(b, sizeof(b)));
	return port_pwrite_full(rf->fd, b, sizeof(b), rf->head);
}

/*
 * Makes room for need bytes: the place where the record goes (the head, or the start of the
 * data area when it does not fit before the end: then the end of the lap is dead too) is
 * evicted, then what the next record may need (rf__evict_ahead). Only then is anything
 * written: the end-of-lap skip marker, after the header's watermark when this write is the
 * first to reach records that no record declared evicted (the oldest seq moved past the
 * highest watermark declared). Returns the record's offset in *off, or -EAGAIN (nothing
 * written; the evictions stay, and the retry still sees them undeclared) or -errno.
 */
static int rf__make_room(struct ringfile *rf, uint64_t need, uint64_t *off)
{
	bool wrap = rf->head + need > rf->data_end, undeclared;
	uint64_t start = wrap ? rf->data_off : rf->head;
	int err = 0;

	if (wrap)
		err = rf__evict_range(rf, rf->head, rf->data_end);
	if (!err)
		err = rf__evict_range(rf, start, start + need);
	if (err)
		return err;
	undeclared = rf->first_seq > rf->wm_reserved;
	if (need > rf->max_need)
		rf->max_need = need;
	rf__evict_ahead(rf, start + need);
	if (undeclared) {
		err = rf__write_wm(rf, rf__empty_slots(rf) ? rf->next_seq : rf->first_seq);
		if (err)
			return err;
	}
	if (wrap && rf->head + RINGFILE_REC_FIXED <= rf->data_end)
		err = rf__write_skip(rf);
	*off = start;
	return err;
}

/*
 * Called locked: waits until some pending record is written. Counted, so that completing a
 * write wakes nobody (no futex call) in the common case where no one waits for one.
 */
static void rf__wait_written(struct ringfile *rf)
{
	rf->written_waiters++;
	pthread_cond_wait(&rf->written, &rf->lock);
	rf->written_waiters--;
}

/*
 * Appending is three steps so that the lock is held only for the bookkeeping, never for the
 * CRC or the pwrite: reserve (under the lock: seq, place, eviction), write (no lock), complete
 * (under the lock: the record becomes readable and part of the written prefix a sync covers).
 */
static int rf__prepare(const struct record_meta *meta, uint16_t flags, const void *payload,
		       size_t len, struct ringfile_append *ap)
{
	size_t mlen;
	int err;

	mlen = meta__encoded_len(meta, &err);
	if (err)
		return err;
	if (len > UINT32_MAX - RINGFILE_REC_FIXED - mlen)
		return -EFBIG;
	*ap = (struct ringfile_append){ .flags = flags, .time_ns = meta->time_ns,
					.hdr_len = RINGFILE_REC_FIXED + mlen,
					.payload = payload, .len = len };
	ap->hdr = malloc(ap->hdr_len);
	if (!ap->hdr)
		return -ENOMEM;
	err = meta__encode(ap->hdr + RINGFILE_REC_FIXED, meta);
	if (err) {
		free(ap->hdr);
		ap->hdr = NULL;
	}
	return err;
}

/* Called locked. -EAGAIN: a record still being written is in the way (wait on cond, retry). */
static int rf__reserve_locked(struct ringfile *rf, struct ringfile_append *ap)
{
	struct rec_hdr h = { .flags = ap->flags, .gen = rf->gen, .hdr_len = ap->hdr_len,
			     .total = ap->hdr_len + ap->len, .payload_len = ap->len,
			     .time_ns = ap->time_ns };
	uint64_t need = align8(h.total), off, wm_need = rf->wm_reserved;
	struct rf_slot s;
	int err;

	if (need > rf->data_end - rf->data_off)
		return -EFBIG;
	if (rf->broken)
		return -EIO;
	err = rf__make_room(rf, need, &off);
	if (err == -EAGAIN)
		return err;
	if (err)
		goto broken;
	rf->head = off;
	h.seq = rf->next_seq;
	h.wm_oldest = rf__empty_slots(rf) ? h.seq : rf->first_seq;
	h.wm_consumed = rf->consumed;
	/*
	 * This write destroys only records below wm_need (what the records before it declared,
	 * or the header now): it waits until a record declaring that much is written.
	 */
	ap->wm = h.wm_oldest;
	ap->wm_need = wm_need > rf->hdr_wm ? wm_need : rf->hdr_wm;
	if (h.wm_oldest > rf->wm_reserved)
		rf->wm_reserved = h.wm_oldest;
	rec__put_fixed(ap->hdr, &h);
	s = (struct rf_slot){ .off = rf->head, .time_ns = h.time_ns, .len = h.total,
			      .flags = ap->flags, .pending = true };
	err = rf__push_slot(rf, &s);
	if (err)
		goto broken;
	ap->seq = h.seq;
	ap->off = rf->head;
	rf->head += need;
	rf->pending++;
	return 0;

broken:
	/* the head is no longer known to be consistent: refuse writes until reopened */
	rf->broken = true;
	pr_err("ringfile: %s: write failed (%s); no more writes until reopened", rf->path,
	       strerror(-err));
	return err;
}

/* Reserves, waiting while records still being written stand where this one must go. */
static int rf__reserve_wait_locked(struct ringfile *rf, struct ringfile_append *ap)
{
	int err;

	while ((err = rf__reserve_locked(rf, ap)) == -EAGAIN)
		rf__wait_written(rf);
	return err;
}

/* The CRC (header with its CRC field as 0, continued over the payload) and the pwrite. */
static int rf__write_reserved(struct ringfile *rf, struct ringfile_append *ap)
{
	size_t rest = ap->len - ap->pre_len, total = ap->hdr_len + ap->len;
	struct iovec iov[3] = { { ap->hdr, ap->hdr_len } };
	int niov = 1;
	uint32_t crc = rec__crc(ap->hdr, ap->hdr_len);
	ssize_t n;

	if (ap->pre_len) {
		iov[niov++] = (struct iovec){ (void *)ap->pre, ap->pre_len };
		crc = crc32c(crc, ap->pre, ap->pre_len);
	}
	if (rest)
		iov[niov++] = (struct iovec){ (void *)ap->payload, rest };
	put32(ap->hdr + 12, crc32c(crc, ap->payload, rest));
	n = pwritev(rf->fd, iov, niov, (off_t)ap->off);
	if (n == (ssize_t)total)
		return 0;
	return n < 0 ? -errno : -EIO;
}

/*
 * Called locked: the record is on its way to the disk (or failed: then it becomes a hole and
 * the ring read-only). written_seq advances over the prefix of records no longer pending, so
 * a sync that starts now covers exactly the records acknowledged by it.
 */
static void rf__complete_locked(struct ringfile *rf, struct ringfile_append *ap, int err)
{
	struct rf_slot *s = ap->seq >= rf->first_seq ? rf__slot(rf, ap->seq) : NULL;

	rf->pending--;
	if (s) {
		s->pending = false;
		if (err) {
			rf__forget_slot(rf, s);
			rf->broken = true;
			pr_err("ringfile: %s: write failed (%s); no more writes until reopened",
			       rf->path, strerror(-err));
		}
	}
	while (rf->written_seq + 1 < rf->next_seq) {
		uint64_t next = rf->written_seq + 1;

		if (next >= rf->first_seq && rf__slot(rf, next)->pending)
			break;
		rf->written_seq = next;
	}
	if (!err) {
		if (!rf->dirty_since_ns)
			rf->dirty_since_ns = port_clock_mono_ns();
		rf->st.appends++;
		if (ap->wm > rf->wm_written)
			rf->wm_written = ap->wm;
	}
	free(ap->hdr);
	ap->hdr = NULL;
	if (rf->written_waiters)
		pthread_cond_broadcast(&rf->written);
}

#define RF_DECLARE_WAIT_NS (50 * NSEC_PER_MSEC)

/*
 * Called locked: waits until a record that declares what ap writes over is written (one
 * reserved before it: microseconds when another thread writes it). A caller that finishes
 * its own appends out of order would wait for itself: after RF_DECLARE_WAIT_NS the header
 * declares it instead. -EIO when the ring broke meanwhile.
 */
static int rf__wait_declared_locked(struct ringfile *rf, const struct ringfile_append *ap)
{
	struct timespec ts;
	uint64_t due;

	clock_gettime(CLOCK_REALTIME, &ts); /* the clock of the written condition */
	due = (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec + RF_DECLARE_WAIT_NS;
	ts.tv_sec = due / NSEC_PER_SEC;
	ts.tv_nsec = due % NSEC_PER_SEC;
	while (rf->wm_written < ap->wm_need && !rf->broken) {
		int r;

		rf->written_waiters++;
		r = pthread_cond_timedwait(&rf->written, &rf->lock, &ts);
		rf->written_waiters--;
		if (r == ETIMEDOUT && rf->wm_written < ap->wm_need && !rf->broken &&
		    rf__write_wm(rf, ap->wm_need))
			rf->broken = true;
	}
	return rf->wm_written >= ap->wm_need ? 0 : -EIO;
}

/* The whole append with the lock held (small records: consume markers). */
static int rf__append_locked(struct ringfile *rf, uint16_t flags, const struct record_meta *meta,
			     const void *payload, size_t len, uint64_t *seq_out)
{
	struct ringfile_append ap;
	int err = rf__prepare(meta, flags, payload, len, &ap);

	if (err)
		return err;
	err = rf__reserve_wait_locked(rf, &ap);
	if (err) {
		free(ap.hdr);
		return err;
	}
	err = rf__wait_declared_locked(rf, &ap);
	if (!err)
		err = rf__write_reserved(rf, &ap);
	rf__complete_locked(rf, &ap, err);
	*seq_out = ap.seq;
	return err;
}

int ringfile__append_begin(struct ringfile *rf, const struct record_meta *meta,
			   const void *payload, size_t len, struct ringfile_append *ap)
{
	return ringfile__append_begin_pre(rf, meta, NULL, 0, payload, len, ap);
}

int ringfile__append_begin_pre(struct ringfile *rf, const struct record_meta *meta,
			       const void *pre, size_t pre_len, const void *payload, size_t len,
			       struct ringfile_append *ap)
{
	int err;

	if (!meta || (meta->flags & (RINGFILE_F_SKIP | RINGFILE_F_CONSUME)) || (len && !payload) ||
	    (pre_len && !pre) || len > SIZE_MAX - pre_len)
		return -EINVAL;
	err = rf__prepare(meta, meta->flags, payload, pre_len + len, ap);
	if (err)
		return err;
	ap->pre = pre;
	ap->pre_len = pre_len;
	pthread_mutex_lock(&rf->lock);
	err = rf__reserve_wait_locked(rf, ap);
	pthread_mutex_unlock(&rf->lock);
	if (err) {
		free(ap->hdr);
		ap->hdr = NULL;
	}
	return err;
}

int ringfile__append_finish(struct ringfile *rf, struct ringfile_append *ap)
{
	bool sync_now;
	int err = 0;

	/* the common case (one writer, or the record before it long written) takes no lock */
	if (atomic_load(&rf->wm_written) < ap->wm_need) {
		pthread_mutex_lock(&rf->lock);
		err = rf__wait_declared_locked(rf, ap);
		pthread_mutex_unlock(&rf->lock);
	}
	if (!err)
		err = rf__write_reserved(rf, ap);
	pthread_mutex_lock(&rf->lock);
	rf__complete_locked(rf, ap, err);
	/* a passed group-commit deadline is honoured even when nobody waits */
	sync_now = !err && rf->fsync_ms && rf->dirty_since_ns && !rf->syncing &&
		   port_clock_mono_ns() >= rf->dirty_since_ns + rf->fsync_ms * NSEC_PER_MSEC;
	pthread_mutex_unlock(&rf->lock);
	if (err)
		return err;
	return sync_now ? ringfile__sync(rf) : 0;
}

int ringfile__append_async(struct ringfile *rf, const struct record_meta *meta,
			   const void *payload, size_t len, uint64_t *seq_out)
{
	struct ringfile_append ap;
	int err = ringfile__append_begin(rf, meta, payload, len, &ap);

	if (err)
		return err;
	if (seq_out)
		*seq_out = ap.seq;
	return ringfile__append_finish(rf, &ap);
}

int ringfile__append(struct ringfile *rf, const struct record_meta *meta, const void *payload,
		     size_t len, uint64_t *seq_out)
{
	uint64_t seq = 0;
	int err = ringfile__append_async(rf, meta, payload, len, &seq);

	if (err)
		return err;
	if (seq_out)
		*seq_out = seq;
	return rf->fsync_ms ? 0 : ringfile__wait_durable(rf, seq);
}

/* ---- durability ---------------------------------------------------------------------------- */

#define RF_SYNC_WAIT_MAX_NS NSEC_PER_SEC

/*
 * Called locked: wakes n of the waiters of sync parity p (INT_MAX: all). The word changes
 * first, so that a waiter between its unlock and its futex wait does not sleep through this.
 */
static void rf__wake_sync(struct ringfile *rf, unsigned p, int n)
{
	atomic_fetch_add(&rf->sync_word[p], 1);
	if (atomic_load(&rf->sync_waiters[p]))
		syscall(SYS_futex, &rf->sync_word[p], FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Called locked: wakes one waiter of sync gen, when there is one, to lead it. */
static void rf__wake_leader(struct ringfile *rf, uint64_t gen)
{
	if (atomic_load(&rf->sync_waiters[gen & 1]) && !rf->leading)
		rf__wake_sync(rf, gen & 1, 1);
}

/*
 * Called locked: waits for the end of sync gen (the running one, or the next). Bounded, as a
 * safety net: whoever waits for the next sync relies on its leader to begin it, and looks
 * again after RF_SYNC_WAIT_MAX_NS, as it would when woken.
 * Returns true, unlocked, when record seq is durable on waking (the common end: the sync
 * that covers it is done); else false with the lock held again, to look at the ring anew.
 */
static bool rf__wait_sync(struct ringfile *rf, uint64_t gen, uint64_t seq)
{
	/*
	 * The raw futex syscall takes the kernel's timespec of two longs on every arch (on 32-bit
	 * ARM the old 32-bit one), not the C library's, which musl and 64-bit time_t builds make
	 * 64-bit seconds on 32-bit arches.
	 */
	static const struct { long tv_sec, tv_nsec; } max = {
		.tv_sec = RF_SYNC_WAIT_MAX_NS / NSEC_PER_SEC,
		.tv_nsec = RF_SYNC_WAIT_MAX_NS % NSEC_PER_SEC,
	};
	unsigned p = gen & 1, v = atomic_load(&rf->sync_word[p]);

	atomic_fetch_add(&rf->sync_waiters[p], 1);
	pthread_mutex_unlock(&rf->lock);
	/* returns when woken, when the word changed meanwhile (EAGAIN), on a signal or timeout */
	syscall(SYS_futex, &rf->sync_word[p], FUTEX_WAIT_PRIVATE, v, &max, NULL, 0);
	atomic_fetch_sub(&rf->sync_waiters[p], 1);
	if (atomic_load(&rf->durable_seq) >= seq)
		return true;
	pthread_mutex_lock(&rf->lock);
	return false;
}

/* Called with the lock held; drops it around fdatasync so that appends go on meanwhile. */
static int rf__sync_locked(struct ringfile *rf)
{
	uint64_t target = rf->written_seq, gen = ++rf->sync_gen;
	int err = 0;

	rf->syncing = true;
	rf->sync_target = target;
	rf->dirty_since_ns = 0;
	pthread_mutex_unlock(&rf->lock);
	if (fdatasync(rf->fd))
		err = -errno;
	pthread_mutex_lock(&rf->lock);
	rf->syncing = false;
	rf->st.syncs++;
	if (err) {
		rf->broken = true;
		pr_err("ringfile: %s: fdatasync failed: %s", rf->path, strerror(-err));
	} else if (target > rf->durable_seq) {
		rf->durable_seq = target;
	}
	pthread_cond_broadcast(&rf->cond);
	rf__wake_sync(rf, gen & 1, INT_MAX);
	if (err)
		rf__wake_sync(rf, (gen + 1) & 1, INT_MAX); /* no next sync: all see it */
	else
		rf__wake_leader(rf, gen + 1);
	return err;
}

int ringfile__sync(struct ringfile *rf)
{
	int err = 0;

	pthread_mutex_lock(&rf->lock);
	while (rf->syncing)
		pthread_cond_wait(&rf->cond, &rf->lock);
	if (rf->durable_seq < rf->written_seq)
		err = rf__sync_locked(rf);
	pthread_mutex_unlock(&rf->lock);
	return err;
}

/*
 * A waiter that led (waited for the group-commit deadline) and leaves without beginning the
 * sync (another one covered its record, or the ring broke) hands the lead to a waiter of the
 * next sync: nobody else would begin it.
 */
int ringfile__wait_durable(struct ringfile *rf, uint64_t seq)
{
	bool led = false;
	int err = 0;

	pthread_mutex_lock(&rf->lock);
	if (seq >= rf->next_seq)
		err = -EINVAL; /* never appended: waiting would never end */
	while (rf->durable_seq < seq && !err) {
		uint64_t now, due;
		struct timespec ts;

		if (rf->broken) {
			err = -EIO;
			/* no sync will come: every waiter of one sees that itself */
			rf__wake_sync(rf, 0, INT_MAX);
			rf__wake_sync(rf, 1, INT_MAX);
			break;
		}
		if (rf->syncing) {
			if (rf__wait_sync(rf, seq <= rf->sync_target ? rf->sync_gen
								     : rf->sync_gen + 1, seq)) {
				if (!led)
					return 0;
				pthread_mutex_lock(&rf->lock); /* to hand the lead on below */
			}
			continue;
		}
		if (seq > rf->written_seq) {
			/* an older record is still being written: a sync now could not cover seq */
			rf__wait_written(rf);
			continue;
		}
		if (rf->leading) {
			if (rf__wait_sync(rf, rf->sync_gen + 1, seq)) {
				if (!led)
					return 0;
				pthread_mutex_lock(&rf->lock);
			}
			continue;
		}
		now = port_clock_mono_ns();
		due = rf->dirty_since_ns + rf->fsync_ms * NSEC_PER_MSEC;
		if (!rf->dirty_since_ns || now >= due) {
			err = rf__sync_locked(rf);
			led = false;
			continue;
		}
		ts.tv_sec = due / NSEC_PER_SEC;
		ts.tv_nsec = due % NSEC_PER_SEC;
		rf->leading = led = true;
		pthread_cond_timedwait(&rf->cond, &rf->lock, &ts);
		rf->leading = false;
	}
	if (led && !rf->syncing)
		rf__wake_leader(rf, rf->sync_gen + 1);
	pthread_mutex_unlock(&rf->lock);
	return err;
}

uint64_t ringfile__durable_seq(struct ringfile *rf)
{
	uint64_t v;

	pthread_mutex_lock(&rf->lock);
	v = rf->durable_seq;
	pthread_mutex_unlock(&rf->lock);
	return v;
}

uint64_t ringfile__sync_due_ns(struct ringfile *rf)
{
	uint64_t v;

	pthread_mutex_lock(&rf->lock);
	v = rf->dirty_since_ns ? rf->dirty_since_ns + rf->fsync_ms * NSEC_PER_MSEC : 0;
	pthread_mutex_unlock(&rf->lock);
	return v;
}

/* ---- read ---------------------------------------------------------------------------------- */

/* Called locked: the slot of a live data record; one still being written is waited for. */
static bool rf__live_data(struct ringfile *rf, uint64_t seq, struct rf_slot *out)
{
	struct rf_slot *s;

	for (;;) {
		if (seq < rf->first_seq || seq >= rf->next_seq)
			return false;
		s = rf__slot(rf, seq);
		if (!s->pending)
			break;
		rf__wait_written(rf);
	}
	if (!s->off || (s->flags & RINGFILE_F_CONSUME))
		return false;
	*out = *s;
	return true;
}

/*
 * Reads and validates the record in slot s (expected seq) into one allocation:
 * [payload][NUL pad][decoded metadata]. with_payload = false skips the payload and the CRC
 * (the header is still checked against seq and generation).
 */
static int rf__load_record(struct ringfile *rf, const struct rf_slot *s, uint64_t seq,
			   bool with_payload, struct record_meta *meta, void **out, size_t *len)
{
	struct rec_hdr h;
	size_t plen, room;
	uint8_t *rec, *buf;
	size_t rlen = with_payload ? s->len : 0;
	int err;

	if (!with_payload) {
		uint8_t fixed[RINGFILE_REC_FIXED];

		err = port_pread_full(rf->fd, fixed, sizeof(fixed), s->off);
		if (err)
			return err;
		if (!rec__get_fixed(fixed, s->len, &h) || h.seq != seq || h.gen != rf->gen)
			return -EIO;
		rlen = h.hdr_len;
	}
	rec = malloc(rlen);
	if (!rec)
		return -ENOMEM;
	err = port_pread_full(rf->fd, rec, rlen, s->off);
	if (err)
		goto out;
	err = -EIO;
	if (!rec__get_fixed(rec, s->len, &h) || h.seq != seq || h.gen != rf->gen ||
	    h.total != s->len || (with_payload && rec__crc(rec, h.total) != h.crc))
		goto out;
	plen = with_payload ? h.payload_len : 0;
	room = align8(plen + 1) + meta__decoded_room(&h);
	buf = malloc(room);
	err = -ENOMEM;
	if (!buf)
		goto out;
	memcpy(buf, rec + h.hdr_len, plen);
	buf[plen] = 0;
	err = meta__decode(rec, &h, buf + align8(plen + 1), meta);
	if (err) {
		free(buf);
		goto out;
	}
	*out = buf;
	if (len)
		*len = h.payload_len;
out:
	free(rec);
	return err;
}

int ringfile__read(struct ringfile *rf, uint64_t seq, struct record_meta *meta, void **payload,
		   size_t *len)
{
	struct rf_slot s;
	int err;

	*payload = NULL;
	pthread_mutex_lock(&rf->lock);
	if (!rf__live_data(rf, seq, &s)) {
		pthread_mutex_unlock(&rf->lock);
		return -ENOENT;
	}
	pthread_mutex_unlock(&rf->lock);
	/* read without the lock: an append may overwrite the record meanwhile, the CRC tells */
	err = rf__load_record(rf, &s, seq, true, meta, payload, len);
	if (err == -EIO) {
		pthread_mutex_lock(&rf->lock);
		if (!rf__live_data(rf, seq, &s))
			err = -ENOENT;
		else
			rf->st.corrupt++;
		pthread_mutex_unlock(&rf->lock);
	}
	return err;
}

int ringfile__foreach(struct ringfile *rf, uint64_t from_seq, bool with_payload,
		      ringfile_iter_fn cb, void *ctx)
{
	int ret = 0;

	pthread_mutex_lock(&rf->lock);
	for (uint64_t seq = from_seq > rf->first_seq ? from_seq : rf->first_seq;
	     seq < rf->next_seq && !ret; seq++) {
		struct record_meta meta;
		struct rf_slot s;
		void *buf;
		size_t len;
		int err;

		if (!rf__live_data(rf, seq, &s))
			continue;
		err = rf__load_record(rf, &s, seq, with_payload, &meta, &buf, &len);
		if (err == -ENOMEM) {
			ret = err;
			break;
		}
		if (err) {
			rf->st.corrupt++;
			continue;
		}
		ret = cb(ctx, seq, &meta, with_payload ? buf : NULL, len);
		free(buf);
	}
	pthread_mutex_unlock(&rf->lock);
	return ret;
}

/* ---- spool ---------------------------------------------------------------------------------- */

int ringfile__consume(struct ringfile *rf, uint64_t upto, bool durable)
{
	struct record_meta m = { .time_ns = port_clock_real_ns() };
	uint64_t seq = 0;
	int err = 0;

	pthread_mutex_lock(&rf->lock);
	if (upto >= rf->next_seq)
		upto = rf->next_seq - 1;
	if (upto > rf->consumed) {
		rf->consumed = upto;
		err = rf__append_locked(rf, RINGFILE_F_CONSUME, &m, NULL, 0, &seq);
	}
	pthread_mutex_unlock(&rf->lock);
	if (!err && seq && durable)
		err = ringfile__wait_durable(rf, seq);
	return err;
}

int ringfile__peek_oldest(struct ringfile *rf, uint64_t *seq)
{
	int err = -ENOENT;

	pthread_mutex_lock(&rf->lock);
	for (uint64_t s = rf->first_seq > rf->consumed ? rf->first_seq : rf->consumed + 1;
	     s < rf->next_seq; s++) {
		struct rf_slot slot;

		if (rf__live_data(rf, s, &slot)) {
			*seq = s;
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&rf->lock);
	return err;
}

bool ringfile__is_empty(struct ringfile *rf)
{
	uint64_t seq;

	return ringfile__peek_oldest(rf, &seq) != 0;
}

/* ---- state ---------------------------------------------------------------------------------- */

void ringfile__stats(struct ringfile *rf, struct ringfile_stats *st)
{
	pthread_mutex_lock(&rf->lock);
	*st = rf->st;
	st->records = rf->live_records;
	st->bytes = rf->live_bytes;
	st->capacity = rf->data_end - rf->data_off;
	st->last_seq = rf->next_seq - 1;
	st->durable_seq = rf->durable_seq;
	st->consumed_seq = rf->consumed;
	st->first_seq = 0;
	st->used = 0;
	for (uint64_t seq = rf->first_seq; seq < rf->next_seq; seq++) {
		struct rf_slot *s = rf__slot(rf, seq);

		if (!s->off)
			continue;
		if (!st->used)
			st->used = s->off < rf->head ? rf->head - s->off
						     : st->capacity - (s->off - rf->head);
		if (s->flags & RINGFILE_F_CONSUME)
			continue;
		st->first_seq = seq;
		st->oldest_time_ns = s->time_ns;
		break;
	}
	pthread_mutex_unlock(&rf->lock);
}

uint64_t ringfile__first_seq(struct ringfile *rf)
{
	uint64_t v = 0;

	pthread_mutex_lock(&rf->lock);
	for (uint64_t seq = rf->first_seq; seq < rf->next_seq; seq++) {
		struct rf_slot *s = rf__slot(rf, seq);

		if (s->off && !(s->flags & RINGFILE_F_CONSUME)) {
			v = seq;
			break;
		}
	}
	pthread_mutex_unlock(&rf->lock);
	return v;
}

const char *ringfile__path(const struct ringfile *rf)
{
	return rf->path;
}

void ringfile__free(struct ringfile *rf)
{
	if (!rf)
		return;
	if (rf->fd >= 0) {
		if (rf->written_seq > rf->durable_seq && !rf->broken)
			fdatasync(rf->fd);
		close(rf->fd);
	}
	pthread_cond_destroy(&rf->cond);
	pthread_cond_destroy(&rf->written);
	pthread_mutex_destroy(&rf->lock);
	free(rf->slots);
	free(rf->path);
	free(rf);
}
