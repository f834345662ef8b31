// SPDX-License-Identifier: MIT
/* agent/elf.c — build-ids, load segments and function symbols; see elf.h. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/elf.h"
#include "port/file.h"

#define ELF_MAX_PHDRS 64
#define ELF_MAX_SHDRS 512

/* Class-independent copies of the headers we use. */
struct elf_phdr {
	uint32_t type;
	uint64_t offset, vaddr, filesz;
};

struct elf_shdr {
	uint32_t type, link;
	uint64_t offset, size, entsize;
};

struct elf_file {
	int fd;
	bool is64;
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
	struct elf_phdr load[16];
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
	} else {
		Elf32_Ehdr eh;

		if (port_pread_full(ef->fd, &eh, sizeof(eh), 0))
			goto bad;
		phoff = eh.e_phoff, shoff = eh.e_shoff, phnum = eh.e_phnum, shnum = eh.e_shnum;
		phentsize = eh.e_phentsize, shentsize = eh.e_shentsize;
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
			*s = (struct elf_shdr){sh.sh_type, sh.sh_link, sh.sh_offset, sh.sh_size,
					       sh.sh_entsize};
		} else {
			Elf32_Shdr sh;

			if (port_pread_full(ef->fd, &sh, sizeof(sh),
					    (off_t)(shoff + i * sizeof(sh))))
				goto bad;
			*s = (struct elf_shdr){sh.sh_type, sh.sh_link, sh.sh_offset, sh.sh_size,
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
	close(ef->fd);
	free(ef->sh);
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
				size_t n = 0;

				for (uint32_t k = 0; k < dsz && n + 3 <= hexlen; k++, n += 2) {
					static const char digits[] = "0123456789abcdef";

					hex[n] = digits[buf[desc + k] >> 4];
					hex[n + 1] = digits[buf[desc + k] & 15];
				}
				if (hexlen)
					hex[n] = 0;
				err = 0;
				break;
			}
			off = desc + ((dsz + 3) & ~3u);
		}
	}
	elf_close(&ef);
	return err;
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
	for (unsigned int i = 0; i < ef.n_ph && s->n_load < 16; i++)
		if (ef.ph[i].type == PT_LOAD)
			s->load[s->n_load++] = ef.ph[i];
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
	for (unsigned int i = 0; i < s->n_load; i++) {
		const struct elf_phdr *p = &s->load[i];

		if (off >= p->offset && off < p->offset + p->filesz)
			return off - p->offset + p->vaddr;
	}
	return 0;
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
