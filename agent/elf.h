/* SPDX-License-Identifier: MIT */
/*
 * agent/elf.h — what the agent needs from an ELF file: its GNU build-id (from the PT_NOTE
 * segments, so stripped files have it too), the load segments that turn a file offset into a
 * symbol address, and the function symbols of .symtab (or .dynsym when stripped). ELF32 and
 * ELF64, little-endian. Files are read with pread into bounded buffers, never mapped whole.
 */
#ifndef EDGEPROF_AGENT_ELF_H
#define EDGEPROF_AGENT_ELF_H

#include <stddef.h>
#include <stdint.h>

#define ELF_BUILD_ID_HEX 41 /* 20 bytes (sha1) as hex + NUL; longer ids are cut */

/* Lowercase hex build-id of path into hex: 0, -ENOENT (no build-id note), -EINVAL, -errno. */
int elf__build_id(const char *path, char *hex, size_t hexlen);

struct elf_syms;

/*
 * Loads the function symbols of path (.symtab, else .dynsym). -EFBIG when the table would
 * need more than max_bytes, -ENOENT when the file has no symbols at all.
 */
int elf_syms__load(const char *path, size_t max_bytes, struct elf_syms **out);
/* Name of the function at file offset off (as in /proc/<pid>/maps arithmetic), or NULL. */
const char *elf_syms__lookup(const struct elf_syms *s, uint64_t off, uint64_t *sym_vaddr);
/* Symbol address (vaddr) of file offset off, or 0 when off is in no load segment. */
uint64_t elf_syms__vaddr(const struct elf_syms *s, uint64_t off);
size_t elf_syms__bytes(const struct elf_syms *s);
size_t elf_syms__count(const struct elf_syms *s);
void elf_syms__free(struct elf_syms *s); /* NULL-safe */

#endif /* EDGEPROF_AGENT_ELF_H */
