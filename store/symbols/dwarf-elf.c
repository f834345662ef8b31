// SPDX-License-Identifier: MIT
/*
 * store/symbols/dwarf-elf.c — finds the line-table sections of an ELF file by name and hands them to
 * the decoder (dwarf-line.c). Sections are read with pread into buffers bounded by the table
 * budget and freed once the table is built; SHF_COMPRESSED (zlib) sections are inflated.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "port/file.h"
#include "store/symbols/dwarf-line.h"

#define MAX_SECTIONS 4096

struct section {
	uint64_t offset, size, flags;
	uint32_t name;
};

struct elf_in {
	int fd;
	bool is64;
	size_t max_bytes;
	struct section *sh;
	unsigned int n_sh;
	char *names; /* .shstrtab */
	size_t names_len;
};

static void to_section(const struct elf_in *e, const void *raw, struct section *s)
{
	if (e->is64) {
		const Elf64_Shdr *h = raw;

		*s = (struct section){ h->sh_offset, h->sh_size, h->sh_flags, h->sh_name };
	} else {
		const Elf32_Shdr *h = raw;

		*s = (struct section){ h->sh_offset, h->sh_size, h->sh_flags, h->sh_name };
	}
}

static int read_at(const struct elf_in *e, uint64_t off, uint64_t len, uint8_t **out)
{
	uint8_t *buf;

	*out = NULL;
	if (len > e->max_bytes)
		return -EFBIG;
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	if (port_pread_full(e->fd, buf, (size_t)len, (off_t)off)) {
		free(buf);
		return -EINVAL;
	}
	buf[len] = 0;
	*out = buf;
	return 0;
}

/* The section header table and the section names. */
static int read_headers(struct elf_in *e)
{
	union { Elf64_Ehdr h64; Elf32_Ehdr h32; } eh;
	uint64_t shoff;
	unsigned int shentsize, shstrndx;
	uint8_t *raw;
	int ret;

	if (port_pread_full(e->fd, &eh, sizeof(eh), 0) || memcmp(eh.h64.e_ident, ELFMAG, SELFMAG) ||
	    eh.h64.e_ident[EI_DATA] != ELFDATA2LSB)
		return -EINVAL;
	e->is64 = eh.h64.e_ident[EI_CLASS] == ELFCLASS64;
	shoff = e->is64 ? eh.h64.e_shoff : eh.h32.e_shoff;
	e->n_sh = e->is64 ? eh.h64.e_shnum : eh.h32.e_shnum;
	shentsize = e->is64 ? eh.h64.e_shentsize : eh.h32.e_shentsize;
	shstrndx = e->is64 ? eh.h64.e_shstrndx : eh.h32.e_shstrndx;
	if (!e->n_sh || e->n_sh > MAX_SECTIONS || shstrndx >= e->n_sh ||
	    shentsize != (e->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)))
		return -EINVAL;
	ret = read_at(e, shoff, (uint64_t)e->n_sh * shentsize, &raw);
	if (ret)
		return ret;
	e->sh = calloc(e->n_sh, sizeof(*e->sh));
	if (!e->sh) {
		free(raw);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < e->n_sh; i++)
		to_section(e, raw + (size_t)i * shentsize, &e->sh[i]);
	free(raw);
	e->names_len = e->sh[shstrndx].size;
	return read_at(e, e->sh[shstrndx].offset, e->names_len, (uint8_t **)&e->names);
}

static const struct section *find_section(const struct elf_in *e, const char *name)
{
	for (unsigned int i = 0; i < e->n_sh; i++)
		if (e->sh[i].name < e->names_len && !strcmp(e->names + e->sh[i].name, name))
			return &e->sh[i];
	return NULL;
}

/* A zlib SHF_COMPRESSED section (an Elf*_Chdr, then the stream), inflated. */
static int inflate_section(const struct elf_in *e, uint8_t *raw, size_t len, uint8_t **out,
			   size_t *out_len)
{
	size_t hdr = e->is64 ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
	uint64_t type, size;
	uLongf got;
	uint8_t *buf;

	if (len < hdr)
		return -EINVAL;
	if (e->is64) {
		Elf64_Chdr ch;

		memcpy(&ch, raw, sizeof(ch));
		type = ch.ch_type, size = ch.ch_size;
	} else {
		Elf32_Chdr ch;

		memcpy(&ch, raw, sizeof(ch));
		type = ch.ch_type, size = ch.ch_size;
	}
	if (type != ELFCOMPRESS_ZLIB)
		return -ENOTSUP;
	if (size > e->max_bytes || size > (uLongf)-1)
		return -EFBIG;
	buf = malloc(size + 1);
	if (!buf)
		return -ENOMEM;
	got = (uLongf)size;
	if (uncompress(buf, &got, raw + hdr, (uLong)(len - hdr)) != Z_OK || got != size) {
		free(buf);
		return -EINVAL;
	}
	buf[size] = 0;
	*out = buf;
	*out_len = (size_t)size;
	return 0;
}

/* Section name's contents in *out (NULL, 0 when the file has no such section). */
static int load_section(const struct elf_in *e, const char *name, const uint8_t **out,
			size_t *len)
{
	const struct section *s = find_section(e, name);
	uint8_t *raw, *plain;
	int ret;

	*out = NULL;
	*len = 0;
	if (!s)
		return 0;
	ret = read_at(e, s->offset, s->size, &raw);
	if (ret || !(s->flags & SHF_COMPRESSED)) {
		*out = raw;
		*len = ret ? 0 : (size_t)s->size;
		return ret;
	}
	ret = inflate_section(e, raw, (size_t)s->size, &plain, len);
	free(raw);
	*out = ret ? NULL : plain;
	return ret;
}

int dwarf_lines__load(const char *path, size_t max_bytes, struct dwarf_lines **out, char *err,
		      size_t errlen)
{
	struct elf_in e = { .max_bytes = max_bytes };
	struct dwarf_line_sections s = { 0 };
	int ret;

	*out = NULL;
	e.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e.fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s", strerror(-ret));
		return ret;
	}
	ret = read_headers(&e);
	if (!ret)
		ret = load_section(&e, ".debug_line", &s.line, &s.line_len);
	if (!ret && !s.line)
		ret = -ENOENT;
	if (!ret)
		ret = load_section(&e, ".debug_line_str", &s.line_str, &s.line_str_len);
	if (!ret)
		ret = load_section(&e, ".debug_str", &s.str, &s.str_len);
	if (ret)
		snprintf(err, errlen, "reading the ELF sections: %s", strerror(-ret));
	else
		ret = dwarf_lines__parse(&s, max_bytes, out, err, errlen);
	free((void *)s.line);
	free((void *)s.line_str);
	free((void *)s.str);
	free(e.names);
	free(e.sh);
	close(e.fd);
	return ret;
}
