// SPDX-License-Identifier: MIT
/* agent/core/framename.c — see framename.h. */
#include "agent/core/framename.h"

int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t hash,
		       framename_read_fn read, struct framename *out)
{
	struct framename_slot *s = &c->slot[(hash ^ pid * 2654435761u) % c->slots];
	int err;

	pthread_mutex_lock(&c->lock);
	if (s->pid == pid && s->key == key) {
		c->cached++;
	} else {
		s->pid = pid;
		s->key = key;
		s->err = read(pid, key, &s->n);
	}
	err = s->err;
	if (!err)
		*out = s->n;
	pthread_mutex_unlock(&c->lock);
	return err;
}

void framename__forget(struct framename_cache *c, uint32_t pid)
{
	pthread_mutex_lock(&c->lock);
	for (unsigned int i = 0; i < c->slots; i++)
		if (c->slot[i].pid == pid)
			c->slot[i].pid = 0, c->slot[i].key = 0;
	pthread_mutex_unlock(&c->lock);
}
