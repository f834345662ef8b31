// SPDX-License-Identifier: MIT
/* elf/elf.c — build-ids, load segments and function symbols; see elf.h. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elf.h"
#include "port/file.h"

#define ELF_MAX_PHDRS 64
#define ELF_MAX_SHDRS 512

/* Class-independent copies of the headers we use. */
struct elf_phdr {
	uint32_t type;
	uint64_t offset, vaddr, filesz;
};

struct elf_shdr {
	uint32_t name, type, link;
	uint64_t addr, offset, size, entsize;
};

struct elf_file {
	int fd;
	bool is64;
	uint16_t machine;
	unsigned int shstrndx;
	unsigned int n_ph, n_sh;
	struct elf_phdr ph[ELF_MAX_PHDRS];
	struct elf_shdr *sh;
};

struct elf_sym {
	uint64_t addr;
	uint32_t size, name;
};

struct elf_syms {
	unsigned int n_load;
	struct elf_load load[ELF_EH_MAX_LOADS];
	struct elf_sym *syms;
	size_t n_syms;
	char *names;
	size_t names_len;
};

static int elf_open(const char *path, struct elf_file *ef, bool want_sections)
{
	unsigned char id[EI_NIDENT];
	uint64_t phoff, shoff;
	unsigned int phnum, shnum, phentsize, shentsize;

	memset(ef, 0, sizeof(*ef));
	ef->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ef->fd < 0)
		return -errno;
	if (port_pread_full(ef->fd, id, sizeof(id), 0) || memcmp(id, ELFMAG, SELFMAG) ||
	    id[EI_DATA] != ELFDATA2LSB)
		goto bad;
	ef->is64 = id[EI_CLASS] == ELFCLASS64;
	if (ef->is64) {
		Elf64_Ehdr eh;

		if (port_pread_full(ef->fd, &eh, sizeof(eh), 0))
			goto bad;
		phoff = eh.e_phoff, shoff = eh.e_shoff, phnum = eh.e_phnum, shnum = eh.e_shnum;
		phentsize = eh.e_phentsize, shentsize = eh.e_shentsize;
		ef->machine = eh.e_machine, ef->shstrndx = eh.e_shstrndx;
	} else {
		Elf32_Ehdr eh;

		if (port_pread_full(ef->fd, &eh, sizeof(eh), 0))
			goto bad;
		phoff = eh.e_phoff, shoff = eh.e_shoff, phnum = eh.e_phnum, shnum = eh.e_shnum;
		phentsize = eh.e_phentsize, shentsize = eh.e_shentsize;
		ef->machine = eh.e_machine, ef->shstrndx = eh.e_shstrndx;
	}
	if (phnum > ELF_MAX_PHDRS || shnum > ELF_MAX_SHDRS ||
	    phentsize != (ef->is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) ||
	    (shnum && shentsize != (ef->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr))))
		goto bad;
	for (unsigned int i = 0; i < phnum; i++) {
		struct elf_phdr *p = &ef->ph[i];

		if (ef->is64) {
			Elf64_Phdr ph;

			if (port_pread_full(ef->fd, &ph, sizeof(ph),
					    (off_t)(phoff + i * sizeof(ph))))
				goto bad;
			*p = (struct elf_phdr){ph.p_type, ph.p_offset, ph.p_vaddr, ph.p_filesz};
		} else {
			Elf32_Phdr ph;

			if (port_pread_full(ef->fd, &ph, sizeof(ph),
					    (off_t)(phoff + i * sizeof(ph))))
				goto bad;
			*p = (struct elf_phdr){ph.p_type, ph.p_offset, ph.p_vaddr, ph.p_filesz};
		}
	}
	ef->n_ph = phnum;
	if (!want_sections || !shnum)
		return 0;
	ef->sh = calloc(shnum, sizeof(*ef->sh));
	if (!ef->sh)
		goto bad;
	for (unsigned int i = 0; i < shnum; i++) {
		struct elf_shdr *s = &ef->sh[i];

		if (ef->is64) {
			Elf64_Shdr sh;

			if (port_pread_full(ef->fd, &sh, sizeof(sh),
					    (off_t)(shoff + i * sizeof(sh))))
				goto bad;
			*s = (struct elf_shdr){sh.sh_name,   sh.sh_type, sh.sh_link,
					       sh.sh_addr,   sh.sh_offset, sh.sh_size,
					       sh.sh_entsize};
		} else {
			Elf32_Shdr sh;

			if (port_pread_full(ef->fd, &sh, sizeof(sh),
					    (off_t)(shoff + i * sizeof(sh))))
				goto bad;
			*s = (struct elf_shdr){sh.sh_name,   sh.sh_type, sh.sh_link,
					       sh.sh_addr,   sh.sh_offset, sh.sh_size,
					       sh.sh_entsize};
		}
	}
	ef->n_sh = shnum;
	return 0;
