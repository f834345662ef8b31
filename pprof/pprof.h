/* SPDX-License-Identifier: MIT */
/*
 * pprof/pprof.h — the profile format shared by the agent, the collector and the CLI.
 *
 * Three parts:
 *  - builder: streaming encoder. Samples are encoded into the deflate stream as they are added
 *    (protobuf allows fields in any order), the tables (mappings, locations, functions, strings)
 *    follow at finish. Memory = the deduplicated tables + zlib's state; it does not grow with
 *    the number of samples.
 *  - reader: validating decoder of gzip or raw pprof from any producer, into struct
 *    pprof_profile. Every id and string index is checked; errors name what is wrong.
 *  - merger: N profiles into one with the semantics of `pprof -proto a b ...`.
 *
 * Conventions: string fields are indexes into strings[] (strings[0] == ""); ids are 1-based
 * and dense after reading (location id i is locations[i - 1]); functions return 0 or -errno
 * unless documented otherwise; free functions are NULL-safe.
 */
#ifndef EDGEPROF_PPROF_H
#define EDGEPROF_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the decoded profile ------------------------------------------------------------------ */

struct pprof_value_type {
	int64_t type; /* string index, e.g. "cpu" */
	int64_t unit; /* string index, e.g. "nanoseconds" */
};

struct pprof_label {
	int64_t key;      /* string index */
	int64_t str;      /* string index, 0 when numeric */
	int64_t num;
	int64_t num_unit; /* string index, 0 when none */
};

struct pprof_sample {
	uint64_t *location_ids; /* leaf first */
	size_t n_locations;
	int64_t *values;        /* exactly n_sample_type entries */
	struct pprof_label *labels;
	size_t n_labels;
};

