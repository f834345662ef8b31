/* SPDX-License-Identifier: MIT */
/*
 * store/scrape/scrape-sd.h — Prometheus' file_sd format, the collector's scrape targets:
 *
 *   [{"targets": ["10.0.0.7:6060", "gw-1.lan:6060"], "labels": {"service_name": "checkout",
 *     "__scheme__": "https", "region": "eu"}}, ...]
 *
 * Each target of a group gets the group's labels. service_name is the profiles' service;
 * __scheme__ (http, the default, or https: mutual TLS) how it is reached; other labels starting
 * with "__" are Prometheus' own and dropped; the rest become the profiles' labels. Bounded:
 * SD_MAX_TARGETS targets, SD_MAX_LABELS labels a group, short strings; anything else (another
 * key, a number, a string too long) is an error that names where it is.
 */
#ifndef EDGEPROF_STORE_SCRAPE_SD_H
#define EDGEPROF_STORE_SCRAPE_SD_H

#include <stdbool.h>
#include <stddef.h>

#define SD_MAX_TARGETS 1024
#define SD_MAX_LABELS 16
#define SD_MAX_FILE (1u << 20)

struct sd_label {
	char key[64];
	char value[128];
};

struct sd_target {
	char addr[128];		/* HOST:PORT */
	bool https;
	char service[128];	/* service_name, or "" */
	struct sd_label labels[SD_MAX_LABELS];
	size_t n_labels;
};

/* Parses text[0..len): the number of targets written to out (at most max), or -EINVAL. */
int sd_parse(const char *text, size_t len, struct sd_target *out, size_t max, char *err,
	     size_t errlen);

#endif /* EDGEPROF_STORE_SCRAPE_SD_H */
