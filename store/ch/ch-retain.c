// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-retain.c — retention of the ClickHouse backend (--retention-days N): 18.16 has no
 * TTL, so the day partitions of samples, their rollups (samples_1g, samples_1h, samples_1d) and
 * profiles older than N days are dropped (ALTER TABLE ... DROP PARTITION ID) by the writer
 * thread, at start and hourly. The dictionaries
 * stay: small, and shared by the days that remain. Several collectors may do it at once: a
 * partition gone meanwhile is not listed again.
 *
 * With --ch-cluster the partitions are those of the <table>_local tables of every server of the
 * cluster: an ALTER of a Distributed table does not reach the shards, and ON CLUSTER needs
 * ZooKeeper in 18.16. The servers are the cluster's in system.clusters (asked of the server this
 * collector talks to, so a shard added to remote_servers is covered without a restart), reached
 * over HTTP at their host_name and the port of --clickhouse; where the HTTP ports differ
 * (several servers on one host), --ch-shard-urls lists them. A server that cannot be reached is
 * logged and tried again at the next pass.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/log.h"
#include "store/ch/ch-store.h"

#define RETAIN_MAX_SERVERS 256	/* servers of one cluster one pass reaches */

/* Drops the old partitions of one server's tables (sfx "" or "_local"): 0 or -errno. */
static int retain_on(struct ch_store *c, struct ch_conn *conn, const char *server,
		     const char *sfx, char *err, size_t errlen)
{
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	int e;

	rb_printf(&sql, "SELECT DISTINCT table, partition_id FROM system.parts WHERE active AND "
		  "database = '%s' AND table IN ('samples%s', 'profiles%s', 'samples_1h%s', "
		  "'rollup_dirty%s', 'rollup_pending', 'samples_1g', 'samples_1d%s') AND "
		  "max_date < today() - %u FORMAT RowBinary", c->o.database, sfx, sfx, sfx, sfx, sfx,
		  c->retention_days);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, &res, err,
					     errlen);
	rb_free(&sql);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && rd_more(&r)) {
		char table[32], part[64], alter[160];

		rd_strcpy(&r, table, sizeof(table));
		rd_strcpy(&r, part, sizeof(part));
		if (r.bad || part[strspn(part, "0123456789")] ||
		    table[strspn(table, "abcdefghijklmnopqrstuvwxyz_0123456789")])
			break;
		snprintf(alter, sizeof(alter), "ALTER TABLE %s DROP PARTITION ID '%s'", table,
			 part);
		e = ch_conn__run(conn, alter, NULL, NULL, 0, NULL, err, errlen);
		if (!e) {
			pr_info("clickhouse: retention: dropped %s of %s on %s (older than %u "
				"days)", table, part, server, c->retention_days);
			pthread_mutex_lock(&c->lock);
			c->partitions_dropped++;
			pthread_mutex_unlock(&c->lock);
		}
	}
	rb_free(&res);
	return e;
}

/* One server of the cluster, by its HTTP address (the database is ours). */
static void retain_at(struct ch_store *c, const struct ch_opts *o)
{
	struct ch_conn *conn = ch_conn__new(o);
	char server[80], err[300] = "";
	int e = conn ? 0 : -ENOMEM;

	snprintf(server, sizeof(server), "%s:%s", o->host, o->port);
	if (!e)
		e = retain_on(c, conn, server, "_local", err, sizeof(err));
	if (e)
		pr_warn("clickhouse: retention on %s: %s", server,
			err[0] ? err : strerror(-e));
	ch_conn__free(conn);
}

/*
 * The cluster's servers (host_name, is_local) from system.clusters: count, or -errno. Each
 * replica is a server with tables of its own (no ReplicatedMergeTree here).
 */
