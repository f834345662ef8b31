// SPDX-License-Identifier: MIT
/*
 * store/api/duty.c: a simulated fleet of 10,000 devices (4 firmware versions x 4 regions, groups of
 * very different sizes) under a 5 % budget, 300 windows of 60 s: every window at most 5 % + 1
 * point of the fleet samples (and of each group, within its one-device rounding), and the
 * fleet's weighted totals are within 3 % of the totals with every device sampling every window
 * (each device's load is its own, lognormal-like, and drifts per window). Devices join late
 * too. Then the untracked default (beyond the device bound) and the JSON.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "store/api/duty.h"

#define DEVICES 10000
#define WINDOWS 300

static uint64_t rng = 88172645463325252ull;

static double rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

struct dev {
	char name[32], version[16], region[16];
	double load;
	uint64_t joins;		/* first window it uploads in */
};

static struct dev devs[DEVICES];

static void make_fleet(void)
{
	for (int i = 0; i < DEVICES; i++) {
		/* uneven groups: version fw0 on half the fleet, region r3 on a tenth */
		int v = rnd() < 0.5 ? 0 : 1 + (int)(rnd() * 3), r = rnd() < 0.1 ? 3 : (int)(rnd() * 3);

		snprintf(devs[i].name, sizeof(devs[i].name), "gw-%05d", i);
		snprintf(devs[i].version, sizeof(devs[i].version), "fw%d", v);
		snprintf(devs[i].region, sizeof(devs[i].region), "r%d", r);
		devs[i].load = exp(2.0 * rnd()) * (1 + v); /* skewed, and by version */
		devs[i].joins = i < DEVICES * 9 / 10 ? 0 : 20 + (uint64_t)(rnd() * 40);
	}
}

static void test_fleet_budget_and_totals(void **state)
{
	struct duty_opts o = { .budget_percent = 5, .window_s = 60, .group_by = "version,region",
			       .max_devices = 20000, .rate_hz = 19, .round_s = 60,
			       .period_s = 60 };
	struct duty_stats st;
	char err[200];
	struct duty *d = duty__new(&o, err, sizeof(err));
	double full = 0, est = 0, worst = 0;
	uint64_t t0 = 1700000000 / 60 * 60;

	(void)state;
	assert_non_null(d);
	make_fleet();
	for (uint64_t w = 0; w < WINDOWS; w++) {
		int sampling = 0, present = 0;

		for (int i = 0; i < DEVICES; i++) {
			struct record_label l[2] = { { "region", devs[i].region },
						     { "version", devs[i].version } };
			struct duty_schedule s;
			double x = devs[i].load * (0.8 + 0.4 * rnd());

			if (w < devs[i].joins)
				continue;
			present++;
			duty__schedule(d, devs[i].name, l, 2, t0 + w * 60 + 7, &s);
			assert_int_equal(s.window_start_s, t0 + w * 60);
			assert_true(s.next_start_s > s.window_start_s);
			full += x;
			if (!s.sample)
				continue;
			sampling++;
			est += x * (double)s.weight_milli / 1000.0;
		}
		if ((double)sampling / present > worst)
			worst = (double)sampling / present;
		/* 5 % of each group, rounded down, at least one: never above 5 % + 1 point;
		 * once every device is known (not while devices join: window 0, and 20 to 60,
		 * when groups grow within a window), never above 5 % */
		assert_true(sampling <= present * 6 / 100);
		if (w && (w < 20 || w > 60))
			assert_true(sampling <= present * 5 / 100);
	}
	duty__stats(d, &st);
	assert_int_equal(st.devices, DEVICES);
	assert_int_equal(st.untracked, 0);
	printf("duty: %d devices, %" PRIu64 " groups, %d windows: at most %.2f %% sampling at once;"
	       " weighted total %.4g vs full sampling %.4g (%.2f %%)\n", DEVICES, st.groups,
	       WINDOWS, 100 * worst, est, full, 100 * (est - full) / full);
	assert_true(fabs(est - full) / full < 0.03);
	duty__free(d);
}

/* Beyond the device bound: the agent's own default, about budget % of windows, weight 100/b. */
static void test_untracked_default(void **state)
{
	struct duty_opts o = { .budget_percent = 10, .window_s = 30, .max_devices = 1 };
	struct duty_schedule s;
	struct duty_stats st;
	char err[200], json[512];
	struct duty *d = duty__new(&o, err, sizeof(err));
	int on = 0;

	(void)state;
	duty__schedule(d, "first", NULL, 0, 1000, &s);
	assert_int_equal(s.group_devices, 1);
	assert_true(s.sample); /* one device, one slot: it samples every window */
	for (uint64_t w = 0; w < 10000; w++) {
		/* "first" keeps uploading: it never expires, so "second" finds the table full */
		duty__schedule(d, "first", NULL, 0, w * 30, &s);
		duty__schedule(d, "second", NULL, 0, w * 30, &s);
		on += s.sample;
		assert_int_equal(s.sample, duty__default("second", w, 10));
	}
	assert_in_range(on, 850, 1150);
	assert_int_equal(s.weight_milli, 10000);
	duty__stats(d, &st);
	assert_int_equal(st.untracked, 10000);
	assert_true(duty__json(&s, json, sizeof(json)) > 0);
	assert_non_null(strstr(json, "\"weight\":10.000"));
	assert_int_equal(duty__json(&s, json, 8), -1);
	assert_null(duty__new(&(struct duty_opts){ .budget_percent = 0, .window_s = 1,
						    .max_devices = 1 }, err, sizeof(err)));
	duty__free(d);
}

/*
 * A device is its certificate (issue 38): one certificate sending 420 label variants (a nonce)
 * stays one device of its group, and 20 real devices of that group then share 1 slot of 20:
 * one of them samples each window, not all of them in one.
 */
