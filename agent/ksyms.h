/* SPDX-License-Identifier: MIT */
/*
 * agent/ksyms.h — kernel symbols from /proc/kallsyms, for the kernel frames of BPF samples.
 *
 * Loaded once (the caller keeps it; reload after a module load if needed), text symbols only,
 * sorted by address. With kernel.kptr_restrict (or without CAP_SYSLOG) the kernel shows every
 * address as 0: ksyms__hidden() says so, it is logged once, and nothing resolves.
 * Memory: about 12 bytes plus the name per text symbol (~2 MB for 64k symbols on a 6.x x86
 * kernel; the __pfx_ padding symbols of 6.x kernels are skipped).
 */
#ifndef EDGEPROF_AGENT_KSYMS_H
#define EDGEPROF_AGENT_KSYMS_H

#include <stdbool.h>
#include <stdint.h>

struct ksyms;

struct ksyms *ksyms__load(void);                  /* NULL (errno set) if unreadable */
struct ksyms *ksyms__load_file(const char *path); /* same, from a kallsyms-format file */
/* Name of the function holding addr (its start in *sym_start if not NULL), or NULL. */
const char *ksyms__resolve(const struct ksyms *ks, uint64_t addr, uint64_t *sym_start);
bool ksyms__hidden(const struct ksyms *ks);       /* addresses zeroed by kptr_restrict */
unsigned ksyms__count(const struct ksyms *ks);
void ksyms__free(struct ksyms *ks);               /* NULL-safe */

#endif /* EDGEPROF_AGENT_KSYMS_H */
