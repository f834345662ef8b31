// SPDX-License-Identifier: MIT
/* agent/daemon/sigprof-rings.c — the SIGPROF producers' rings (agent/daemon/sigprof-rings.h). */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/core/aggregate.h"
#include "agent/core/procmaps.h"
#include "agent/core/luaname.h"
#include "agent/core/pyname.h"
#include "agent/core/ring.h"
#include "agent/daemon/heap.h"
#include "agent/daemon/services.h"
#include "agent/daemon/sigprof-rings.h"
#include "port/clock.h"
#include "port/log.h"

static void adopt_ring_maps(struct agent *a, struct ring *r)
{
	static char text[RING_MAPS_BYTES];
	struct procmaps *pm;

	if (ring__get_maps(r, text, sizeof(text)) &&
	    !procmaps__parse_text(text, ring__shared(r)->pid, 256, &pm))
		proctab__adopt(a->procs, pm);
}

void agent_rings__scan(struct agent *a)
{
	DIR *d = opendir(a->cfg.registry);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300];
		size_t len = strlen(e->d_name);
		bool known = false;
		struct ring *r;

		if (len < 6 || strcmp(e->d_name + len - 5, ".ring"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", a->cfg.registry, e->d_name);
		for (unsigned int i = 0; i < a->n_rings && !known; i++)
			known = !strcmp(a->ring_paths[i], path);
		if (known)
			continue;
		if (a->n_rings == MAX_RINGS) {
			a->dropped_rings++;
			continue;
		}
		if (ring__open(path, &r)) {
			pr_warn("%s is not a ring; ignored", path);
			continue;
		}
		snprintf(a->ring_paths[a->n_rings], sizeof(a->ring_paths[0]), "%s", path);
		a->rings[a->n_rings++] = r;
		/* the mappings: read now while the process lives, or the copy it left in the ring
		 */
		if (proctab__touch(a->procs, ring__shared(r)->pid))
			adopt_ring_maps(a, r);
		pr_info("ring %s (pid %u, service %s)", path, ring__shared(r)->pid,
			ring__shared(r)->service);
	}
	closedir(d);
}

struct drain_ctx {
	struct agent *a;
	struct ring *r;
	struct service *svc;
};

static int drain_rec(void *ctx, const struct ring_rec *rec)
{
	struct drain_ctx *dc = ctx;
	struct agent_sample s;

	ring__rec_to_sample(dc->r, rec, &s);
	s.pid = ring__shared(dc->r)->pid; /* the ring's owner, not what the record claims */
	pyname__warm(s.pid, rec->frames, s.n_user); /* while its code objects live */
	luaname__warm(s.pid, rec->frames, s.n_user); /* (not a stack snapshot's words) */
	if (!dc->svc)
		return 0;
	/* a producer recording wall time (agent/lib/wall.h): its CPU samples count there too */
	if ((rec->flags & SAMPLE_F_WALL) && agent__service_kind(dc->a, dc->svc, KIND_WALL)) {
		struct agent_sample w = s; /* a stack snapshot goes with the CPU profile only */

		w.snapshot = NULL;
		w.flags &= (uint16_t)~SAMPLE_F_SNAPSHOT;
		aggregate__add(dc->svc->kinds[KIND_WALL], &w);
	}
	if (!(rec->flags & SAMPLE_F_NOCPU)) {
		aggregate__add(dc->svc->agg, &s);
		agent__pull_add(dc->a, &s, dc->svc->name);
	}
	return 0;
}

void agent_rings__drain(struct agent *a, bool final)
{
	for (unsigned int i = 0; i < a->n_rings;) {
		struct ring *r = a->rings[i];
		struct ring_shared *sh = ring__shared(r);
		char svc[sizeof(sh->service)];
		bool dead = !ring__producer_alive(r);
		struct drain_ctx dc = {a, r, NULL};

		memcpy(svc, sh->service, sizeof(svc));
		svc[sizeof(svc) - 1] = 0;
		dc.svc = agent__service(a, svc);
		if (dead) { /* nobody will finish a half-written record now */
			ring__set_stall_timeout(r, 0);
			adopt_ring_maps(a, r);
		}
		while (ring__drain(r, 1024, port_clock_mono_ns(), drain_rec, &dc) > 0)
			;
		if (dead && ring__is_empty(r)) {
			agent_heap__forget(a, i);
			unlink(a->ring_paths[i]);
			ring__free(r);
			a->n_rings--;
			a->rings[i] = a->rings[a->n_rings];
			memcpy(a->ring_paths[i], a->ring_paths[a->n_rings],
			       sizeof(a->ring_paths[0]));
			continue;
		}
		i++;
	}
	(void) final;
}

void agent_rings__pause(struct agent *a, bool paused)
{
	for (unsigned int i = 0; i < a->n_rings; i++)
		__atomic_store_n(&ring__shared(a->rings[i])->paused, paused, __ATOMIC_RELAXED);
}

void agent_rings__round(struct agent *a, const char *service, struct rings_round *rr)
{
	*rr = (struct rings_round){0};
	for (unsigned int k = 0; k < a->n_rings; k++) {
		struct ring_shared *sh = ring__shared(a->rings[k]);
		struct ring_stats rs;

		if (strncmp(sh->service, service, sizeof(a->services[0].name)))
			continue;
		ring__stats(a->rings[k], &rs);
		rr->dropped_full += rs.dropped_full;
		rr->torn += rs.torn;
		/* what the producers' samples miss (agent/lib/sigctl.h), since they started */
		rr->skipped += sh->miss_skipped;
		rr->blocking += sh->miss_threads_blocking;
		rr->aside += sh->miss_stepped_aside;
		/* the ring's own rate, for the period of this service's profile */
		rr->hz = sh->hz;
		rr->rings++;
	}
}

void agent_rings__free(struct agent *a)
{
	for (unsigned int i = 0; i < a->n_rings; i++)
		ring__free(a->rings[i]);
}