static void test_one_certificate_one_device(void **state)
{
	struct duty_opts o = { .budget_percent = 5, .window_s = 60, .group_by = "version",
			       .max_devices = 60 };
	struct duty *d = duty__new(&o, (char[200]){ 0 }, 200);
	struct duty_schedule s;
	struct duty_stats st;
	char nonce[16], name[16];
	int sampling[20] = { 0 };

	(void)state;
	for (int i = 0; i < 420; i++) {
		struct record_label l[2] = { { "nonce", nonce }, { "version", "1" } };

		snprintf(nonce, sizeof(nonce), "%d", i);
		duty__schedule(d, "attacker", l, 2, 1000000 + (uint64_t)i, &s);
		assert_int_equal(s.group_devices, 1);
	}
	for (int w = -1; w < 20; w++) { /* -1: the 19 join */
		for (int i = 0; i < 19; i++) {
			struct record_label l[1] = { { "version", "1" } };

			snprintf(name, sizeof(name), "gw-%d", i);
			duty__schedule(d, name, l, 1, 1000000 + 660 + (uint64_t)w * 60, &s);
			if (w < 0)
				continue;
			sampling[w] += s.sample;
			assert_int_equal(s.group_devices, 20);
		}
		if (w >= 0)
			assert_true(sampling[w] <= 1); /* 1 slot of 20 (the attacker may hold it) */
	}
	duty__stats(d, &st);
	assert_int_equal(st.devices, 20);
	assert_int_equal(st.untracked, 0);
	duty__free(d);
}

/* The latest labels win: a device that changes version leaves its old group for the new. */
static void test_latest_labels_win(void **state)
{
	struct duty_opts o = { .budget_percent = 50, .window_s = 10, .group_by = "version",
			       .max_devices = 16 };
	struct duty *d = duty__new(&o, (char[200]){ 0 }, 200);
	struct record_label v1[1] = { { "version", "1" } }, v2[1] = { { "version", "2" } };
	struct duty_schedule s;
	struct duty_stats st;

	(void)state;
	duty__schedule(d, "a", v1, 1, 100, &s);
	duty__schedule(d, "b", v1, 1, 100, &s);
	assert_int_equal(s.group_devices, 2);
	duty__schedule(d, "b", v2, 1, 101, &s);
	assert_int_equal(s.group_devices, 1);
	duty__schedule(d, "c", v1, 1, 102, &s);
	assert_int_equal(s.group_devices, 2); /* "a" and "c" (b's number is a hole) */
	assert_int_equal(s.weight_milli, 3000); /* each samples 1 window in 3 of the numbers */
	duty__stats(d, &st);
	assert_int_equal(st.devices, 3);
	assert_int_equal(st.groups, 2);
	assert_int_equal(st.moved, 1);
	duty__free(d);
}

/*
 * Entries expire: a table of 16 full of devices that stopped uploading takes new devices once
 * the old are a few periods stale; until then a newcomer is untracked.
 */
static void test_expiry_frees_the_table(void **state)
{
	struct duty_opts o = { .budget_percent = 50, .window_s = 10, .max_devices = 16 };
	struct duty *d = duty__new(&o, (char[200]){ 0 }, 200);
	struct duty_schedule s;
	struct duty_stats st;
	char name[16];

	(void)state;
	for (int i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "old-%d", i);
		duty__schedule(d, name, NULL, 0, 1000, &s);
	}
	duty__schedule(d, "new", NULL, 0, 1010, &s);
	assert_int_equal(s.group_devices, 0); /* full, nobody stale yet: untracked */
	/* a period of 16 / 8 + 1 = 3 windows, expired after 3 of them: 10 windows on */
	duty__schedule(d, "new", NULL, 0, 1000 + 11 * 10, &s);
	assert_int_equal(s.group_devices, 1);
	duty__stats(d, &st);
	assert_int_equal(st.devices, 1);
	assert_int_equal(st.expired, 16);
	assert_int_equal(st.groups, 1);
	duty__free(d);
}

/*
 * Weights only for a told window: a device told to sample window w (now, or as its next) gets
 * n / k for a profile of w, weight 1 for any other window, and so does a name never scheduled.
 */
static void test_weight_only_for_told_windows(void **state)
{
	struct duty_opts o = { .budget_percent = 25, .window_s = 10, .max_devices = 16 };
	struct duty *d = duty__new(&o, (char[200]){ 0 }, 200);
	struct duty_schedule s;
	char name[16];
	uint64_t next = 0;

	(void)state;
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "gw-%d", i);
		duty__schedule(d, name, NULL, 0, 1000, &s);
	}
	duty__schedule(d, "gw-7", NULL, 0, 1001, &s); /* 8 devices, 2 slots: weight 4 */
	assert_int_equal(s.weight_milli, 4000);
	next = s.next_start_s / 10;
	assert_int_equal(duty__weight(d, "gw-7", next), 4000);
	if (s.sample)
		assert_int_equal(duty__weight(d, "gw-7", 100), 4000);
	else
		assert_int_equal(duty__weight(d, "gw-7", 100), 1000);
	assert_int_equal(duty__weight(d, "gw-7", next + 1), 1000);
	assert_int_equal(duty__weight(d, "pyroscope-app", next), 1000);
	assert_int_equal(duty__weight(d, "", next), 1000);
	duty__free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_budget_and_totals),
		cmocka_unit_test(test_untracked_default),
		cmocka_unit_test(test_one_certificate_one_device),
		cmocka_unit_test(test_latest_labels_win),
		cmocka_unit_test(test_expiry_frees_the_table),
		cmocka_unit_test(test_weight_only_for_told_windows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
