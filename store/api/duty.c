// SPDX-License-Identifier: MIT
/*
 * store/api/duty.c — fleet-wide duty cycling (rules in store/api/duty.h).
 *
 * Two open-addressing tables under one lock: devices (hash of the certificate name and the
 * labels -> group, number in the group) and groups (hash of the group-by label values ->
 * devices seen). Both hold at most max_devices entries (a group has at least one device).
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

struct duty_dev {
	uint64_t id;		/* 0 = empty */
	uint32_t group;		/* index into groups */
	uint32_t index;		/* its number in the group */
};

struct duty_group {
	uint64_t id;		/* 0 = empty */
	uint32_t n;		/* devices seen */
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

/* The device's entry, added when new and there is room; NULL when untracked (lock held). */
static struct duty_dev *device_of(struct duty *d, uint64_t dev_id, uint64_t grp_id)
{
	size_t i = dev_slot(d, dev_id), g;

	if (d->dev[i].id)
		return &d->dev[i];
	if (d->n_dev >= d->o.max_devices)
		return NULL;
	g = grp_slot(d, grp_id);
	if (!d->grp[g].id) {
		d->grp[g].id = grp_id;
		d->n_grp++;
	}
	d->dev[i] = (struct duty_dev){ dev_id, (uint32_t)g, d->grp[g].n++ };
	d->n_dev++;
	return &d->dev[i];
}

static uint64_t slots_of(const struct duty *d, uint64_t n)
{
	uint64_t k = n * d->o.budget_percent / 100;

	return k ? k : 1;
}

/* Whether number i of n with k slots samples in window w. */
static bool in_window(uint64_t i, uint64_t n, uint64_t k, uint64_t w)
{
	return (i + n - (w % n) * k % n) % n < k;
}

void duty__schedule(struct duty *d, const char *device, const struct record_label *labels,
		    size_t n_labels, uint64_t now_s, struct duty_schedule *out)
{
	uint64_t dev_id = mix(HASH_FNV64_BASIS, device), grp_id = HASH_FNV64_BASIS;
	uint64_t w = now_s / d->o.window_s, n, k;
	struct duty_dev *dv;

	for (size_t i = 0; i < n_labels; i++)
		dev_id = mix(mix(dev_id, labels[i].key), labels[i].value);
	for (size_t i = 0; i < d->n_keys; i++)
		grp_id = mix(grp_id, label_of(labels, n_labels, d->keys[i]));
	dev_id = fin(dev_id);
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
	dv = device_of(d, dev_id, grp_id);
	if (!dv) {
		d->st.untracked++;
		pthread_mutex_unlock(&d->lock);
		out->sample = duty__default(device, w, d->o.budget_percent);
		for (uint64_t x = w + 1; x <= w + 100000; x++) {
			if (duty__default(device, x, d->o.budget_percent)) {
				out->next_start_s = x * d->o.window_s;
				break;
			}
		}
		out->weight_milli = 100000 / d->o.budget_percent;
		return;
	}
	n = d->grp[dv->group].n;
	k = slots_of(d, n);
	out->sample = in_window(dv->index, n, k, w);
	/* the next window whose block of k covers the device: at most n / k + 1 windows away */
	for (uint64_t x = w + 1; x <= w + n / k + 1; x++) {
		if (in_window(dv->index, n, k, x)) {
			out->next_start_s = x * d->o.window_s;
			break;
		}
	}
	out->weight_milli = n * 1000 / k;
	out->group_devices = (uint32_t)n;
	out->group_slots = (uint32_t)k;
	pthread_mutex_unlock(&d->lock);
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
