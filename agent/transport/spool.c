// SPDX-License-Identifier: MIT
/*
 * agent/transport/spool.c — the offline spool on port/ringfile.
 *
 * Besides the item's own labels every record carries two private ones: "_n", the spool's own
 * item number (1, 2, 3 ... for data records only: the ring's seqs also count consume markers),
 * and "_a", the number of the last acknowledged item when it was written. The gap between the
 * last acknowledged number and the next pending record's number is what the ring evicted unsent:
 * that count rides on the next upload (edgeprof_spool_dropped=N) and survives restarts, since
 * it is derived from what is on flash. Clock-less items also carry "_b", the boot they were
 * stamped in, so their monotonic time is used only within the same boot.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/transport/spool.h"
#include "port/file.h"
#include "port/log.h"
#include "port/ringfile.h"

#define SPOOL_LABEL_N	 "_n"
#define SPOOL_LABEL_ACK	 "_a"
#define SPOOL_LABEL_BOOT "_b"

struct spool {
	struct ringfile *rf;
	uint64_t next_n;	/* number of the next pushed item */
	uint64_t acked_n;	/* number of the newest acknowledged item */
	uint64_t pushed, bytes_written, evicted, corrupt_reads;
	char boot[40];		/* this boot's id, "" when unknown */
};

/* The kernel's id of this boot: a monotonic time means nothing across boots. */
static void spool_read_boot_id(struct spool *s)
{
	void *data = NULL;
	size_t len = 0;

	if (port_file_read_all("/proc/sys/kernel/random/boot_id", 64, &data, &len) == 0) {
		snprintf(s->boot, sizeof(s->boot), "%.*s", (int)strcspn(data, "\n"),
			 (char *)data);
	}
	free(data);
}

static uint64_t spool_label_u64(const struct record_meta *m, const char *key)
{
	for (size_t i = 0; i < m->n_labels; i++)
		if (!strcmp(m->labels[i].key, key))
			return strtoull(m->labels[i].value, NULL, 10);
	return 0;
}

struct spool_scan {
	uint64_t consumed_seq;
	uint64_t max_n, max_acked;
};

static int spool_scan_cb(void *ctx, uint64_t seq, const struct record_meta *meta,
			 const void *payload, size_t len)
{
	struct spool_scan *sc = ctx;
	uint64_t n = spool_label_u64(meta, SPOOL_LABEL_N);
	uint64_t a = spool_label_u64(meta, SPOOL_LABEL_ACK);

	if (n > sc->max_n)
		sc->max_n = n;
	if (a > sc->max_acked)
		sc->max_acked = a;
	if (seq <= sc->consumed_seq && n > sc->max_acked)
		sc->max_acked = n;	/* consumed means acknowledged */
	return 0;
}

struct spool *spool__open(const char *path, uint64_t size, char *err, size_t errlen)
{
	struct ringfile_opts o = {
		.size = size,
		.fsync_ms = 0,	/* every push is durable before it returns */
		.create = true,
		.quiet = false,
	};
	struct stat sb;
	struct ringfile_stats st;
	struct spool_scan sc = { 0 };
	struct spool *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "spool: out of memory");
		return NULL;
	}
	/*
	 * Size 0 keeps an existing spool as it is; a missing one, or one cut short before its
	 * header was written (power lost at creation), is made with the default size.
	 */
	if (!o.size && (stat(path, &sb) || sb.st_size < (off_t)RINGFILE_MIN_SIZE))
		o.size = (uint64_t)CONFIG_SPOOL_KB * 1024;
	s->rf = ringfile__open(path, &o, err, errlen);
	if (!s->rf) {
		free(s);
		return NULL;
	}
	ringfile__stats(s->rf, &st);
	sc.consumed_seq = st.consumed_seq;
	ringfile__foreach(s->rf, 0, false, spool_scan_cb, &sc);
	s->next_n = sc.max_n + 1;
	s->acked_n = sc.max_acked;
	spool_read_boot_id(s);
	if (st.records)
		pr_info("spool: %s: %" PRIu64 " records kept from before (%" PRIu64
			" corrupt skipped)", path, st.records, st.corrupt);
	return s;
}

void spool__free(struct spool *s)
{
	if (!s)
		return;
	ringfile__free(s->rf);
	free(s);
}

