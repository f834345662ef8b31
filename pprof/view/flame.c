// SPDX-License-Identifier: MIT
/* pprof/view/flame.c — flame graph layout and the interactive SVG (see flame.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/view/flame.h"
#include "pprof/view/units.h"
#include "port/hash.h"

#define FRAME_H 16
#define FONT_PX 12
#define PAD 10
#define TOP_PX 46
#define BOTTOM_PX 30
#define CHAR_W (FONT_PX * 0.59) /* average Verdana glyph width, as flamegraph.pl */

struct lay {
	const struct ftree *t;
	int slot;
	double min_frac, total;
	size_t max, n, cap, elided;
	struct flame_rect *rects;
	uint32_t *stack; /* pending nodes; their x is in xs */
	double *xs;
	size_t sp;
};

static int emit(struct lay *l, const struct flame_rect *r)
{
	struct flame_rect *nr;

	if (l->n >= l->max) {
		l->elided++;
		return 0;
	}
	if (l->n == l->cap) {
		nr = realloc(l->rects, (l->cap ? l->cap * 2 : 256) * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		l->rects = nr;
		l->cap = l->cap ? l->cap * 2 : 256;
	}
	l->rects[l->n++] = *r;
	return 0;
}

/* A run of narrow siblings: one box (the node itself when alone), never descended into. */
static int flush_run(struct lay *l, struct flame_rect *run)
{
	int ret = 0;

	if (run->n_merged && run->w >= l->min_frac)
		ret = emit(l, run);
	run->n_merged = 0;
	return ret;
}

static int push(struct lay *l, uint32_t node, double x)
{
	/* every node is pushed at most once: t->n entries suffice (allocated up front) */
	l->stack[l->sp] = node;
	l->xs[l->sp++] = x;
	return 0;
}

/* Emits node n at x, then queues its wide children and merges the narrow ones. */
static int lay_node(struct lay *l, uint32_t n, double x)
{
	const struct ftree_node *nd = &l->t->nodes[n], *c;
	struct flame_rect r = {.node = n,
			       .depth = nd->depth,
			       .x = x,
			       .w = nd->total[l->slot] / l->total,
			       .value = {nd->total[0], nd->total[1]}};
	struct flame_rect run = {.node = FTREE_NONE};
	double cx = x, w;
	uint32_t ci;
	int ret;

	if (l->n >= l->max) {
		l->elided++;
		return 0;
	}
	ret = emit(l, &r);
	for (ci = nd->first_child; ci != FTREE_NONE && !ret; ci = c->next_sibling) {
		c = &l->t->nodes[ci];
		w = c->total[l->slot] / l->total;
		if (w <= 0)
			continue;
		if (w < l->min_frac) {
			if (!run.n_merged)
				run = (struct flame_rect){.node = ci, .depth = c->depth, .x = cx};
			else
				run.node = FTREE_NONE;
			run.n_merged++;
			run.w += w;
			run.value[0] += c->total[0];
			run.value[1] += c->total[1];
		} else {
			ret = flush_run(l, &run);
			if (!ret)
				ret = push(l, ci, cx);
		}
		cx += w;
	}
	return ret ? ret : flush_run(l, &run);
}

int flame__layout(const struct ftree *t, int slot, double min_frac, size_t max_rects,
		  struct flame_rect **rects, size_t *n, size_t *elided)
{
	struct lay l = {.t = t,
			.slot = slot,
			.min_frac = min_frac,
			.max = max_rects ? max_rects : FLAME_DEFAULT_MAX_RECTS};
	int ret = 0;

	*rects = NULL;
	*n = *elided = 0;
	l.total = (double)t->nodes[0].total[slot];
	if (l.total <= 0)
		l.total = 1; /* an empty profile draws the root alone, zero wide */
	l.stack = malloc(t->n * sizeof(*l.stack));
	l.xs = malloc(t->n * sizeof(*l.xs));
	if (!l.stack || !l.xs) {
		ret = -ENOMEM;
		goto out;
	}
	push(&l, 0, 0);
	while (l.sp && !ret) {
		l.sp--;
		ret = lay_node(&l, l.stack[l.sp], l.xs[l.sp]);
	}
	if (ret) {
		free(l.rects);
		goto out;
	}
	*rects = l.rects;
	*n = l.n;
	*elided = l.elided;
out:
	free(l.stack);
	free(l.xs);
	return ret;
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* overlong 3/4-byte forms, surrogates and > U+10FFFF are invalid XML text too */
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

static const char *xml_entity(unsigned char c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '"':
		return "&quot;";
	case '\'':
		return "&apos;";
	default:
		return NULL;
	}
}

void flame__xml_escape(const char *str, size_t max_chars, FILE *out)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t chars = 0, n;
	const char *e;

	for (; *s && chars < max_chars; chars++) {
		e = xml_entity(*s);
		if (e) {
			fputs(e, out);
			s++;
			continue;
		}
		n = utf8_len(s);
		if (!n || (*s < 0x20 && *s != '\t')) {
			putc('?', out);
			s++;
			continue;
		}
		fwrite(s, 1, n, out);
		s += n;
	}
}

