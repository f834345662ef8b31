// SPDX-License-Identifier: MIT
/*
 * store/api/duty.c — fleet-wide duty cycling (rules in store/api/duty.h).
 *
 * Two open-addressing tables under one lock: devices (hash of the certificate name -> group,
 * number in the group, the windows it was told) and groups (hash of the group-by label values
 * -> numbers handed out, devices in it). Both hold at most max_devices entries (a group has at
 * least one device: an empty one is deleted).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/api/duty.h"
#include "port/hash.h"

#define DUTY_MAX_KEYS 8
#define DUTY_TOLD 4		/* sampling windows told, remembered per device (each answer tells 2) */
#define DUTY_EXPIRE_PERIODS 3	/* a device unseen this many of its periods is forgotten */

/*
 * A device is its certificate: one entry per certificate name, whatever labels it sends; its
 * group is that of the labels of its latest upload. The windows it was told to sample in are
 * kept with the weight it was told, so that only profiles sampled under a schedule are weighed.
 */
struct duty_dev {
	uint64_t id;		/* hash of the certificate name; 0 = empty */
	uint64_t grp;		/* its group's id */
	uint32_t index;		/* its number in the group */
	uint32_t seen_w;	/* window of its last upload */
	uint32_t told_w[DUTY_TOLD];	/* windows it was told to sample in (0 = none) */
	uint32_t told_weight[DUTY_TOLD];	/* milli */
};

struct duty_group {
	uint64_t id;		/* 0 = empty */
	uint32_t n;		/* numbers handed out: 0 .. n - 1, some may be holes */
	uint32_t live;		/* devices in it now */
};

struct duty {
	struct duty_opts o;
	char keys[DUTY_MAX_KEYS][64];
	size_t n_keys;
	pthread_mutex_t lock;
	struct duty_dev *dev;
	struct duty_group *grp;
	size_t cap, n_dev, n_grp;
	struct duty_stats st;
};

static uint64_t mix(uint64_t h, const char *s)
{
	h = s ? hash_fnv64_add_str(h, s) : h;
	return (h ^ 0xff) * HASH_FNV64_PRIME; /* a separator: "ab"+"c" != "a"+"bc" */
}

static uint64_t fin(uint64_t z)
{
	z = hash_mix64(z);
	return z ? z : 1;
}

struct duty *duty__new(const struct duty_opts *o, char *err, size_t errlen)
{
	struct duty *d;
	const char *p;

	if (!o->budget_percent || o->budget_percent > 100 || !o->window_s || !o->max_devices ||
	    o->max_devices > (1u << 30)) {
		snprintf(err, errlen, "duty cycling: budget 1..100 %%, window >= 1 s, 1..2^30 "
			 "devices");
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "duty cycling: out of memory");
		return NULL;
	}
	d->o = *o;
	for (p = o->group_by ? o->group_by : ""; *p && d->n_keys < DUTY_MAX_KEYS;) {
		size_t n = strcspn(p, ",");

		if (n && n < sizeof(d->keys[0]))
			snprintf(d->keys[d->n_keys++], sizeof(d->keys[0]), "%.*s", (int)n, p);
		p += n + (p[n] == ',');
	}
	d->cap = 16;
	while (d->cap < 2 * o->max_devices)
		d->cap *= 2;
	d->dev = calloc(d->cap, sizeof(*d->dev));
	d->grp = calloc(d->cap, sizeof(*d->grp));
	pthread_mutex_init(&d->lock, NULL);
	if (!d->dev || !d->grp) {
		duty__free(d);
		snprintf(err, errlen, "duty cycling: out of memory");
		return NULL;
	}
	return d;
}

void duty__free(struct duty *d)
{
	if (!d)
		return;
	free(d->dev);
	free(d->grp);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static const char *label_of(const struct record_label *l, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(l[i].key, key))
			return l[i].value;
	return "";
}

/* The slot of id in the devices' or the groups' table: its own, or the empty one (lock held). */
static size_t dev_slot(const struct duty *d, uint64_t id)
{
	size_t i = (size_t)id & (d->cap - 1);

	while (d->dev[i].id && d->dev[i].id != id)
		i = (i + 1) & (d->cap - 1);
	return i;
}

static size_t grp_slot(const struct duty *d, uint64_t id)
{
	size_t i = (size_t)id & (d->cap - 1);

	while (d->grp[i].id && d->grp[i].id != id)
		i = (i + 1) & (d->cap - 1);
	return i;
}

/*
 * Linear probing's deletion: the entries after the hole that probed past it move back into it,
 * so that every lookup still finds its entry (no tombstones to accumulate).
 */