bad:
	close(ef->fd);
	free(ef->sh);
	ef->sh = NULL;
	return -EINVAL;
}

static void elf_close(struct elf_file *ef)
{
	if (ef->fd >= 0)
		close(ef->fd);
	free(ef->sh);
}

void elf__build_id_hex(const uint8_t *id, size_t n, char *hex, size_t hexlen)
{
	static const char digits[] = "0123456789abcdef";
	size_t k = 0;

	for (; k < n && 2 * k + 3 <= hexlen; k++) {
		hex[2 * k] = digits[id[k] >> 4];
		hex[2 * k + 1] = digits[id[k] & 15];
	}
	if (hexlen)
		hex[2 * k] = 0;
}

int elf__build_id(const char *path, char *hex, size_t hexlen)
{
	struct elf_file ef;
	unsigned char buf[1024];
	int err = elf_open(path, &ef, false);

	if (err)
		return err;
	err = -ENOENT;
	for (unsigned int i = 0; i < ef.n_ph && err; i++) {
		const struct elf_phdr *p = &ef.ph[i];
		size_t len = p->filesz < sizeof(buf) ? p->filesz : sizeof(buf), off = 0;

		if (p->type != PT_NOTE || port_pread_full(ef.fd, buf, len, (off_t)p->offset))
			continue;
		while (off + 12 <= len) {
			uint32_t nsz, dsz, type;

			memcpy(&nsz, buf + off, 4);
			memcpy(&dsz, buf + off + 4, 4);
			memcpy(&type, buf + off + 8, 4);
			size_t name = off + 12, desc = name + ((nsz + 3) & ~3u);

			if (desc + dsz > len)
				break;
			if (type == NT_GNU_BUILD_ID && nsz == 4 && !memcmp(buf + name, "GNU", 4)) {
				elf__build_id_hex(buf + desc, dsz, hex, hexlen);
				err = 0;
				break;
			}
			off = desc + ((dsz + 3) & ~3u);
		}
	}
	elf_close(&ef);
	return err;
}

#if defined(__x86_64__)
#define ELF_OWN_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ELF_OWN_MACHINE EM_AARCH64
#elif defined(__arm__)
#define ELF_OWN_MACHINE EM_ARM
#else
#define ELF_OWN_MACHINE EM_NONE
#endif

/* The load segment holding vaddr, or NULL. */
static const struct elf_phdr *load_segment_at(const struct elf_file *ef, uint64_t vaddr)
{
	for (unsigned int i = 0; i < ef->n_ph; i++) {
		const struct elf_phdr *p = &ef->ph[i];

		if (p->type == PT_LOAD && vaddr >= p->vaddr && vaddr < p->vaddr + p->filesz)
			return p;
	}
	return NULL;
}

/* The first ELF_EH_MAX_LOADS load segments (files have 2 to 5): how many. */
static unsigned int load_segments(const struct elf_file *ef, struct elf_load *load)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < ef->n_ph && n < ELF_EH_MAX_LOADS; i++) {
		const struct elf_phdr *p = &ef->ph[i];

		if (p->type == PT_LOAD)
			load[n++] = (struct elf_load){p->offset, p->vaddr, p->filesz};
	}
	return n;
}

/* The vaddr of file offset off, or 0 when off is in no load segment. */
static uint64_t load_vaddr(const struct elf_load *load, unsigned int n, uint64_t off)
{
	for (unsigned int i = 0; i < n; i++)
		if (off >= load[i].offset && off < load[i].offset + load[i].filesz)
			return off - load[i].offset + load[i].vaddr;
	return 0;
}

/* The section named want (names read from .shstrtab one at a time), or NULL. */
static const struct elf_shdr *section_named(const struct elf_file *ef, const char *want)
{
	size_t len = strlen(want) + 1;
	const struct elf_shdr *names;
	char name[32];

	if (ef->shstrndx >= ef->n_sh || len > sizeof(name))
		return NULL;
	names = &ef->sh[ef->shstrndx];
	for (unsigned int i = 0; i < ef->n_sh; i++) {
		const struct elf_shdr *sh = &ef->sh[i];

		if (sh->name < names->size && names->size - sh->name >= len &&
		    !port_pread_full(ef->fd, name, len, (off_t)(names->offset + sh->name)) &&
		    !memcmp(name, want, len))
			return sh;
	}
	return NULL;
}

/*
 * Where the unwind table is: PT_GNU_EH_FRAME's .eh_frame_hdr, or (a static link, which gcc
 * gives no header) the .eh_frame section itself; the vaddr of either, 0: none.
 */
