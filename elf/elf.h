/* SPDX-License-Identifier: MIT */
/*
 * elf/elf.h — what the agent needs from an ELF file: its GNU build-id (from the PT_NOTE
 * segments, so stripped files have it too), the load segments that turn a file offset into a
 * symbol address, and the function symbols of .symtab (or .dynsym when stripped). ELF32 and
 * ELF64, little-endian. Files are read with pread into bounded buffers, never mapped whole.
 */
#ifndef EDGEPROF_ELF_ELF_H
#define EDGEPROF_ELF_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_BUILD_ID_HEX 41 /* 20 bytes (sha1) as hex + NUL; longer ids are cut */

/* Lowercase hex build-id of path into hex: 0, -ENOENT (no build-id note), -EINVAL, -errno. */
int elf__build_id(const char *path, char *hex, size_t hexlen);
/* n bytes of build-id as lower-case hex, cut to what hexlen holds (always terminated). */
void elf__build_id_hex(const uint8_t *id, size_t n, char *hex, size_t hexlen);

/*
 * A file's unwind table for another process's pcs: the load segment holding .eh_frame_hdr
 * (PT_GNU_EH_FRAME; .eh_frame sits beside it), or .eh_frame alone where the file has no header
 * (gcc gives static links none), mapped read-only, so only the pages a lookup reads are ever
 * loaded. A pc's vaddr v is at seg + (v - seg_vaddr) in the mapping.
 */
#define ELF_EH_MAX_LOADS 8

struct elf_load {
	uint64_t offset, vaddr, filesz;
};

struct elf_eh_frame {
	void *map;
	size_t map_len;
	int fd;			/* the mapped file (see elf__eh_frame_intact) */
	const uint8_t *seg;	/* the segment's first byte in the mapping */
	uint64_t seg_vaddr, seg_len, file_size;
	uint64_t hdr_vaddr;		/* .eh_frame_hdr, or 0 when the file has none: */
	uint64_t frame_vaddr, frame_len; /* then .eh_frame itself (a static link) */
	unsigned int n_load;
	struct elf_load load[ELF_EH_MAX_LOADS];
};

/*
 * Maps path's unwind table: 0, -ENOENT (none, or built for another machine or class than
 * the agent), -EINVAL (not ELF), -errno.
 */
int elf__map_eh_frame(const char *path, struct elf_eh_frame *eh);
void elf__unmap_eh_frame(struct elf_eh_frame *eh);
/*
 * Gives back the pages of the mapping read so far (MADV_DONTNEED; read again from the page
 * cache, a minor fault, when next touched). A fault maps its neighbours too (fault-around, 64
 * KiB), so a few lookups in a big library's table left MiBs of it in the agent's RSS until
 * unmapped. Nothing for the vDSO's.
 */
void elf__eh_frame_release(const struct elf_eh_frame *eh);
/*
 * The vDSO's table: it has no file, but every native process of this kernel maps the same
 * image, so this process's own copy (at AT_SYSINFO_EHDR, linked at 0) serves for all. Nothing
 * to unmap. 0 or -ENOENT.
 */
int elf__vdso_eh_frame(struct elf_eh_frame *eh);
/*
 * Whether the mapping can still be read: a file truncated in place (not replaced) would make
 * the pages past its new end fault with SIGBUS. One fstat.
 */
bool elf__eh_frame_intact(const struct elf_eh_frame *eh);
/* The vaddr of file offset off, or 0 when off is in no load segment. */
uint64_t elf__eh_frame_vaddr(const struct elf_eh_frame *eh, uint64_t off);

struct elf_syms;

#define ELF_SYM_NAME_MAX 4096 /* longer names (read from the file) are left out, not cut */

/*
 * Loads the function symbols of path (.symtab, else .dynsym), streamed from the file (64 KiB
 * at a time). Held whole (16 bytes a function and the string table) where that fits
 * max_bytes; else, as for node's .symtab (95k functions, 7.5 MB of names), an index of 8 bytes
 * a function with the file kept open, names read at lookup. -EFBIG when even the index would
 * need more than max_bytes (then .dynsym is tried), -ENOENT when the file has no symbols.
 */
int elf_syms__load(const char *path, size_t max_bytes, struct elf_syms **out);
/*
 * Name of the function at file offset off (as in /proc/<pid>/maps arithmetic), or NULL: the
 * nearest function symbol at or below it, unless its size ends before. The name stays valid
 * until the table is freed where elf_syms__names_stable(), else until the next lookup.
 */
const char *elf_syms__lookup(const struct elf_syms *s, uint64_t off, uint64_t *sym_vaddr);
bool elf_syms__names_stable(const struct elf_syms *s);
/* Symbol address (vaddr) of file offset off, or 0 when off is in no load segment. */
uint64_t elf_syms__vaddr(const struct elf_syms *s, uint64_t off);
size_t elf_syms__bytes(const struct elf_syms *s);
size_t elf_syms__count(const struct elf_syms *s);
void elf_syms__free(struct elf_syms *s); /* NULL-safe */

#endif /* EDGEPROF_ELF_ELF_H */