#define DELETE_SLOT(tab, cap, hole)						\
	do {									\
		size_t h_ = (hole), j_ = h_;					\
		for (;;) {							\
			size_t home_;						\
			j_ = (j_ + 1) & ((cap) - 1);				\
			if (!(tab)[j_].id)					\
				break;						\
			home_ = (size_t)(tab)[j_].id & ((cap) - 1);		\
			/* (home_, j_] cyclically holds h_: it may not move */	\
			if (h_ <= j_ ? (h_ < home_ && home_ <= j_)		\
				     : (h_ < home_ || home_ <= j_))		\
				continue;					\
			(tab)[h_] = (tab)[j_];					\
			h_ = j_;						\
		}								\
		memset(&(tab)[h_], 0, sizeof((tab)[h_]));			\
	} while (0)

static uint64_t slots_of(const struct duty *d, uint64_t n)
{
	uint64_t k = n * d->o.budget_percent / 100;

	return k ? k : 1;
}

/*
 * Renumbers a group whose numbers have more holes than devices (those left it): 0 .. live - 1
 * again, so that its devices sample as often as its size says. One pass over the table, rare:
 * only after half of a group left (lock held).
 */
static void group_compact(struct duty *d, struct duty_group *g)
{
	uint32_t next = 0;

	for (size_t i = 0; i < d->cap; i++)
		if (d->dev[i].id && d->dev[i].grp == g->id)
			d->dev[i].index = next++;
	g->n = next;
}

/* A device leaves its group: the group goes when empty (lock held). */
static void group_leave(struct duty *d, uint64_t grp_id)
{
	size_t g = grp_slot(d, grp_id);

	if (!d->grp[g].id)
		return;
	if (--d->grp[g].live == 0) {
		DELETE_SLOT(d->grp, d->cap, g);
		d->n_grp--;
	} else if (d->grp[g].n > 2 * d->grp[g].live + 1) {
		group_compact(d, &d->grp[g]);
	}
}

/* A device joins a group (made when new): its number (lock held). */
static uint32_t group_join(struct duty *d, uint64_t grp_id)
{
	size_t g = grp_slot(d, grp_id);

	if (!d->grp[g].id) {
		d->grp[g] = (struct duty_group){ .id = grp_id };
		d->n_grp++;
	}
	d->grp[g].live++;
	return d->grp[g].n++;
}

/* Whether a device last seen in seen_w is forgotten by window w (lock held). */
static bool dev_expired(const struct duty *d, const struct duty_dev *dv, uint64_t w)
{
	const struct duty_group *g = &d->grp[grp_slot(d, dv->grp)];
	uint64_t n = g->id ? g->n : 1, period = n / slots_of(d, n) + 1;

	return w > dv->seen_w + DUTY_EXPIRE_PERIODS * period;
}

static void dev_delete(struct duty *d, size_t i)
{
	uint64_t grp = d->dev[i].grp;

	DELETE_SLOT(d->dev, d->cap, i);
	d->n_dev--;
	d->st.expired++;
	group_leave(d, grp);
}

/*
 * The table is full: forget the devices unseen for DUTY_EXPIRE_PERIODS of their periods (one
 * pass; the stalest first would need a heap for no gain: all expired go). Returns whether there
 * is room now (lock held).
 */
static bool dev_sweep(struct duty *d, uint64_t w)
{
	for (size_t i = 0; i < d->cap;) {
		if (d->dev[i].id && dev_expired(d, &d->dev[i], w))
			dev_delete(d, i); /* an entry moved back into i: look at i again */
		else
			i++;
	}
	return d->n_dev < d->o.max_devices;
}

/*
 * The device's entry, added when new and there is room, moved to grp_id when its labels now
 * say another group; NULL when untracked (lock held).
 */
static struct duty_dev *device_of(struct duty *d, uint64_t dev_id, uint64_t grp_id, uint64_t w)
{
	size_t i = dev_slot(d, dev_id);

	if (d->dev[i].id) {
		if (dev_expired(d, &d->dev[i], w)) {
			dev_delete(d, i);		/* back after a long absence: anew */
			i = dev_slot(d, dev_id);
		} else if (d->dev[i].grp != grp_id) {
			struct duty_dev dv = d->dev[i];	/* the latest labels win */

			group_leave(d, dv.grp);
			i = dev_slot(d, dev_id);	/* a compaction does not move slots */
			d->dev[i].grp = grp_id;
			d->dev[i].index = group_join(d, grp_id);
			d->st.moved++;
			return &d->dev[i];
		} else {
			return &d->dev[i];
		}
	}
	if (d->n_dev >= d->o.max_devices && !dev_sweep(d, w))
		return NULL;
	i = dev_slot(d, dev_id);
	d->dev[i] = (struct duty_dev){ .id = dev_id, .grp = grp_id };
	d->dev[i].index = group_join(d, grp_id);
	d->n_dev++;
	return &d->dev[i];
}

/* Whether number i of n with k slots samples in window w. */
static bool in_window(uint64_t i, uint64_t n, uint64_t k, uint64_t w)
{
	return (i + n - (w % n) * k % n) % n < k;
}

