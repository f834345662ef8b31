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

struct elf_sym { /* a table held whole */
	uint64_t addr;
	uint32_t size, name;
};

struct elf_sym_ref { /* a table too big to hold: its symbols are read at each lookup */
	uint32_t delta; /* address - elf_syms.base */
	uint32_t idx;	/* symbol number; bit 31: it has a size (sorted after its aliases) */
};

struct elf_syms {
	unsigned int n_load;
	struct elf_load load[ELF_EH_MAX_LOADS];
	bool is64;
	uint64_t n_ents, sym_off, str_off, str_len; /* the table read, in the file */
	uint64_t base, top;			      /* lowest and highest function address */
	struct elf_sym *syms;			      /* held whole, with names: */
	char *names;
	size_t names_len;
	struct elf_sym_ref *refs; /* or this index, and the file: */
	int fd;
	size_t n_syms;
	char *name; /* the last name read (elf_syms__lookup) */
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

/* ---- function symbols ------------------------------------------------------------------- */

static int sym_cmp(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if ((x->size != 0) != (y->size != 0))
		return x->size ? 1 : -1; /* a sized alias last: the one a lookup finds */
	return x->name < y->name ? -1 : x->name > y->name; /* the same one every time */
}

static int ref_cmp(const void *a, const void *b)
{
	const struct elf_sym_ref *x = a, *y = b;

	if (x->delta != y->delta)
		return x->delta < y->delta ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx; /* sized last (bit 31), then by number */
}

/* One decoded entry of a symbol table. */
struct sym_ent {
	uint64_t value, size;
	uint32_t name;
	bool func; /* a defined function (or ifunc) with an address and a name */
};

static void sym_decode(bool is64, const unsigned char *raw, uint64_t str_size, struct sym_ent *e)
{
	unsigned int type, shndx;

	if (is64) {
		Elf64_Sym y;

		memcpy(&y, raw, sizeof(y));
		e->value = y.st_value, e->size = y.st_size, e->name = y.st_name;
		type = ELF64_ST_TYPE(y.st_info), shndx = y.st_shndx;
	} else {
		Elf32_Sym y;

		memcpy(&y, raw, sizeof(y));
		e->value = y.st_value & ~1u, e->size = y.st_size, e->name = y.st_name; /* Thumb */
		type = ELF32_ST_TYPE(y.st_info), shndx = y.st_shndx;
	}
	e->func = (type == STT_FUNC || type == STT_GNU_IFUNC) && shndx != SHN_UNDEF && e->value &&
		  e->name && e->name < str_size;
}

#define SYM_CHUNK 2730 /* entries read at a time: 64 KiB of Elf64_Sym */

/*
 * Calls fn for every function symbol of the table, read SYM_CHUNK entries at a time: a large
 * table (node's .symtab, 2.6 MB) is streamed, never held whole. 0 or -EINVAL.
 */
static int sym_stream(const struct elf_syms *s, int fd,
		      void (*fn)(struct elf_syms *s, uint32_t idx, const struct sym_ent *e),
		      struct elf_syms *arg)
{
	size_t esz = s->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
	unsigned char *buf = malloc(SYM_CHUNK * esz);
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t i = 0; i < s->n_ents && !err; i += SYM_CHUNK) {
		size_t n = s->n_ents - i < SYM_CHUNK ? (size_t)(s->n_ents - i) : SYM_CHUNK;

		if (port_pread_full(fd, buf, n * esz, (off_t)(s->sym_off + i * esz))) {
			err = -EINVAL;
			break;
		}
		for (size_t k = 0; k < n; k++) {
			struct sym_ent e;

			sym_decode(s->is64, buf + k * esz, s->str_len, &e);
			if (e.func)
				fn(arg, (uint32_t)(i + k), &e);
		}
	}
	free(buf);
	return err;
}

static void sym_count(struct elf_syms *s, uint32_t idx, const struct sym_ent *e)
{
	(void)idx;
	if (!s->n_syms || e->value < s->base)
		s->base = e->value;
	if (e->value > s->top)
		s->top = e->value;
	s->n_syms++;
}

static void sym_add(struct elf_syms *s, uint32_t idx, const struct sym_ent *e)
{
	if (s->refs)
		s->refs[s->n_syms++] = (struct elf_sym_ref){(uint32_t)(e->value - s->base),
							    idx | (e->size ? 1u << 31 : 0)};
	else
		s->syms[s->n_syms++] = (struct elf_sym){e->value,
							e->size > UINT32_MAX ? UINT32_MAX
									     : (uint32_t)e->size,
							e->name};
}

/*
 * Indexes the function symbols of section si. Held whole (address, size, name offset: 16
 * bytes a function, and the string table) where that fits max_bytes; else an 8-byte index
 * (address from the lowest, symbol number) and the file kept open: each lookup reads its
 * symbol and name (two preads, ~2 us), so a table of any string size costs 8 bytes a function.
 */
