// SPDX-License-Identifier: MIT
/* agent/daemon/upload.c — the daemon's profiles to the collector (agent/daemon/upload.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/daemon/upload.h"
#include "agent/transport/transport.h"
#include "port/clock.h"
#include "port/log.h"

void agent_upload__defaults(struct config *c)
{
	transport_opts__init(&c->tr);
}

int agent_upload__opt(struct config *c, const char *name, const char *v)
{
	int rc = transport_opts__set(&c->tr, name, v);

	if (rc == 0 && !strcmp(name, "upload"))
		c->upload = true;
	if (rc && rc != -ENOENT)
		fprintf(stderr, "edgeprof-agent: --%s: bad value '%s'\n", name, v ? v : "");
	return rc;
}

int agent_upload__start(struct agent *a)
{
	char err[256] = "";

	if (!a->cfg.upload)
		return 0;
	a->transport = transport__new(&a->cfg.tr, err, sizeof(err));
	if (!a->transport) {
		fprintf(stderr, "edgeprof-agent: upload: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

void agent_upload__submit_buf(struct agent *a, const char *service, const char *type,
			      const struct output_opts *o, struct pprof_buf *bp, int err)
{
	struct pprof_buf buf = *bp;
	struct transport_item item = {.service = service, .type = type};
	struct upload_label duty;
	char key[200], window[24];
	uint64_t w;

	if (!err) {
		/*
		 * A round the collector's schedule told us to sample: its window goes with the
		 * profile (spooled with it), so that the collector weighs this profile, and
		 * only profiles taken under its schedule.
		 */
		w = o->time_ns == a->round_real_ns ? a->duty_window : 0; /* this round's */
		if (w) {
			snprintf(window, sizeof(window), "%" PRIu64, w);
			duty = (struct upload_label){ "duty_window", window };
			item.labels = &duty;
			item.n_labels = 1;
		}
		/* device, round start, sequence: a re-sent profile is recognized by the collector
		 */
		snprintf(key, sizeof(key), "%s-%llu-%llu", transport__device(a->transport),
			 (unsigned long long)(o->time_ns / NSEC_PER_SEC),
			 (unsigned long long)a->seq++);
		item.key = key;
		item.data = buf.data;
		item.len = buf.len;
		transport_item__stamp(&item);
		err = transport__submit(a->transport, &item);
	}
	if (err == -EAGAIN && !a->cfg.tr.spool_path)
		pr_warn("%s profile of %s lost: the collector did not take it and there is no "
			"spool (--spool FILE keeps profiles until it is back)", type, service);
	else if (err)
		pr_warn("%s profile of %s not uploaded nor spooled: %s", type, service,
			strerror(-err));
	else
		pr_info("%s profile of %s handed to the transport (%zu bytes)", type, service,
			buf.len);
	free(buf.data);
}

void agent_upload__submit(struct agent *a, const char *service, const struct aggregate *agg,
			  const struct output_opts *o)
{
	struct pprof_buf buf = {0};
	int err = output__pprof(agg, o, pprof_buf_write, &buf);

	agent_upload__submit_buf(a, service, o->type ? o->type : "cpu", o, &buf, err);
}

void agent_upload__poll(struct agent *a)
{
	if (a->transport && port_clock_mono_ns() >= transport__next_poll_ns(a->transport))
		transport__poll(a->transport, port_clock_mono_ns());
}

void agent_upload__stop(struct agent *a)
{
	transport__free(a->transport);
}

uint64_t agent_upload__told_window(struct agent *a, uint64_t start_s)
{
	return a->transport && !a->cfg.once ? transport__told_window(a->transport, start_s) : 0;
}

bool agent_upload__round_samples(struct agent *a, uint64_t start_s)
{
	return !a->transport || a->cfg.once || transport__sample_round(a->transport, start_s);
}