/* Remembers that dv was told to sample in window w with weight (lock held). */
static void dev_told(struct duty_dev *dv, uint64_t w, uint64_t weight)
{
	size_t old = 0;

	for (size_t i = 0; i < DUTY_TOLD; i++) {
		if (dv->told_w[i] == (uint32_t)w) {
			old = i;
			break;
		}
		if (dv->told_w[i] < dv->told_w[old])
			old = i;
	}
	dv->told_w[old] = (uint32_t)w;
	dv->told_weight[old] = (uint32_t)weight;
}

static void untracked_schedule(struct duty *d, const char *device, uint64_t w,
			       struct duty_schedule *out)
{
	out->sample = duty__default(device, w, d->o.budget_percent);
	for (uint64_t x = w + 1; x <= w + 100000; x++) {
		if (duty__default(device, x, d->o.budget_percent)) {
			out->next_start_s = x * d->o.window_s;
			break;
		}
	}
	out->weight_milli = 100000 / d->o.budget_percent;
}

void duty__schedule(struct duty *d, const char *device, const struct record_label *labels,
		    size_t n_labels, uint64_t now_s, struct duty_schedule *out)
{
	uint64_t dev_id = fin(mix(HASH_FNV64_BASIS, device)), grp_id = HASH_FNV64_BASIS;
	uint64_t w = now_s / d->o.window_s, n, k;
	const struct duty_group *g;
	struct duty_dev *dv;

	for (size_t i = 0; i < d->n_keys; i++)
		grp_id = mix(grp_id, label_of(labels, n_labels, d->keys[i]));
	grp_id = fin(grp_id);
	memset(out, 0, sizeof(*out));
	out->window_s = d->o.window_s;
	out->window_start_s = w * d->o.window_s;
	out->rate_hz = d->o.rate_hz;
	out->round_s = d->o.round_s;
	out->period_s = d->o.period_s;
	out->budget_percent = d->o.budget_percent;
	pthread_mutex_lock(&d->lock);
	d->st.schedules++;
	dv = device_of(d, dev_id, grp_id, w);
	if (!dv) {
		d->st.untracked++;
		pthread_mutex_unlock(&d->lock);
		return untracked_schedule(d, device, w, out);
	}
	dv->seen_w = (uint32_t)w;
	g = &d->grp[grp_slot(d, grp_id)];
	n = g->n; /* numbers, holes of devices gone included: each still samples 1 in n / k */
	k = slots_of(d, n);
	out->weight_milli = n * 1000 / k;
	out->sample = in_window(dv->index, n, k, w);
	if (out->sample)
		dev_told(dv, w, out->weight_milli);
	/* the next window whose block of k covers the device: at most n / k + 1 windows away */
	for (uint64_t x = w + 1; x <= w + n / k + 1; x++) {
		if (in_window(dv->index, n, k, x)) {
			out->next_start_s = x * d->o.window_s;
			dev_told(dv, x, out->weight_milli);
			break;
		}
	}
	out->group_devices = g->live;
	out->group_slots = (uint32_t)k;
	pthread_mutex_unlock(&d->lock);
}

uint64_t duty__weight(struct duty *d, const char *device, uint64_t window)
{
	uint64_t dev_id = fin(mix(HASH_FNV64_BASIS, device)), weight = 1000;
	size_t i;

	if (!device || !*device)
		return 1000;
	pthread_mutex_lock(&d->lock);
	i = dev_slot(d, dev_id);
	for (size_t t = 0; window && d->dev[i].id && t < DUTY_TOLD; t++)
		if (d->dev[i].told_w[t] == (uint32_t)window && window <= UINT32_MAX)
			weight = d->dev[i].told_weight[t];
	if (weight == 1000)
		d->st.unweighed++;
	else
		d->st.weighed++;
	pthread_mutex_unlock(&d->lock);
	return weight;
}

bool duty__default(const char *device, uint64_t window, unsigned budget_percent)
{
	uint64_t h = fin(mix(0x9e3779b97f4a7c15ull ^ window * HASH_FNV64_PRIME, device));

	return h % 10000 < (uint64_t)budget_percent * 100;
}

int duty__json(const struct duty_schedule *s, char *buf, size_t len)
{
	int n = snprintf(buf, len, "{\"sample\":%s,\"window_s\":%" PRIu64 ",\"window_start\":%"
			 PRIu64 ",\"next_start\":%" PRIu64 ",\"weight\":%" PRIu64 ".%03" PRIu64
			 ",\"rate_hz\":%u,\"round_s\":%u,\"period_s\":%u,\"group_devices\":%u,"
			 "\"group_slots\":%u,\"budget_percent\":%u}", s->sample ? "true" : "false",
			 s->window_s,
			 s->window_start_s, s->next_start_s, s->weight_milli / 1000,
			 s->weight_milli % 1000, s->rate_hz, s->round_s, s->period_s,
			 s->group_devices, s->group_slots, s->budget_percent);

	return n < 0 || (size_t)n >= len ? -1 : n;
}

void duty__stats(struct duty *d, struct duty_stats *st)
{
	pthread_mutex_lock(&d->lock);
	*st = d->st;
	st->devices = d->n_dev;
	st->groups = d->n_grp;
	pthread_mutex_unlock(&d->lock);
}