static int load_symtab(struct elf_file *ef, unsigned int si, size_t max_bytes, struct elf_syms *s)
{
	const struct elf_shdr *st = &ef->sh[si], *str;
	size_t esz = ef->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym), n;
	int err;

	if (st->link >= ef->n_sh || st->entsize != esz)
		return -EINVAL;
	str = &ef->sh[st->link];
	s->is64 = ef->is64;
	s->n_ents = st->size / esz;
	s->sym_off = st->offset;
	s->str_off = str->offset;
	s->str_len = str->size;
	if (s->n_ents >= 1u << 31)
		return -EFBIG;
	err = sym_stream(s, ef->fd, sym_count, s);
	n = s->n_syms;
	if (err || !n)
		return err ? err : -ENOENT;
	s->n_syms = 0;
	if (sizeof(*s) + n * sizeof(struct elf_sym) + str->size <= max_bytes) {
		s->syms = malloc(n * sizeof(*s->syms));
		s->names = malloc(str->size + 1);
		if (!s->syms || !s->names)
			return -ENOMEM;
		if (port_pread_full(ef->fd, s->names, str->size, (off_t)str->offset))
			return -EINVAL;
		s->names[str->size] = 0;
		s->names_len = str->size;
	} else if (sizeof(*s) + n * sizeof(struct elf_sym_ref) + ELF_SYM_NAME_MAX <= max_bytes &&
		   s->top - s->base <= UINT32_MAX) {
		s->refs = malloc(n * sizeof(*s->refs));
		s->name = malloc(ELF_SYM_NAME_MAX);
		if (!s->refs || !s->name)
			return -ENOMEM;
	} else {
		return -EFBIG;
	}
	err = sym_stream(s, ef->fd, sym_add, s);
	if (err)
		return err;
	if (s->syms)
		qsort(s->syms, s->n_syms, sizeof(*s->syms), sym_cmp);
	else
		qsort(s->refs, s->n_syms, sizeof(*s->refs), ref_cmp);
	return 0;
}

static void syms_reset(struct elf_syms *s)
{
	free(s->syms);
	free(s->refs);
	free(s->names);
	free(s->name);
	s->syms = NULL;
	s->refs = NULL;
	s->names = NULL;
	s->name = NULL;
	s->n_syms = 0;
	s->names_len = 0;
	s->base = s->top = 0;
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
	s->fd = -1;
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
		int derr;

		syms_reset(s);
		derr = load_symtab(&ef, (unsigned int)dyn, max_bytes, s);
		err = derr == -ENOENT && err == -EFBIG ? err : derr; /* .symtab too big: say so */
	}
	if (!err && s->refs) { /* names and sizes are read from the file at each lookup */
		s->fd = ef.fd;
		ef.fd = -1;
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

/* The address of index entry i. */
static uint64_t sym_addr(const struct elf_syms *s, size_t i)
{
	return s->syms ? s->syms[i].addr : s->base + s->refs[i].delta;
}

/*
 * Symbol idx's size and name, read from the file into s->name (NUL-terminated within
 * ELF_SYM_NAME_MAX, else no name: a name cut short could be another function's). False when
 * unreadable.
 */
static bool sym_read(const struct elf_syms *s, uint32_t idx, uint64_t *size)
{
	size_t esz = s->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
	unsigned char raw[sizeof(Elf64_Sym)];
	struct sym_ent e;
	size_t len;

	if (port_pread_full(s->fd, raw, esz, (off_t)(s->sym_off + (uint64_t)idx * esz)))
		return false;
	sym_decode(s->is64, raw, s->str_len, &e);
	if (!e.func)
		return false;
	/* most names fit 256 bytes: a 4 KiB read each lookup cost 9 us (node), 256 bytes ~2 */
	for (size_t want = 256;; want = ELF_SYM_NAME_MAX) {
		len = s->str_len - e.name < want ? (size_t)(s->str_len - e.name) : want;
		if (port_pread_full(s->fd, s->name, len, (off_t)(s->str_off + e.name)))
			return false;
		if (memchr(s->name, 0, len))
			break;
		if (want == ELF_SYM_NAME_MAX || len < want)
			return false;
	}
	*size = e.size;
	return true;
}

const char *elf_syms__lookup(const struct elf_syms *s, uint64_t off, uint64_t *sym_vaddr)
{
	uint64_t va = elf_syms__vaddr(s, off), addr, size;
	size_t lo = 0, hi = s->n_syms;
	const char *name;

	if (!va || !s->n_syms || va < sym_addr(s, 0))
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (sym_addr(s, mid) <= va)
			lo = mid;
		else
			hi = mid;
	}
	/* the last of the aliases at that address: a sized one where there is (sym_cmp) */
	addr = sym_addr(s, lo);
	if (s->syms) {
		size = s->syms[lo].size;
		name = s->names + s->syms[lo].name;
	} else {
		if (!sym_read(s, s->refs[lo].idx & ~(1u << 31), &size))
			return NULL;
		name = s->name;
	}
	if (size && va >= addr + size)
		return NULL; /* past its end: in no function the table knows */
	if (sym_vaddr)
		*sym_vaddr = addr;
	return name;
}

size_t elf_syms__bytes(const struct elf_syms *s)
{
	return sizeof(*s) + s->n_syms * (s->syms ? sizeof(*s->syms) : sizeof(*s->refs)) +
	       s->names_len + (s->name ? ELF_SYM_NAME_MAX : 0);
}

size_t elf_syms__count(const struct elf_syms *s)
{
	return s->n_syms;
}

bool elf_syms__names_stable(const struct elf_syms *s)
{
	return s->syms != NULL;
}

void elf_syms__free(struct elf_syms *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	syms_reset(s);
	free(s);
}