/* Characters of a UTF-8 string, counted as the escape above counts them. */
static size_t char_count(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t chars = 0, n;

	for (; *s; chars++) {
		n = utf8_len(s);
		s += n ? n : 1;
	}
	return chars;
}

/* Same module, same hue; the name only varies lightness so neighbours stay apart. */
static void module_colour(const struct ftree_node *nd, char *buf, size_t len)
{
	uint32_t hm = hash_fnv32_str(nd->module[0] ? nd->module : nd->name), hn = hash_fnv32_str(nd->name);

	snprintf(buf, len, "hsl(%u,%u%%,%u%%)", hm % 360, 55 + (hm >> 9) % 25, 62 + hn % 14);
}

/* Change of a frame's share of the total, in [-1, 1]: new share - base share. */
static double share_delta(const int64_t v[2], const int64_t tot[2])
{
	double b = tot[0] ? (double)v[0] / (double)tot[0] : 0;
	double n = tot[1] ? (double)v[1] / (double)tot[1] : 0;

	return n - b;
}

static void diff_colour(double d, double max_abs, char *buf, size_t len)
{
	double i = max_abs > 0 ? fabs(d) / max_abs : 0;
	unsigned c = (unsigned)lround(250 - 190 * sqrt(i)); /* sqrt: small changes stay visible */

	if (d > 0)
		snprintf(buf, len, "rgb(250,%u,%u)", c, c);
	else if (d < 0)
		snprintf(buf, len, "rgb(%u,%u,250)", c, c);
	else
		snprintf(buf, len, "rgb(250,250,250)");
}

static const char script[] =
    "var W,fw="
    "7.08"
    ",frames,det,mt,unz,sb,box=[];\n"
    "function $(i){return document.getElementById(i);}\n"
    "function nm(g){return g.getElementsByTagName('title')[0].textContent.split('\\n')[0];}\n"
    "function init(){W=parseFloat(document.documentElement.getAttribute('width'));"
    "det=$('details').firstChild;mt=$('matched').firstChild;unz=$('unzoom');sb=$('search');\n"
    " frames=$('frames').getElementsByTagName('g');\n"
    " for(var i=0;i<frames.length;i++){var g=frames[i],r=g.getElementsByTagName('rect')[0];"
    "g.ox=parseFloat(r.getAttribute('x'));g.ow=parseFloat(r.getAttribute('width'));"
    "g.d=parseInt(g.getAttribute('data-d'));}\n"
    " $('frames').addEventListener('mouseover',function(e){var g=e.target.closest('g');"
    "if(g&&g.ow!==undefined)det.nodeValue=g.getElementsByTagName('title')[0].textContent"
    ".replace('\\n',': ');});\n"
    " $('frames').addEventListener('mouseout',function(){det.nodeValue=' ';});\n"
    " $('frames').addEventListener('click',function(e){var g=e.target.closest('g');"
    "if(g&&g.ow!==undefined)zoom(g);});\n"
    " unz.addEventListener('click',unzoom);sb.addEventListener('click',function(){"
    "if(sb.classList.contains('on'))reset_search();else search(prompt('Search (regex):',''));});\n"
    " window.addEventListener('keydown',function(e){if(e.key==='Escape'){unzoom();"
    "reset_search();}else if((e.ctrlKey||e.metaKey)&&e.key==='f'){e.preventDefault();"
    "search(prompt('Search (regex):',''));}});\n"
    " var h=decodeURIComponent(location.hash.substring(1)),k=h.indexOf('=');\n"
    " if(k>0&&h.substring(0,k)==='s')search(h.substring(k+1));\n"
    " if(k>0&&h.substring(0,k)==='z')for(var i=0;i<frames.length;i++)"
    "if(nm(frames[i])===h.substring(k+1)){zoom(frames[i]);break;}\n"
    "}\n"
    "function place(g,x,w){var "
    "r=g.getElementsByTagName('rect')[0],t=g.getElementsByTagName('text')[0];"
    "r.setAttribute('x',x.toFixed(2));r.setAttribute('width',w.toFixed(2));"
    "t.setAttribute('x',(x+3).toFixed(2));var n=nm(g),m=Math.floor((w-6)/fw);"
    "t.textContent=m<3?'':(n.length<=m?n:n.substring(0,m-2)+'..');}\n"
    "function zoom(z){var x=z.ox,w=z.ow,s=(W-2*"
    "10"
    ")/w,e=1e-6;unz.classList.remove('hide');\n"
    " for(var i=0;i<frames.length;i++){var f=frames[i];\n"
    "  "
    "if(f.d<z.d&&f.ox<=x+e&&f.ox+f.ow>=x+w-e){f.classList.remove('hide');f.classList.add('parent');"
    "place(f,"
    "10"
    ",W-2*"
    "10"
    ");}\n"
    "  else if(f.d>=z.d&&f.ox>=x-e&&f.ox+f.ow<=x+w+e){f.classList.remove('hide','parent');"
    "place(f,"
    "10"
    "+(f.ox-x)*s,f.ow*s);}\n"
    "  else f.classList.add('hide');}}\n"
    "function unzoom(){unz.classList.add('hide');for(var i=0;i<frames.length;i++){var f=frames[i];"
    "f.classList.remove('hide','parent');place(f,f.ox,f.ow);}}\n"
    "function reset_search(){for(var i=0;i<frames.length;i++)frames[i].classList.remove('match');"
    "mt.nodeValue=' ';sb.classList.remove('on');}\n"
    "function search(re){if(!re)return;var rx;try{rx=new RegExp(re);}catch(err){"
    "mt.nodeValue='bad regex';return;}reset_search();var iv=[];\n"
    " for(var i=0;i<frames.length;i++){var f=frames[i];if(rx.test(nm(f))){f.classList.add('match');"
    "iv.push([f.ox,f.ox+f.ow]);}}\n"
    " iv.sort(function(a,b){return a[0]-b[0];});var cov=0,end=-1;\n"
    " for(var j=0;j<iv.length;j++){var a=Math.max(iv[j][0],end);if(iv[j][1]>a){cov+=iv[j][1]-a;"
    "end=iv[j][1];}}\n"
    " mt.nodeValue='Matched: '+(100*cov/(W-2*"
    "10"
    ")).toFixed(1)+'%';sb.classList.add('on');}\n";