struct pprof_mapping {
	uint64_t id;
	uint64_t memory_start, memory_limit, file_offset;
	int64_t filename; /* string index */
	int64_t build_id; /* string index, lowercase hex */
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct pprof_line {
	uint64_t function_id;
	int64_t line;
	int64_t column;
};

struct pprof_location {
	uint64_t id;
	uint64_t mapping_id; /* 0 = unknown */
	uint64_t address;
	struct pprof_line *lines; /* last entry is the caller the earlier (inlined) ones fold into */
	size_t n_lines;
	bool is_folded;
};

struct pprof_function {
	uint64_t id;
	int64_t name, system_name, filename; /* string indexes */
	int64_t start_line;
};

struct pprof_profile {
	struct pprof_value_type *sample_type;
	size_t n_sample_type;
	struct pprof_sample *samples;
	size_t n_samples;
	struct pprof_mapping *mappings;
	size_t n_mappings;
	struct pprof_location *locations;
	size_t n_locations;
	struct pprof_function *functions;
	size_t n_functions;
	char **strings; /* NUL-terminated copies; strings[0] == "" */
	size_t n_strings;
	int64_t drop_frames, keep_frames; /* string indexes */
	int64_t time_nanos, duration_nanos;
	struct pprof_value_type period_type;
	int64_t period;
	int64_t *comments; /* string indexes */
	size_t n_comments;
	int64_t default_sample_type; /* string index */
	int64_t doc_url;             /* string index */
	/*
	 * Internal. Profiles made by pprof_read() and the merger keep their strings and their
	 * per-sample / per-location arrays in a few big blocks owned here (one malloc per kind, not
	 * per element): do not free or realloc those arrays one by one. Profiles built by hand leave
	 * this NULL; pprof_profile__free() then frees every array and string on its own.
	 */
	struct pprof_blocks *blocks;
};

void pprof_profile__free(struct pprof_profile *p);
/* Every sample value times weight_milli / 1000 (a duty cycle's weight: store/api/api.c). */
void pprof_profile__weigh(struct pprof_profile *p, uint64_t weight_milli);

/* Shorthand for p->strings[idx] that is safe on a validated profile. */
static inline const char *pprof_str(const struct pprof_profile *p, int64_t idx)
{
	return (idx >= 0 && (size_t)idx < p->n_strings) ? p->strings[idx] : "";
}

/* ---- reader ------------------------------------------------------------------------------- */

struct pprof_read_limits {
	size_t max_input;          /* bytes of (compressed) input; 0 = default 64 MiB */
	size_t max_decoded;        /* bytes after gunzip; 0 = default 256 MiB */
	unsigned max_ratio;        /* gunzip expansion ratio bound (zip bombs); 0 = default 200;
				    * applies above 1 MiB of output (small inputs may expand more) */
	size_t max_samples;        /* 0 = default 10,000,000 */
	size_t max_stack_depth;    /* 0 = default 4096 */
	/*
	 * Samples whose encodings are the same but for their values (same location ids, same
	 * labels, in the same bytes) come out as one sample, values summed (int64 wrap-around), in
	 * the order of their first occurrence. Not done when any value is negative (the profile
	 * then reads as without): merged, a consumer that skips negative values would sum
	 * differently. For consumers that only sum by stack (the ClickHouse store): ~5x fewer
	 * samples to read, validate and hash on the fleet's profiles (3,400 samples, 715 stacks).
	 * Errors are the same as without (the same messages, sample indexes of the input).
	 */
	bool merge_samples;
	/*
	 * A memory budget (the collector's per request and global one): asked, before the read
	 * allocates, for the total bytes it will then hold (the inflated input, the merge tables,
	 * the profile's arrays, the id maps), each call with a larger total. 0 goes on; an error
	 * (-EFBIG: over a bound for good; -EAGAIN: momentarily full) ends the read with it, the
	 * budget's message in err. The caller gives the bytes back after freeing the profile.
	 * NULL = no budget.
	 */
	int (*reserve)(void *ctx, size_t total, char *err, size_t errlen);
	void *reserve_ctx;
};

/*
 * Decodes gzip or raw pprof (concatenated gzip members are one stream; unknown fields are
 * skipped; packed and unpacked repeated fields are accepted). Memory: the decoded bytes plus
 * the profile, whose arrays are sized exactly (about 1-3x the decoded size).
 * On error returns -EINVAL (malformed), -EFBIG (a limit) or -ENOMEM, *out stays NULL and err
 * holds a message that names what is wrong, e.g.
 * "sample 12 references location 99, profile has 40".
 */
int pprof_read(const void *data, size_t len, const struct pprof_read_limits *limits,
	       struct pprof_profile **out, char *err, size_t errlen);

bool pprof_is_gzip(const void *data, size_t len);

/* ---- builder ------------------------------------------------------------------------------ */

/* Where encoded (gzip) bytes go: returns 0 or -errno. */
typedef int (*pprof_write_fn)(void *ctx, const void *buf, size_t len);

/*
 * Memory bound of a builder (64-bit host; hash indexes run at most half full, and growable
 * arrays at most double their use):
 *   fixed      ~300 KiB: zlib's deflate state at windowBits 15 / memLevel 8 (256 KiB + ~6 KiB,
 *              none with gzip_level -1) and two 16 KiB staging buffers;
 *   strings    length + 1 bytes, + 8 B of index, + 16 B of hash index, each (x2 when growing);
 *   functions  40 B + 16 B;   mappings 56 B + 16 B;   locations 24 B + 16 B, + 24 B per line;
 *   labels     one scratch label (32 B) per label of the largest sample.
 * So at most ~2 x (tables) + 300 KiB, with every table capped by opts (max_*). A sample is
 * encoded into the deflate stream the moment it is added and costs no memory afterwards; only
 * strings it introduces (label keys and values) grow the string table.
 */
struct pprof_builder_opts {
	int gzip_level;        /* 1..9; 0 = default 6; -1 = no gzip (raw protobuf) */
	size_t max_strings;    /* table bounds; 0 = default 1,000,000 each */
	size_t max_functions;
	size_t max_locations;
	size_t max_mappings;
	/*
	 * pprof_write_profile() only: with gzip and threads > 1, the encoded profile (held in
	 * memory: about its raw size, plus its compressed copy) is deflated in up to `threads`
	 * parts at once, each of at least 64 KiB. 0 or 1: one deflate stream, as the builder.
	 */
	unsigned threads;
};

struct pprof_builder;

struct pprof_builder *pprof_builder__new(const struct pprof_builder_opts *opts,
					 pprof_write_fn write, void *ctx);

/* Interns s (NULL = ""), returns its index or -ENOSPC / -ENOMEM. */
int64_t pprof_builder__string(struct pprof_builder *b, const char *s);

/* Header. Sample types must all be added before the first sample. */
int pprof_builder__add_sample_type(struct pprof_builder *b, const char *type, const char *unit);
int pprof_builder__set_period(struct pprof_builder *b, const char *type, const char *unit,
			      int64_t period);
void pprof_builder__set_time(struct pprof_builder *b, int64_t time_nanos, int64_t duration_nanos);
int pprof_builder__add_comment(struct pprof_builder *b, const char *comment);
int pprof_builder__set_drop_frames(struct pprof_builder *b, const char *regex);
int pprof_builder__set_default_sample_type(struct pprof_builder *b, const char *type);

/* Tables, deduplicated: the same arguments return the same id. Ids are >= 1; 0 on error. */
struct pprof_mapping_desc {
	uint64_t memory_start, memory_limit, file_offset;
	const char *filename;
	const char *build_id; /* lowercase hex, or NULL */
	bool has_functions, has_filenames, has_line_numbers;
};
uint64_t pprof_builder__mapping(struct pprof_builder *b, const struct pprof_mapping_desc *m);
uint64_t pprof_builder__function(struct pprof_builder *b, const char *name,
				 const char *system_name, const char *filename, int64_t start_line);
struct pprof_line_desc {
	uint64_t function_id;
	int64_t line;
};
uint64_t pprof_builder__location(struct pprof_builder *b, uint64_t mapping_id, uint64_t address,
				 const struct pprof_line_desc *lines, size_t n_lines);

struct pprof_label_desc {
	const char *key;
	const char *str;      /* NULL for a numeric label */
	int64_t num;
	const char *num_unit; /* NULL for none */
};

/* Encodes one sample now (leaf first); values has one entry per sample type. */
int pprof_builder__add_sample(struct pprof_builder *b, const uint64_t *location_ids, size_t n_locs,
			      const int64_t *values, const struct pprof_label_desc *labels,
			      size_t n_labels);

/* Writes the tables and the gzip trailer. The builder can only be freed afterwards. */
int pprof_builder__finish(struct pprof_builder *b);
void pprof_builder__free(struct pprof_builder *b);

/* Encodes a whole decoded profile (used by merge and by the collector's export). */
int pprof_write_profile(const struct pprof_profile *p, const struct pprof_builder_opts *opts,
			pprof_write_fn write, void *ctx);

/* A pprof_write_fn that appends to a growable malloc'd buffer. */
struct pprof_buf {
	unsigned char *data;
	size_t len, cap, max; /* max = 0: unbounded */
};
int pprof_buf_write(void *ctx, const void *buf, size_t len);
/* A pprof_write_fn for a FILE *. */
int pprof_file_write(void *ctx, const void *buf, size_t len);

/* ---- budgets: memory asked before it is allocated, a deadline ----------------------------- */

/*
 * What a merge (and the reads it makes) may spend: the collector's query budgets
 * (store/server/mem-budget.h). take() asks for bytes more before they are allocated: 0, or
 * -EFBIG (over a bound for good) / -EAGAIN (momentarily full) with err saying which; give()
 * returns bytes. Both may be called from several threads at once. Past deadline_ns
 * (port_clock_mono_ns(); 0 = none) a merge stops with -ETIMEDOUT, checked per input and per
 * PPROF_BUDGET_CHECK_SAMPLES samples.
 */
struct pprof_budget {
	int (*take)(void *ctx, size_t bytes, char *err, size_t errlen);
	void (*give)(void *ctx, size_t bytes);
	void *ctx;
	uint64_t deadline_ns;
};
#define PPROF_BUDGET_CHECK_SAMPLES 4096

/* One read's share of a budget: pprof_read_limits.reserve with reserve_ctx a charge. */
struct pprof_read_charge {
	const struct pprof_budget *b;	/* NULL: nothing charged */
	size_t held;
};
int pprof_read_charge__reserve(void *ctx, size_t total, char *err, size_t errlen);
/*
 * pprof_read() of data under b (NULL = none): what the read allocates is taken first; once read,
 * only the profile stays charged (pprof_profile__mem()): give that back after freeing it.
 */
int pprof_read_budget(const void *data, size_t len, const struct pprof_budget *b,
		      struct pprof_profile **out, char *err, size_t errlen);
/* The bytes a decoded profile holds (its arrays and strings), as charged for it. */
size_t pprof_profile__mem(const struct pprof_profile *p);
/* Frees p and gives its charge back to b (NULL: only frees). */
void pprof_profile__free_budget(struct pprof_profile *p, const struct pprof_budget *b);
/* -ETIMEDOUT with err filled when b's deadline has passed, else 0. */
int pprof_budget__check(const struct pprof_budget *b, char *err, size_t errlen);

/* ---- merge -------------------------------------------------------------------------------- */

/*
 * Memory of a merger: the merged tables (strings, mappings, functions, locations) and one entry
 * per unique (stack, labels) with its values, plus per-input id maps sized to the input being
 * added. It does not grow with the number of inputs that repeat known stacks.
 */
struct pprof_merger;

struct pprof_merger *pprof_merger__new(void);
/*
 * Adds one profile. Sample types are matched as pprof does (types present in every input, in
 * the first input's order); incompatible inputs return -EINVAL with a clear message
 * ("cpu profiles cannot be combined with heap profiles").
 */
int pprof_merger__add(struct pprof_merger *m, const struct pprof_profile *p, char *err,
		      size_t errlen);
/* (an -EINVAL from it leaves the merger as it was: the caller may skip that input and go on) */
/* Adds a comment to the merged profile (what was left out, and why). 0 or -ENOMEM. */
int pprof_merger__add_comment(struct pprof_merger *m, const char *comment);
/* The merged profile (ids renumbered from 1, zero samples dropped); the merger is spent. */
int pprof_merger__finish(struct pprof_merger *m, struct pprof_profile **out, char *err,
			 size_t errlen);
void pprof_merger__free(struct pprof_merger *m); /* gives back what its tables held of a budget */
/*
 * From now on m asks b (kept, not copied) before its tables grow (the bound of what adding an
 * input can cost, settled to what it did cost after), and for the merged profile before
 * finish builds it (which then stays charged: the caller gives back pprof_profile__mem()). Adds
 * stop past b's deadline (-ETIMEDOUT). A refusal leaves the merger as it was.
 */
void pprof_merger__set_budget(struct pprof_merger *m, const struct pprof_budget *b);
/* The bytes m's tables hold now. */
size_t pprof_merger__mem(const struct pprof_merger *m);

/*
 * Reads and decodes input i (on a worker thread): 0 with *p, or -errno with err filled.
 * Must be safe to call from several threads at once for different i. b is the merger's budget
 * (NULL = none): decode with pprof_read_budget(), so that the profile is charged while it waits.
 */
typedef int (*pprof_load_fn)(void *ctx, size_t i, const struct pprof_budget *b,
			     struct pprof_profile **p, char *err, size_t errlen);

/*
 * Adds inputs 0..n-1 to m in input order (the same result as calling pprof_merger__add() on
 * each), decoding on up to threads workers (0 = one per online CPU) while this thread merges.
 * At most 2 x threads decoded inputs are held at once (charged to m's budget while they wait). On error returns it with err filled and
 * *failed (may be NULL) the index of the input that failed (n on success).
 */
int pprof_merger__add_all(struct pprof_merger *m, size_t n, unsigned threads,
			  pprof_load_fn load, void *ctx, size_t *failed, char *err, size_t errlen);

#endif /* EDGEPROF_PPROF_H */
