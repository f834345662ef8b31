// SPDX-License-Identifier: MIT
/*
 * store/symbols/dwarf-line.c — the line-number program decoder; see dwarf-line.h. Follows DWARF 5
 * section 6.2 (and its DWARF 2-4 header layouts). Rows are kept only where file or line change,
 * with an end mark after each sequence, so a lookup is one binary search.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/symbols/dwarf-line.h"

#define NO_FILE UINT32_MAX /* a row that ends a sequence: addresses from here are unknown */
#define MAX_FILES 65536

enum {
	LNS_copy = 1, LNS_advance_pc, LNS_advance_line, LNS_set_file, LNS_set_column,
	LNS_negate_stmt, LNS_set_basic_block, LNS_const_add_pc, LNS_fixed_advance_pc,
	LNE_end_sequence = 1, LNE_set_address = 2,
	LNCT_path = 1, LNCT_directory_index = 2,
	FORM_data2 = 0x05, FORM_data4 = 0x06, FORM_data8 = 0x07, FORM_string = 0x08,
	FORM_block = 0x09, FORM_data1 = 0x0b, FORM_strp = 0x0e, FORM_udata = 0x0f,
	FORM_data16 = 0x1e, FORM_line_strp = 0x1f,
};

struct dwarf_row {
	uint64_t addr;
	uint32_t file; /* index into files, or NO_FILE */
	uint32_t line;
};

struct dwarf_lines {
	struct dwarf_row *rows;
	size_t n_rows, cap_rows;
	char **files;
	size_t n_files, cap_files;
	size_t bytes, max_bytes;
};

/* A bounds-checked reader: past the end it returns zeros and remembers it went wrong. */
struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static bool cur_need(struct cur *c, size_t n)
{
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		c->p = c->end;
		return false;
	}
	return true;
}