static int cluster_hosts(struct ch_store *c, struct ch_conn *conn, char (*host)[64],
			 bool *local, int max, char *err, size_t errlen)
{
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	int n = 0, e;

	rb_printf(&sql, "SELECT host_name, is_local FROM system.clusters WHERE cluster = '%s' "
		  "ORDER BY shard_num, replica_num FORMAT RowBinary", c->cluster);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, &res, err,
					     errlen);
	rb_free(&sql);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && n < max && rd_more(&r)) {
		rd_strcpy(&r, host[n], sizeof(host[n]));
		local[n] = rd_u8(&r);
		if (!r.bad)
			n++;
	}
	rb_free(&res);
	if (!e && r.bad) {
		snprintf(err, errlen, "system.clusters: a malformed answer");
		e = -EIO;
	}
	return e ? e : n;
}

/* --ch-shard-urls: each listed server (checked at start by ch_retain__init). */
static void retain_urls(struct ch_store *c, int in_cluster)
{
	const char *p = c->shard_urls;
	int n = 0;

	while (*p) {
		size_t len = strcspn(p, ",");
		char url[160], err[200];
		struct ch_opts o;

		snprintf(url, sizeof(url), "%.*s", (int)len, p);
		p += len + (p[len] == ',');
		if (!url[0] || ch_opts__parse(url, &o, err, sizeof(err)))
			continue;
		snprintf(o.database, sizeof(o.database), "%s", c->o.database);
		retain_at(c, &o);
		n++;
	}
	if (in_cluster >= 0 && n != in_cluster)
		pr_warn("clickhouse: retention: --ch-shard-urls lists %d servers, cluster %s has "
			"%d in system.clusters: those not listed keep their old days", n,
			c->cluster, in_cluster);
}

static void retain_cluster(struct ch_store *c, struct ch_conn *conn)
{
	char (*host)[64] = calloc(RETAIN_MAX_SERVERS, sizeof(*host));
	bool local[RETAIN_MAX_SERVERS];
	char err[300] = "";
	int n = host ? cluster_hosts(c, conn, host, local, RETAIN_MAX_SERVERS, err, sizeof(err))
		     : -ENOMEM;

	if (n < 0)
		pr_warn("clickhouse: retention: listing cluster %s: %s", c->cluster,
			err[0] ? err : strerror(-n));
	if (c->shard_urls)
		retain_urls(c, n);
	else if (!n)
		pr_warn("clickhouse: retention: cluster %s is not in system.clusters", c->cluster);
	for (int i = 0; !c->shard_urls && i < n; i++) {
		struct ch_opts o = c->o;

		if (local[i]) {	/* the server this collector talks to: its connection */
			if (retain_on(c, conn, "this server", "_local", err, sizeof(err)))
				pr_warn("clickhouse: retention: %s", err);
			continue;
		}
		snprintf(o.host, sizeof(o.host), "%s", host[i]);
		retain_at(c, &o);
	}
	free(host);
}

void ch_retain__run(struct ch_store *c, struct ch_conn *conn)
{
	char err[300] = "";

	if (c->cluster[0]) {
		retain_cluster(c, conn);
		return;
	}
	if (retain_on(c, conn, "this server", "", err, sizeof(err)))
		pr_warn("clickhouse: retention: %s", err);
}

int ch_retain__init(struct ch_store *c, const char *urls, char *err, size_t errlen)
{
	const char *p = urls;

	if (!urls)
		return 0;
	if (!c->cluster[0]) {
		snprintf(err, errlen, "clickhouse: --ch-shard-urls is for --ch-cluster");
		return -EINVAL;
	}
	while (*p) {
		size_t len = strcspn(p, ",");
		char url[160];
		struct ch_opts o;

		if (!len || len >= sizeof(url)) {
			snprintf(err, errlen, "clickhouse: --ch-shard-urls: '%s' is not a list of "
				 "http://HOST:PORT", urls);
			return -EINVAL;
		}
		snprintf(url, sizeof(url), "%.*s", (int)len, p);
		if (ch_opts__parse(url, &o, err, errlen))
			return -EINVAL;
		p += len + (p[len] == ',');
	}
	c->shard_urls = strdup(urls);
	if (!c->shard_urls) {
		snprintf(err, errlen, "store: out of memory");
		return -ENOMEM;
	}
	return 0;
}
