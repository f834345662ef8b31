/* SPDX-License-Identifier: MIT */
/*
 * store/symbols/dwarf-line.h — file:line for addresses, from the DWARF line-number programs of an
 * unstripped ELF file (.debug_line, DWARF 2 to 5, with .debug_line_str/.debug_str for DWARF 5
 * file entries; zlib-compressed sections as gcc -gz writes them).
 *
 * Our own minimal reader rather than libdw: the collector is also built static for ARM boards
 * whose sysroots hold only what tools/deps/target.list names, and a reader of a few hundred
 * lines has no dependency and can be fuzzed (tests/fuzz/dwarf-line.c). It reads line tables
 * only: no inlined frames (.debug_info), no split DWARF (.dwo), no DWARF 5 DW_FORM_strx forms.
 *
 * Every read is bounds-checked; any malformed unit rejects the whole table with a message, and
 * the caller falls back to function names from .symtab.
 */
#ifndef EDGEPROF_STORE_DWARF_LINE_H
#define EDGEPROF_STORE_DWARF_LINE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dwarf_line_sections {
	const uint8_t *line;	 /* .debug_line */
	size_t line_len;
	const uint8_t *line_str; /* .debug_line_str (DW_FORM_line_strp), may be NULL */
	size_t line_str_len;
	const uint8_t *str;	 /* .debug_str (DW_FORM_strp), may be NULL */
	size_t str_len;
};

struct dwarf_lines;

#ifdef CONFIG_COLLECTOR_DWARF
/*
 * Decodes every line-number program of s into an address-sorted table. -EINVAL with err set
 * when a program is malformed, -EFBIG when the table would need more than max_bytes, -ENOMEM.
 */
int dwarf_lines__parse(const struct dwarf_line_sections *s, size_t max_bytes,
		       struct dwarf_lines **out, char *err, size_t errlen);

/*
 * The line table of the ELF file at path: -ENOENT when it has no .debug_line, else as
 * dwarf_lines__parse (and -EINVAL for an unreadable ELF file or section).
 */
int dwarf_lines__load(const char *path, size_t max_bytes, struct dwarf_lines **out, char *err,
		      size_t errlen);

/* Source file and line of the instruction at vaddr (a symbol address); false when unknown. */
bool dwarf_lines__lookup(const struct dwarf_lines *l, uint64_t vaddr, const char **file,
			 uint32_t *line);
size_t dwarf_lines__bytes(const struct dwarf_lines *l);
size_t dwarf_lines__rows(const struct dwarf_lines *l);
void dwarf_lines__free(struct dwarf_lines *l); /* NULL-safe */
#else
/* Built without CONFIG_COLLECTOR_DWARF: no file has line tables, names come from .symtab. */
static inline int dwarf_lines__load(const char *path, size_t max_bytes,
				    struct dwarf_lines **out, char *err, size_t errlen)
{
	(void)path, (void)max_bytes, (void)err, (void)errlen;
	*out = NULL;
	return -ENOENT;
}

static inline bool dwarf_lines__lookup(const struct dwarf_lines *l, uint64_t vaddr,
				       const char **file, uint32_t *line)
{
	(void)l, (void)vaddr, (void)file, (void)line;
	return false;
}

static inline size_t dwarf_lines__bytes(const struct dwarf_lines *l)
{
	(void)l;
	return 0;
}

static inline void dwarf_lines__free(struct dwarf_lines *l)
{
	(void)l;
}
#endif

#endif /* EDGEPROF_STORE_DWARF_LINE_H */