static uint64_t cur_uint(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if (!cur_need(c, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static uint64_t cur_uleb(struct cur *c)
{
	uint64_t v = 0;

	for (unsigned int shift = 0; cur_need(c, 1); shift += 7) {
		uint8_t b = *c->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	return 0;
}

static int64_t cur_sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b = 0;

	do {
		if (!cur_need(c, 1))
			return 0;
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

static const char *cur_cstr(struct cur *c)
{
	const uint8_t *nul;

	if (c->bad)
		return NULL;
	nul = memchr(c->p, 0, (size_t)(c->end - c->p));
	if (!nul) {
		c->bad = true;
		c->p = c->end;
		return NULL;
	}
	const char *s = (const char *)c->p;

	c->p = nul + 1;
	return s;
}

/* The NUL-terminated string at off in a string section, or NULL. */
static const char *str_at(const uint8_t *sec, size_t len, uint64_t off)
{
	if (!sec || off >= len || !memchr(sec + off, 0, len - (size_t)off))
		return NULL;
	return (const char *)sec + off;
}

/* One unit's header, with its tables resolved to strings in the section data. */
struct unit {
	unsigned int version, offset_size;
	uint8_t min_inst, line_range, opcode_base;
	int8_t line_base;
	const uint8_t *std_lengths;
	const char **dirs, **names;
	uint64_t *name_dir;
	uint32_t *interned; /* file index -> dwarf_lines.files index, NO_FILE until used */
	size_t n_dirs, n_files;
	struct cur prog;
};

struct parse {
	const struct dwarf_line_sections *s;
	struct dwarf_lines *l;
	char *err;
	size_t errlen;
	int ret;
};

static int fail(struct parse *ps, int ret, const char *fmt, ...)
{
	va_list ap;

	if (!ps->ret) {
		va_start(ap, fmt);
		vsnprintf(ps->err, ps->errlen, fmt, ap);
		va_end(ap);
		ps->ret = ret;
	}
	return ps->ret;
}

static int charge(struct parse *ps, size_t bytes)
{
	if (ps->l->bytes + bytes > ps->l->max_bytes)
		return fail(ps, -EFBIG, "line table larger than %zu bytes", ps->l->max_bytes);
	ps->l->bytes += bytes;
	return 0;
}

static int push_row(struct parse *ps, uint64_t addr, uint32_t file, uint32_t line)
{
	struct dwarf_lines *l = ps->l;

	if (l->n_rows == l->cap_rows) {
		size_t cap = l->cap_rows ? l->cap_rows * 2 : 1024;
		struct dwarf_row *r;

		if (charge(ps, (cap - l->cap_rows) * sizeof(*r)))
			return ps->ret;
		r = realloc(l->rows, cap * sizeof(*r));
		if (!r)
			return fail(ps, -ENOMEM, "out of memory");
		l->rows = r;
		l->cap_rows = cap;
	}
	l->rows[l->n_rows++] = (struct dwarf_row){ addr, file, line };
	return 0;
}

/* Joins the non-empty parts with '/' into a new entry of the file table. */
static int add_file(struct parse *ps, const char *const parts[3], uint32_t *idx)
{
	struct dwarf_lines *l = ps->l;
	size_t len = 1, at = 0;
	char *s;

	for (int i = 0; i < 3; i++)
		len += parts[i] ? strlen(parts[i]) + 1 : 0;
	if (l->n_files == l->cap_files) {
		size_t cap = l->cap_files ? l->cap_files * 2 : 64;
		char **f;

		if (charge(ps, (cap - l->cap_files) * sizeof(*f)))
			return ps->ret;
		f = realloc(l->files, cap * sizeof(*f));
		if (!f)
			return fail(ps, -ENOMEM, "out of memory");
		l->files = f;
		l->cap_files = cap;
	}
	if (charge(ps, len))
		return ps->ret;
	s = malloc(len);
	if (!s)
		return fail(ps, -ENOMEM, "out of memory");
	for (int i = 0; i < 3; i++)
		if (parts[i])
			at += (size_t)snprintf(s + at, len - at, "%s%s", at ? "/" : "", parts[i]);
	s[at] = 0;
	*idx = (uint32_t)l->n_files;
	l->files[l->n_files++] = s;
	return 0;
}

static const char *non_empty(const char *s)
{
	return s && s[0] ? s : NULL;
}

/*
 * The table index of file f of the unit, made on first use (most entries are never used). A
 * relative name is joined to its directory, and a relative directory to the compilation
 * directory (directory 0: listed in DWARF 5, not in DWARF 2-4).
 */
static int unit_file(struct parse *ps, struct unit *u, uint64_t f, uint32_t *idx)
{
	const char *parts[3] = { NULL, NULL, NULL };
	uint64_t d;

	if (f >= u->n_files || !u->names[f])
		return fail(ps, -EINVAL, "line program names file %llu of %zu",
			    (unsigned long long)f, u->n_files);
	if (u->interned[f] != NO_FILE) {
		*idx = u->interned[f];
		return 0;
	}
	parts[2] = u->names[f];
	d = u->name_dir[f];
	if (parts[2][0] != '/' && d < u->n_dirs)
		parts[1] = non_empty(u->dirs[d]);
	if (parts[2][0] != '/' && parts[1] && parts[1][0] != '/' && d)
		parts[0] = non_empty(u->dirs[0]);
	if (add_file(ps, parts, &u->interned[f]))
		return ps->ret;
	*idx = u->interned[f];
	return 0;
}

/* The line-number state machine's registers (DWARF 5 6.2.2), the ones we use. */
struct regs {
	uint64_t addr, file, line;
	bool in_seq; /* a row was emitted since the last end_sequence */
	uint32_t last_file, last_line;
	uint64_t seq_addr; /* the sequence's first row: its address, and where it is */
	size_t seq_row;
};

static void regs_reset(struct regs *r)
{
	*r = (struct regs){ .file = 1, .line = 1, .last_file = NO_FILE };
}

/* Appends the current row unless it only repeats the previous file:line. */
static int emit(struct parse *ps, struct unit *u, struct regs *r)
{
	uint32_t file = NO_FILE;

	if (unit_file(ps, u, r->file, &file))
		return ps->ret;
	if (r->in_seq && file == r->last_file && r->line == r->last_line)
		return 0;
	if (!r->in_seq) {
		r->seq_addr = r->addr;
		r->seq_row = ps->l->n_rows;
	}
	r->in_seq = true;
	r->last_file = file;
	r->last_line = r->line > UINT32_MAX ? UINT32_MAX : (uint32_t)r->line;
	return push_row(ps, r->addr, file, r->last_line);
}

/*
 * Ends a sequence with a mark: addresses from its end on are unknown. A sequence at address 0
 * is code the linker discarded (a duplicate inline function, a section --gc-sections dropped:
 * GNU ld relocates its address to 0): nothing runs at 0 in an executable or shared object, and
 * its rows would give their file:line to the real code its range overlaps. Dropped.
 */
static int end_sequence(struct parse *ps, struct regs *r)
{
	int ret = 0;

	if (r->in_seq && r->seq_addr == 0)
		ps->l->n_rows = r->seq_row;
	else if (r->in_seq)
		ret = push_row(ps, r->addr, NO_FILE, 0);
	regs_reset(r);
	return ret;
}

static int extended_op(struct parse *ps, struct unit *u, struct regs *r)
{
	struct cur *c = &u->prog;
	uint64_t len = cur_uleb(c);
	const uint8_t *next;

	if (c->bad || !len || len > (uint64_t)(c->end - c->p))
		return fail(ps, -EINVAL, "truncated extended opcode");
	next = c->p + len;
	switch (cur_uint(c, 1)) {
	case LNE_end_sequence:
		if (end_sequence(ps, r))
			return ps->ret;
		break;
	case LNE_set_address:
		if (len - 1 != 4 && len - 1 != 8)
			return fail(ps, -EINVAL, "DW_LNE_set_address of %llu bytes",
				    (unsigned long long)(len - 1));
		r->addr = cur_uint(c, (size_t)(len - 1));
		break;
	default: /* define_file, set_discriminator, vendor ops: nothing we need */
		break;
	}
	c->p = next;
	return 0;
}

static int standard_op(struct parse *ps, struct unit *u, struct regs *r, uint8_t op)
{
	struct cur *c = &u->prog;

	switch (op) {
	case LNS_copy:
		return emit(ps, u, r);
	case LNS_advance_pc:
		r->addr += cur_uleb(c) * u->min_inst;
		break;
	case LNS_advance_line:
		r->line += (uint64_t)cur_sleb(c);
		break;
	case LNS_set_file:
		r->file = cur_uleb(c);
		break;
	case LNS_const_add_pc:
		r->addr += (uint64_t)((255 - u->opcode_base) / u->line_range) * u->min_inst;
		break;
	case LNS_fixed_advance_pc:
		r->addr += cur_uint(c, 2);
		break;
	case LNS_negate_stmt:
	case LNS_set_basic_block:
		break;
	default: /* set_column, prologue/epilogue marks, isa, unknown: skip their operands */
		for (unsigned int i = 0; i < u->std_lengths[op - 1]; i++)
			cur_uleb(c);
		break;
	}
	return 0;
}

static int run_program(struct parse *ps, struct unit *u)
{
	struct cur *c = &u->prog;
	struct regs r;

	regs_reset(&r);
	while (!ps->ret && c->p < c->end) {
		uint8_t op = (uint8_t)cur_uint(c, 1);

		if (op >= u->opcode_base) {
			unsigned int adj = op - u->opcode_base;

			r.addr += (uint64_t)(adj / u->line_range) * u->min_inst;
			r.line += (uint64_t)(int64_t)(u->line_base + (int)(adj % u->line_range));
			emit(ps, u, &r);
		} else if (op == 0) {
			extended_op(ps, u, &r);
		} else {
			standard_op(ps, u, &r, op);
		}
		if (c->bad)
			fail(ps, -EINVAL, "line program runs past its unit");
	}
	/* A sequence left open at the end of a unit ends there: never extend it to later code. */
	if (!ps->ret && r.in_seq)
		end_sequence(ps, &r);
	return ps->ret;
}

/* n path pointers (and directory indexes when dir_idx): the tables of one unit. */
static int alloc_list(struct parse *ps, uint64_t n, const char ***paths, uint64_t **dir_idx)
{
	if (n > MAX_FILES)
		return fail(ps, -EINVAL, "%llu entries in a directory or file table",
			    (unsigned long long)n);
	*paths = calloc(n + 1, sizeof(**paths));
	if (dir_idx)
		*dir_idx = calloc(n + 1, sizeof(**dir_idx));
	if (!*paths || (dir_idx && !*dir_idx))
		return fail(ps, -ENOMEM, "out of memory");
	return 0;
}

static void free_tables(struct unit *u)
{
	free(u->dirs);
	free(u->names);
	free(u->name_dir);
	free(u->interned);
}

/* DWARF 2-4: directory 0 is the compilation directory (not listed), file 0 does not exist. */
static int read_v4_tables(struct parse *ps, struct unit *u, struct cur *h)
{
	struct cur scan = *h;
	const char *s;

	u->n_dirs = u->n_files = 1;
	while ((s = cur_cstr(&scan)) && s[0])
		u->n_dirs++;
	while ((s = cur_cstr(&scan)) && s[0]) {
		cur_uleb(&scan), cur_uleb(&scan), cur_uleb(&scan);
		u->n_files++;
	}
	if (scan.bad)
		return fail(ps, -EINVAL, "truncated directory or file table");
	if (alloc_list(ps, u->n_dirs, &u->dirs, NULL) ||
	    alloc_list(ps, u->n_files, &u->names, &u->name_dir))
		return ps->ret;
	for (size_t i = 1; i < u->n_dirs; i++)
		u->dirs[i] = cur_cstr(h);
	cur_cstr(h);
	for (size_t i = 1; i < u->n_files; i++) {
		u->names[i] = cur_cstr(h);
		u->name_dir[i] = cur_uleb(h);
		cur_uleb(h), cur_uleb(h);
	}
	cur_cstr(h);
	return 0;
}

static void skip_bytes(struct cur *h, uint64_t n)
{
	if (n > (uint64_t)(h->end - h->p))
		h->bad = true, h->p = h->end;
	else
		h->p += n;
}

/* One attribute value of a DWARF 5 entry: a string, or a number in *num. */
static const char *read_form(struct parse *ps, struct unit *u, struct cur *h, uint64_t form,
			     uint64_t *num)
{
	const struct dwarf_line_sections *s = ps->s;

	*num = 0;
	switch (form) {
	case FORM_string:
		return cur_cstr(h);
	case FORM_line_strp:
		return str_at(s->line_str, s->line_str_len, cur_uint(h, u->offset_size));
	case FORM_strp:
		return str_at(s->str, s->str_len, cur_uint(h, u->offset_size));
	case FORM_udata:
		*num = cur_uleb(h);
		return NULL;
	case FORM_data1:
		*num = cur_uint(h, 1);
		return NULL;
	case FORM_data2:
		*num = cur_uint(h, 2);
		return NULL;
	case FORM_data4:
		*num = cur_uint(h, 4);
		return NULL;
	case FORM_data8:
		*num = cur_uint(h, 8);
		return NULL;
	case FORM_data16:
		skip_bytes(h, 16);
		return NULL;
	case FORM_block:
		skip_bytes(h, cur_uleb(h));
		return NULL;
	default:
		fail(ps, -EINVAL, "unsupported form 0x%llx in a file entry",
		     (unsigned long long)form);
		h->bad = true;
		return NULL;
	}
}

/*
 * A DWARF 5 entry table: a format (pairs of content type and form), a count, then the
 * entries. Paths into *paths, directory indexes into *dir_idx when it is not NULL.
 */
static int read_v5_entries(struct parse *ps, struct unit *u, struct cur *h, const char ***paths,
			   uint64_t **dir_idx, size_t *n)
{
	uint64_t fmt[16][2], count;
	unsigned int n_fmt = (unsigned int)cur_uint(h, 1);

	if (n_fmt > 16)
		return fail(ps, -EINVAL, "%u attributes in an entry format", n_fmt);
	for (unsigned int i = 0; i < n_fmt; i++) {
		fmt[i][0] = cur_uleb(h);
		fmt[i][1] = cur_uleb(h);
	}
	count = cur_uleb(h);
	if (h->bad)
		return fail(ps, -EINVAL, "truncated entry format");
	if (alloc_list(ps, count, paths, dir_idx))
		return ps->ret;
	*n = (size_t)count;
	for (size_t e = 0; e < *n && !h->bad; e++) {
		for (unsigned int i = 0; i < n_fmt; i++) {
			uint64_t num;
			const char *str = read_form(ps, u, h, fmt[i][1], &num);

			if (fmt[i][0] == LNCT_path)
				(*paths)[e] = str;
			else if (fmt[i][0] == LNCT_directory_index && dir_idx)
				(*dir_idx)[e] = num;
		}
	}
	return ps->ret;
}

/* DWARF 5: directory 0 is the compilation directory, file 0 the primary source file. */
static int read_v5_tables(struct parse *ps, struct unit *u, struct cur *h)
{
	if (read_v5_entries(ps, u, h, &u->dirs, NULL, &u->n_dirs) ||
	    read_v5_entries(ps, u, h, &u->names, &u->name_dir, &u->n_files))
		return ps->ret;
	if (h->bad)
		return fail(ps, -EINVAL, "truncated directory or file table");
	return 0;
}

static int read_tables(struct parse *ps, struct unit *u, struct cur *h)
{
	int ret = u->version >= 5 ? read_v5_tables(ps, u, h) : read_v4_tables(ps, u, h);

	if (ret)
		return ret;
	u->interned = malloc((u->n_files + 1) * sizeof(*u->interned));
	if (!u->interned)
		return fail(ps, -ENOMEM, "out of memory");
	for (size_t i = 0; i <= u->n_files; i++)
		u->interned[i] = NO_FILE;
	return 0;
}

static int read_header(struct parse *ps, struct unit *u, struct cur *h)
{
	uint64_t header_len;

	u->version = (unsigned int)cur_uint(h, 2);
	if (u->version < 2 || u->version > 5)
		return fail(ps, -EINVAL, "line table version %u (2..5 are read)", u->version);
	if (u->version >= 5) {
		cur_uint(h, 1); /* address size: DW_LNE_set_address says it again */
		cur_uint(h, 1); /* segment selector size */
	}
	header_len = cur_uint(h, u->offset_size);
	if (h->bad || header_len > (uint64_t)(h->end - h->p))
		return fail(ps, -EINVAL, "header length past the unit");
	u->prog = (struct cur){ h->p + header_len, h->end, false };
	h->end = h->p + header_len;
	u->min_inst = (uint8_t)cur_uint(h, 1);
	if (u->version >= 4)
		cur_uint(h, 1); /* maximum_operations_per_instruction: VLIW only */
	cur_uint(h, 1); /* default_is_stmt: every row is kept */
	u->line_base = (int8_t)cur_uint(h, 1);
	u->line_range = (uint8_t)cur_uint(h, 1);
	u->opcode_base = (uint8_t)cur_uint(h, 1);
	if (h->bad || !u->line_range || !u->opcode_base)
		return fail(ps, -EINVAL, "bad header (line_range %u, opcode_base %u)",
			    u->line_range, u->opcode_base);
	u->std_lengths = h->p;
	if (!cur_need(h, u->opcode_base - 1u))
		return fail(ps, -EINVAL, "truncated opcode lengths");
	h->p += u->opcode_base - 1u;
	return read_tables(ps, u, h);
}

/* The unit at the start of c; advances c past it. */
static int parse_unit(struct parse *ps, struct cur *c)
{
	struct unit u = { .offset_size = 4 };
	uint64_t len = cur_uint(c, 4);
	struct cur h;

	if (len == 0xffffffff) {
		u.offset_size = 8;
		len = cur_uint(c, 8);
	}
	if (c->bad || len > (uint64_t)(c->end - c->p))
		return fail(ps, -EINVAL, "unit length %llu past the section",
			    (unsigned long long)len);
	h = (struct cur){ c->p, c->p + len, false };
	c->p += len;
	if (!read_header(ps, &u, &h))
		run_program(ps, &u);
	free_tables(&u);
	return ps->ret;
}

static int row_cmp(const void *a, const void *b)
{
	const struct dwarf_row *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* An end mark sorts before a row starting at the same address, so the row wins. */
	return (x->file != NO_FILE) - (y->file != NO_FILE);
}

int dwarf_lines__parse(const struct dwarf_line_sections *s, size_t max_bytes,
		       struct dwarf_lines **out, char *err, size_t errlen)
{
	struct dwarf_lines *l = calloc(1, sizeof(*l));
	struct parse ps = { .s = s, .l = l, .err = err, .errlen = errlen };
	struct cur c = { s->line, s->line + s->line_len, false };

	*out = NULL;
	if (!l)
		return fail(&ps, -ENOMEM, "out of memory");
	l->max_bytes = max_bytes;
	charge(&ps, sizeof(*l));
	while (!ps.ret && c.p < c.end) {
		size_t at = (size_t)(c.p - s->line);

		if (parse_unit(&ps, &c)) {
			size_t n = strlen(err);

			if (ps.ret == -EINVAL && n + 1 < errlen)
				snprintf(err + n, errlen - n, " (unit at .debug_line+0x%zx)", at);
		}
	}
	if (ps.ret) {
		dwarf_lines__free(l);
		return ps.ret;
	}
	if (l->n_rows)
		qsort(l->rows, l->n_rows, sizeof(*l->rows), row_cmp);
	*out = l;
	return 0;
}

bool dwarf_lines__lookup(const struct dwarf_lines *l, uint64_t vaddr, const char **file,
			 uint32_t *line)
{
	size_t lo = 0, hi = l ? l->n_rows : 0;
	const struct dwarf_row *r;

	/* The last row at or below vaddr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->rows[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	r = &l->rows[lo - 1];
	if (r->file == NO_FILE || !r->line)
		return false;
	*file = l->files[r->file];
	*line = r->line;
	return true;
}

size_t dwarf_lines__bytes(const struct dwarf_lines *l)
{
	return l ? l->bytes : 0;
}

size_t dwarf_lines__rows(const struct dwarf_lines *l)
{
	return l ? l->n_rows : 0;
}

void dwarf_lines__free(struct dwarf_lines *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n_files; i++)
		free(l->files[i]);
	free(l->files);
	free(l->rows);
	free(l);
}