int spool__push(struct spool *s, const struct transport_item *it)
{
	struct record_label labels[UPLOAD_MAX_LABELS + 3];
	char nbuf[24], abuf[24];
	struct record_meta m = {
		.time_ns = it->time_ns,
		.flags = it->clock_unset ? RINGFILE_F_CLOCK_UNSET : 0,
		.service = it->service,
		.type = it->type,
		.key = it->key,
		.labels = labels,
	};
	uint64_t seq;
	size_t n = 0;
	int ret;

	if (it->n_labels > UPLOAD_MAX_LABELS)
		return -EINVAL;
	for (size_t i = 0; i < it->n_labels; i++) {
		if (it->labels[i].key[0] == '_')
			return -EINVAL;	/* ours */
		labels[n++] = (struct record_label){ it->labels[i].key, it->labels[i].value };
	}
	snprintf(nbuf, sizeof(nbuf), "%" PRIu64, s->next_n);
	snprintf(abuf, sizeof(abuf), "%" PRIu64, s->acked_n);
	labels[n++] = (struct record_label){ SPOOL_LABEL_N, nbuf };
	labels[n++] = (struct record_label){ SPOOL_LABEL_ACK, abuf };
	if (it->clock_unset && s->boot[0])
		labels[n++] = (struct record_label){ SPOOL_LABEL_BOOT, s->boot };
	m.n_labels = n;
	ret = ringfile__append(s->rf, &m, it->data, it->len, &seq);
	if (ret)
		return ret;
	s->next_n++;
	s->pushed++;
	s->bytes_written += ringfile__record_size(&m, it->len);
	return 0;
}

void spool_entry__release(struct spool_entry *e)
{
	if (!e)
		return;
	free(e->alloc);
	e->alloc = NULL;
}

/* Fills e from a record read back (strings stay in e->alloc). */
static void spool_entry_fill(struct spool *s, struct spool_entry *e, uint64_t seq,
			     const struct record_meta *m, size_t len)
{
	size_t k = 0;
	uint64_t n = 0;
	bool same_boot = false;

	for (size_t i = 0; i < m->n_labels; i++) {
		const struct record_label *l = &m->labels[i];

		if (!strcmp(l->key, SPOOL_LABEL_N))
			n = strtoull(l->value, NULL, 10);
		else if (!strcmp(l->key, SPOOL_LABEL_BOOT))
			same_boot = s->boot[0] && !strcmp(l->value, s->boot);
		else if (l->key[0] != '_' && k < UPLOAD_MAX_LABELS)
			e->labels[k++] = (struct upload_label){ l->key, l->value };
	}
	e->seq = seq;
	e->n = n;
	e->dropped_before = n > s->acked_n + 1 ? n - s->acked_n - 1 : 0;
	e->this_boot = same_boot;
	e->item = (struct transport_item){
		.service = m->service,
		.type = m->type,
		.labels = e->labels,
		.n_labels = k,
		.key = m->key,
		.time_ns = m->time_ns,
		.clock_unset = m->flags & RINGFILE_F_CLOCK_UNSET,
		.data = e->alloc,
		.len = len,
	};
}

int spool__peek(struct spool *s, struct spool_entry *e)
{
	struct record_meta m;
	uint64_t seq;
	size_t len;
	int ret;

	e->alloc = NULL;
	for (;;) {
		ret = ringfile__peek_oldest(s->rf, &seq);
		if (ret)
			return -ENOENT;
		ret = ringfile__read(s->rf, seq, &m, &e->alloc, &len);
		if (!ret)
			break;
		if (ret != -EIO && ret != -ENOENT)
			return ret;
		/* It rotted on flash or was overwritten meanwhile: it can never be sent. */
		if (ret == -EIO) {
			s->corrupt_reads++;
			pr_warn("spool: record %" PRIu64 " failed its CRC; dropped", seq);
		}
		ret = ringfile__consume(s->rf, seq, true);
		if (ret)
			return ret;
	}
	spool_entry_fill(s, e, seq, &m, len);
	return 0;
}

int spool__ack(struct spool *s, const struct spool_entry *e)
{
	int ret;

	ret = ringfile__consume(s->rf, e->seq, true);
	if (ret)
		return ret;
	s->bytes_written += RINGFILE_REC_FIXED;
	s->evicted += e->dropped_before;
	if (e->n > s->acked_n)
		s->acked_n = e->n;
	return 0;
}

bool spool__is_empty(struct spool *s)
{
	return ringfile__is_empty(s->rf);
}

static int spool_count_cb(void *ctx, uint64_t seq, const struct record_meta *meta,
			  const void *payload, size_t len)
{
	(*(uint64_t *)ctx)++;
	return 0;
}

void spool__stats(struct spool *s, struct spool_stats *st)
{
	struct ringfile_stats rs;
	uint64_t pending = 0;

	ringfile__stats(s->rf, &rs);
	*st = (struct spool_stats){
		.pending = 0,
		.bytes = rs.bytes,
		.capacity = rs.capacity,
		.pushed = s->pushed,
		.bytes_written = s->bytes_written,
		.evicted = s->evicted,
		.corrupt = rs.corrupt + s->corrupt_reads,
	};
	/* live records after the consume pointer (consumed ones stay until overwritten) */
	ringfile__foreach(s->rf, rs.consumed_seq + 1, false, spool_count_cb, &pending);
	st->pending = pending;
}
