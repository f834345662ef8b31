/* SPDX-License-Identifier: MIT */
/*
 * pprof/view/flame.h — flame graph layout and a self-contained interactive SVG.
 *
 * Layout: every tree node becomes a box whose width is its total value (slot `slot` of the
 * tree) as a fraction of the root's; children sit left to right in tree order (ftree__sort()
 * first for the usual alphabetical order). Boxes narrower than min_frac are not drawn one by
 * one: a run of such siblings becomes one "[N small frames]" box, and their subtrees are
 * skipped, which bounds the output at about depth / min_frac boxes; max_rects is a hard bound
 * on top: flame__svg() doubles the minimum width until the boxes fit, and only a tree deeper
 * than the budget loses subtrees (counted).
 *
 * SVG: root at the bottom; hovering shows name, value and percent; a click zooms into a frame
 * (its ancestors stay as faded full-width bars), "Reset Zoom" or Escape returns; "Search"
 * (or Ctrl-F) takes a regex, highlights matching frames and prints the share they cover.
 * Colours: by module (Go package, C++ namespace, or the binary/library), or for a diff by the
 * change of each frame's share of the total: red grew, blue shrank, white unchanged.
 * A URL fragment acts on load: "#s=REGEX" searches, "#z=NAME" zooms into the first frame so
 * named (links to a view; and how the integration test checks the script in a browser).
 * Nothing is loaded from elsewhere: styles and script are inline.
 */
#ifndef EDGEPROF_TOOLS_FLAME_H
#define EDGEPROF_TOOLS_FLAME_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pprof/view/tree.h"

struct flame_rect {
	uint32_t node;	   /* tree node, or FTREE_NONE for a run of merged narrow siblings */
	uint32_t depth;	   /* root = 0 */
	uint32_t n_merged; /* siblings in a merged box */
	double x, w;	   /* fractions of the root's width */
	int64_t value[2];  /* total values (a merged box: summed) */
};

/*
 * Lays out t (widths from slot). On success *rects is malloc'd (caller frees) with *n boxes in
 * pre-order (parents before children); *elided counts the subtrees (a frame with all it calls)
 * left out because of max_rects.
 */
int flame__layout(const struct ftree *t, int slot, double min_frac, size_t max_rects,
		  struct flame_rect **rects, size_t *n, size_t *elided);

/* About 170 bytes of SVG each: 50,000 boxes is ~8.5 MB, which browsers still zoom smoothly. */
#define FLAME_DEFAULT_MAX_RECTS 50000

struct flame_opts {
	const char *title;
	const char *subtitle; /* a line under the title, e.g. sample type and total; may be NULL */
	const char *unit;     /* the sample unit ("nanoseconds", "bytes", "count") */
	unsigned width;	      /* px; 0 = 1200 */
	double min_width;     /* px below which frames merge; 0 = 0.1 */
	size_t max_rects;     /* 0 = FLAME_DEFAULT_MAX_RECTS */
	bool diff;	      /* widths from slot 1 (new), colours from new vs slot 0 (base) */
};

struct flame_result {
	size_t boxes;	  /* drawn */
	double min_width; /* px: frames narrower were merged (raised to fit max_rects) */
	size_t elided;	  /* subtrees left out even at the widest minimum (very deep trees) */
};

/*
 * Writes the SVG for t: 0, -ENOMEM or -EIO; *result may be NULL. When the boxes at min_width
 * exceed max_rects, the minimum width doubles until they fit.
 */
int flame__svg(const struct ftree *t, const struct flame_opts *o, FILE *out,
	       struct flame_result *result);

/* XML text for s: escapes markup and replaces control bytes and invalid UTF-8 with '?'. */
void flame__xml_escape(const char *s, size_t max_chars, FILE *out);

#endif /* EDGEPROF_TOOLS_FLAME_H */
