// SPDX-License-Identifier: MIT
/* agent/daemon/heap.c — the producers' heap profiles in the daemon (agent/daemon/heap.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/core/heapfile.h"
#include "agent/core/ring.h"
#include "agent/daemon/heap.h"
#include "agent/daemon/services.h"
#include "port/log.h"

/* <registry>/<pid>.heap of a ring's producer */
static void heap_path(const struct agent *a, unsigned int ring, char *path, size_t len)
{
	snprintf(path, len, "%s/%u.heap", a->cfg.registry, ring__shared(a->rings[ring])->pid);
}

int agent_heap__encode(struct agent *a, const char *service, struct output_opts o,
		       struct pprof_buf *buf)
{
	const size_t max = CONFIG_HEAP_STACKS * 4; /* bounded: what exceeds it is counted */
	struct output_stack *st = calloc(max, sizeof(*st));
	int64_t *vals = calloc(max * 4, sizeof(*vals));
	void *maps[MAX_RINGS];
	size_t lens[MAX_RINGS], n = 0, files = 0, over = 0;
	char path[512], c[4][256], c_over[128];
	const char *comments[5];
	struct heapfile_view v = {0};
	struct output_kind k;
	int err = -ENOENT;

	for (unsigned int i = 0; st && vals && i < a->n_rings; i++) {
		struct heapfile_view vi;
		size_t got;

		if (service &&
		    strncmp(ring__shared(a->rings[i])->service, service, sizeof(a->services[0].name)))
			continue;
		heap_path(a, i, path, sizeof(path));
		err = heapfile__map(path, &maps[files], &lens[files], &vi);
		if (err) {
			if (err != -ENOENT) /* ENOENT: the producer records no heap */
				pr_warn("%s: not a heap table: %s", path, strerror(-err));
			continue;
		}
		got = heapfile__collect(&vi, st + n, vals + 4 * n, max - n);
		over += vi.h->n_stacks > got ? vi.h->n_stacks - got : 0;
		n += got;
		if (files < 4)
			heapfile__comment(&vi, c[files], sizeof(c[files]));
		v = vi;
		files++;
	}
	if (!st || !vals)
		err = -ENOMEM;
	else if (!files)
		err = -ENOENT;
	else {
		snprintf(c_over, sizeof(c_over),
			 "edgeprof heap (agent): processes=%zu stacks=%zu "
			 "stacks_over_bound_or_zero=%zu",
			 files, n, over);
		comments[0] = c_over;
		for (size_t i = 0; i < files && i < 4; i++)
			comments[1 + i] = c[i];
		o.comments = comments;
		o.n_comments = 1 + (files < 4 ? files : 4);
		heapfile__kind(&v, &k);
		err = output__stacks_pprof(&k, &o, st, n, pprof_buf_write, buf);
	}
	for (size_t i = 0; i < files; i++)
		heapfile__unmap(maps[i], lens[i]);
	free(st);
	free(vals);
	return err;
}

void agent_heap__round(struct agent *a, const struct service *s, struct output_opts o)
{
	struct pprof_buf buf = {0};
	int err = agent_heap__encode(a, s->name, o, &buf);

	if (err == -ENOENT)
		return;
	agent__ship(a, s->name, "heap", &o, &buf, err);
}

void agent_heap__forget(struct agent *a, unsigned int ring)
{
	char path[512];

	heap_path(a, ring, path, sizeof(path));
	unlink(path);
}