static void write_head(const struct flame_opts *o, unsigned width, unsigned height, FILE *out)
{
	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
		"onload=\"init(evt)\" xmlns=\"http://www.w3.org/2000/svg\">\n",
		width, height, width, height);
	fprintf(out,
		"<style type=\"text/css\">\n"
		"text{font-family:Verdana,sans-serif;font-size:%dpx;fill:#000}\n"
		"#title{font-size:17px;text-anchor:middle}#sub{fill:#555;text-anchor:middle}\n"
		"#frames g{cursor:pointer}#frames g:hover rect{stroke:#000;stroke-width:0.6}\n"
		"#frames text{pointer-events:none}.hide{display:none}.parent{opacity:0.55}\n"
		".match rect{fill:rgb(230,0,230)}.btn{cursor:pointer;fill:#06c}"
		".btn.on{font-weight:bold}\n</style>\n",
		FONT_PX);
	fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n", script);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#f8f8f8\"/>\n", width,
		height);
	fprintf(out, "<text id=\"title\" x=\"%u\" y=\"22\">", width / 2);
	flame__xml_escape(o->title ? o->title : "Flame Graph", 200, out);
	fprintf(out, "</text>\n<text id=\"sub\" x=\"%u\" y=\"38\">", width / 2);
	flame__xml_escape(o->subtitle ? o->subtitle : "", 300, out);
	fprintf(out,
		"</text>\n<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"22\">"
		"Reset Zoom</text>\n",
		PAD);
	fprintf(out, "<text id=\"search\" class=\"btn\" x=\"%u\" y=\"22\">Search</text>\n",
		width - PAD - 60);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", PAD, height - 10);
	fprintf(out, "<text id=\"matched\" x=\"%u\" y=\"%u\"> </text>\n", width - PAD - 160,
		height - 10);
}

/* The tooltip: name, then the value line. */
static void write_title(const struct ftree *t, const struct flame_rect *r, const char *name,
			const struct flame_opts *o, FILE *out)
{
	const int64_t *tot = t->nodes[0].total;
	char v0[48], v1[48], p0[16], p1[16];
	int s = o->diff ? 1 : 0;

	fputs("<title>", out);
	flame__xml_escape(name, 4096, out);
	units__format(v1, sizeof(v1), r->value[s], units__auto(o->unit, r->value[s]));
	snprintf(p1, sizeof(p1), "%.2f", tot[s] ? 100.0 * r->value[s] / tot[s] : 0);
	if (!o->diff) {
		fprintf(out, "\n%s (%s%%)</title>", v1, p1);
		return;
	}
	units__format(v0, sizeof(v0), r->value[0], units__auto(o->unit, r->value[0]));
	snprintf(p0, sizeof(p0), "%.2f", tot[0] ? 100.0 * r->value[0] / tot[0] : 0);
	fprintf(out, "\nbase %s (%s%%), new %s (%s%%), share %+.2f%%</title>", v0, p0, v1, p1,
		100 * share_delta(r->value, tot));
}