static uint64_t eh_frame_at(const struct elf_file *ef, struct elf_eh_frame *eh)
{
	const struct elf_shdr *sec;

	for (unsigned int i = 0; i < ef->n_ph; i++) {
		if (ef->ph[i].type == PT_GNU_EH_FRAME) {
			eh->hdr_vaddr = ef->ph[i].vaddr;
			return eh->hdr_vaddr;
		}
	}
	sec = section_named(ef, ".eh_frame");
	if (!sec || !sec->addr || !sec->size)
		return 0;
	eh->frame_vaddr = sec->addr;
	eh->frame_len = sec->size;
	return sec->addr;
}

int elf__map_eh_frame(const char *path, struct elf_eh_frame *eh)
{
	struct elf_file ef;
	const struct elf_phdr *seg;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t start, at;
	int err = elf_open(path, &ef, true);

	memset(eh, 0, sizeof(*eh));
	eh->fd = -1;
	if (err)
		return err;
	err = -ENOENT;
	if (ef.machine != ELF_OWN_MACHINE || ef.is64 != (sizeof(void *) == 8))
		goto out; /* another ABI's table (a 32-bit process): other register numbers */
	at = eh_frame_at(&ef, eh);
	seg = at ? load_segment_at(&ef, at) : NULL;
	if (!seg || (eh->frame_len && eh->frame_len > seg->vaddr + seg->filesz - at))
		goto out; /* .eh_frame must lie inside the segment mapped */
	start = seg->offset & ~(uint64_t)(page - 1);
	eh->map_len = seg->offset + seg->filesz - start;
	eh->map = mmap(NULL, eh->map_len, PROT_READ, MAP_PRIVATE, ef.fd, (off_t)start);
	if (eh->map == MAP_FAILED) {
		err = -errno;
		eh->map = NULL;
		goto out;
	}
	eh->seg = (const uint8_t *)eh->map + (seg->offset - start);
	eh->seg_vaddr = seg->vaddr;
	eh->seg_len = seg->filesz;
	eh->file_size = seg->offset + seg->filesz;
	eh->n_load = load_segments(&ef, eh->load);
	eh->fd = ef.fd; /* kept: its size is checked before the mapping is read again */
	ef.fd = -1;
	err = 0;
	if (!elf__eh_frame_intact(eh)) { /* a segment past the end of the file */
		elf__unmap_eh_frame(eh);
		err = -EINVAL;
	}
out:
	elf_close(&ef);
	return err;
}

void elf__unmap_eh_frame(struct elf_eh_frame *eh)
{
	if (eh->map)
		munmap(eh->map, eh->map_len);
	if (eh->fd >= 0)
		close(eh->fd);
	eh->map = NULL;
	eh->fd = -1;
}

void elf__eh_frame_release(const struct elf_eh_frame *eh)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), end, from;
	uint64_t at = eh->hdr_vaddr ? eh->hdr_vaddr : eh->frame_vaddr;

	if (!eh->map)
		return;
	/*
	 * From the table to the segment's end: GNU ld and lld put .eh_frame (and
	 * .gcc_except_table) after .eh_frame_hdr, at the end of the read-only segment; the
	 * .rodata before it was never read. A smaller range is a shorter page-table walk (a
	 * release a lookup: the whole of libLLVM's segment cost ~20 us).
	 */
	end = (uintptr_t)eh->map + eh->map_len;
	from = (uintptr_t)eh->seg + (uintptr_t)(at - eh->seg_vaddr);
	from = at >= eh->seg_vaddr && from < end ? from & ~(page - 1) : (uintptr_t)eh->map;
	madvise((void *)from, end - from, MADV_DONTNEED);
}

int elf__vdso_eh_frame(struct elf_eh_frame *eh)
{
	const uint8_t *base = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
	const ElfW(Ehdr) *e = (const ElfW(Ehdr) *)base;
	uint64_t size = 0, hdr = 0;

	memset(eh, 0, sizeof(*eh));
	eh->fd = -1;
	if (!base || memcmp(e->e_ident, ELFMAG, SELFMAG))
		return -ENOENT;
	for (int i = 0; i < e->e_phnum; i++) {
		const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + e->e_phoff) + i;

		if (ph->p_type == PT_LOAD && ph->p_vaddr + ph->p_filesz > size)
			size = ph->p_vaddr + ph->p_filesz;
		else if (ph->p_type == PT_GNU_EH_FRAME)
			hdr = ph->p_vaddr;
	}
	if (!size || !hdr || hdr >= size)
		return -ENOENT;
	eh->seg = base;
	eh->seg_len = size;
	eh->hdr_vaddr = hdr;
	eh->n_load = 1;
	eh->load[0] = (struct elf_load){0, 0, size};
	return 0;
}

bool elf__eh_frame_intact(const struct elf_eh_frame *eh)
{
	struct stat st;

	return fstat(eh->fd, &st) == 0 && (uint64_t)st.st_size >= eh->file_size;
}

uint64_t elf__eh_frame_vaddr(const struct elf_eh_frame *eh, uint64_t off)
{
	return load_vaddr(eh->load, eh->n_load, off);
}

static int sym_cmp(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Reads the function symbols of section si into s (names copied from its string table). */
static int load_symtab(struct elf_file *ef, unsigned int si, size_t max_bytes, struct elf_syms *s)
{
	const struct elf_shdr *st = &ef->sh[si], *str;
	size_t esz = ef->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym), n;
	unsigned char *raw = NULL;
	int err = -EINVAL;

	if (st->link >= ef->n_sh || st->entsize != esz)
		return -EINVAL;
	str = &ef->sh[st->link];
	n = st->size / esz;
	if (n * sizeof(struct elf_sym) + str->size > max_bytes)
		return -EFBIG;
	raw = malloc(st->size);
	s->syms = malloc(n * sizeof(*s->syms) + 1);
	s->names = malloc(str->size + 1);
	if (!raw || !s->syms || !s->names) {
		err = -ENOMEM;
		goto out;
	}
	if (port_pread_full(ef->fd, raw, st->size, (off_t)st->offset) ||
	    port_pread_full(ef->fd, s->names, str->size, (off_t)str->offset))
		goto out;
	s->names[str->size] = 0;
	s->names_len = str->size;
	for (size_t i = 0; i < n; i++) {
		uint64_t value, size;
		uint32_t name;
		unsigned int type, shndx;

		if (ef->is64) {
			Elf64_Sym *e = (Elf64_Sym *)(raw + i * esz);

			value = e->st_value, size = e->st_size, name = e->st_name;
			type = ELF64_ST_TYPE(e->st_info), shndx = e->st_shndx;
		} else {
			Elf32_Sym *e = (Elf32_Sym *)(raw + i * esz);

			value = e->st_value, size = e->st_size, name = e->st_name;
			type = ELF32_ST_TYPE(e->st_info), shndx = e->st_shndx;
		}
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || shndx == SHN_UNDEF || !value ||
		    name >= str->size)
			continue;
		if (!ef->is64)
			value &= ~1ull; /* Thumb bit */
		s->syms[s->n_syms++] = (struct elf_sym){value, (uint32_t)size, name};
	}
	qsort(s->syms, s->n_syms, sizeof(*s->syms), sym_cmp);
	err = s->n_syms ? 0 : -ENOENT;
out:
	free(raw);
	return err;
}

int elf_syms__load(const char *path, size_t max_bytes, struct elf_syms **out)
{
	struct elf_syms *s;
	struct elf_file ef;
	int err, sym = -1, dyn = -1;

	*out = NULL;
	err = elf_open(path, &ef, true);
	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s) {
		elf_close(&ef);
		return -ENOMEM;
	}
	s->n_load = load_segments(&ef, s->load);
	for (unsigned int i = 0; i < ef.n_sh; i++) {
		if (ef.sh[i].type == SHT_SYMTAB)
			sym = (int)i;
		else if (ef.sh[i].type == SHT_DYNSYM)
			dyn = (int)i;
	}
	err = -ENOENT;
	if (sym >= 0)
		err = load_symtab(&ef, (unsigned int)sym, max_bytes, s);
	if (err && dyn >= 0) {
		free(s->syms);
		free(s->names);
		s->syms = NULL;
		s->names = NULL;
		s->n_syms = 0;
		err = load_symtab(&ef, (unsigned int)dyn, max_bytes, s);
	}
	elf_close(&ef);
	if (err) {
		elf_syms__free(s);
		return err;
	}
	*out = s;
	return 0;
}

uint64_t elf_syms__vaddr(const struct elf_syms *s, uint64_t off)
{
	return load_vaddr(s->load, s->n_load, off);
}

const char *elf_syms__lookup(const struct elf_syms *s, uint64_t off, uint64_t *sym_vaddr)
{
	uint64_t va = elf_syms__vaddr(s, off);
	size_t lo = 0, hi = s->n_syms;

	if (!va || !s->n_syms || va < s->syms[0].addr)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->syms[mid].addr <= va)
			lo = mid;
		else
			hi = mid;
	}
	/* prefer a sized symbol that covers va among aliases at the same address */
	const struct elf_sym *e = &s->syms[lo];

	if (e->size && va >= e->addr + e->size)
		return NULL;
	if (sym_vaddr)
		*sym_vaddr = e->addr;
	return s->names + e->name;
}

size_t elf_syms__bytes(const struct elf_syms *s)
{
	return sizeof(*s) + s->n_syms * sizeof(*s->syms) + s->names_len;
}

size_t elf_syms__count(const struct elf_syms *s)
{
	return s->n_syms;
}

void elf_syms__free(struct elf_syms *s)
{
	if (!s)
		return;
	free(s->syms);
	free(s->names);
	free(s);
}