static void write_rect(const struct ftree *t, const struct flame_rect *r,
		       const struct flame_opts *o, unsigned width, unsigned height, double max_d,
		       FILE *out)
{
	const struct ftree_node *nd = r->node != FTREE_NONE ? &t->nodes[r->node] : NULL;
	double px = width - 2 * PAD, x = PAD + r->x * px, w = r->w * px;
	unsigned y = height - BOTTOM_PX - (r->depth + 1) * FRAME_H;
	char name[64], fill[48];
	const char *label = name;
	size_t chars, fit;

	if (nd)
		label = nd->name;
	else
		snprintf(name, sizeof(name), "[%u small frames]", r->n_merged);
	if (o->diff)
		diff_colour(share_delta(r->value, t->nodes[0].total), max_d, fill, sizeof(fill));
	else if (nd)
		module_colour(nd, fill, sizeof(fill));
	else
		snprintf(fill, sizeof(fill), "rgb(200,200,200)");
	fprintf(out, "<g data-d=\"%u\">", r->depth);
	write_title(t, r, label, o, out);
	fprintf(out,
		"<rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" rx=\"2\" fill=\"%s\"/>", x,
		y, w, FRAME_H - 1, fill);
	fprintf(out, "<text x=\"%.2f\" y=\"%u\">", x + 3, y + FRAME_H - 4);
	/* the same fitting as the script's place(), for viewers that run no script */
	chars = char_count(label);
	fit = w > 6 ? (size_t)((w - 6) / CHAR_W) : 0;
	if (fit >= 3 && chars <= fit)
		flame__xml_escape(label, chars, out);
	else if (fit >= 3) {
		flame__xml_escape(label, fit - 2, out);
		fputs("..", out);
	}
	fputs("</text></g>\n", out);
}

/*
 * Lays out with the requested minimum width, doubling it while the boxes exceed the budget:
 * the picture stays whole (narrow frames merged) instead of losing arbitrary subtrees. Only a
 * tree too deep for the budget at any width still elides.
 */
static int fit_layout(const struct ftree *t, const struct flame_opts *o, double px,
		      struct flame_rect **rects, size_t *n, struct flame_result *res)
{
	int tries, ret;

	res->min_width = o->min_width > 0 ? o->min_width : 0.1;
	for (tries = 0;; tries++) {
		ret = flame__layout(t, o->diff ? 1 : 0, res->min_width / px, o->max_rects, rects, n,
				    &res->elided);
		if (ret || !res->elided || tries == 24 || res->min_width >= px)
			return ret;
		free(*rects);
		res->min_width *= 2;
	}
}

int flame__svg(const struct ftree *t, const struct flame_opts *o, FILE *out,
	       struct flame_result *result)
{
	unsigned width = o->width ? o->width : 1200, height, max_depth = 0;
	struct flame_result res = {0};
	double max_d = 0, d;
	struct flame_rect *rects;
	size_t n, i;
	int ret;

	if (width < 200)
		width = 200;
	ret = fit_layout(t, o, width - 2 * PAD, &rects, &n, &res);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		if (rects[i].depth > max_depth)
			max_depth = rects[i].depth;
		d = fabs(share_delta(rects[i].value, t->nodes[0].total));
		if (rects[i].node != 0 && d > max_d)
			max_d = d;
	}
	height = TOP_PX + BOTTOM_PX + (max_depth + 1) * FRAME_H;
	write_head(o, width, height, out);
	fputs("<g id=\"frames\">\n", out);
	for (i = 0; i < n; i++)
		write_rect(t, &rects[i], o, width, height, max_d, out);
	fputs("</g>\n", out);
	fprintf(out, "<!-- %zu boxes, frames under %.2f px merged", n, res.min_width);
	if (res.elided)
		fprintf(out, ", %zu subtrees not drawn (budget %zu boxes)", res.elided,
			o->max_rects ? o->max_rects : (size_t)FLAME_DEFAULT_MAX_RECTS);
	fputs(" -->\n</svg>\n", out);
	res.boxes = n;
	if (result)
		*result = res;
	free(rects);
	return ferror(out) ? -EIO : 0;
}
