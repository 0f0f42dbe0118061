/* SPDX-License-Identifier: MIT */
/*
 * svg.c: --plot FILE.svg, drawn by weft-bench itself: the panels of
 * plot.c side by side, with nothing to install (a PNG needs gnuplot, an
 * optional package, and `make run` must show its plot on any machine it
 * runs on). Axes as gnuplot draws them for the PNG: a base-2 scale with a
 * tic at each node count, a linear one from 0 with round tics, a base-10
 * log scale for latencies; the legend below each panel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbench.h"

#define PANEL_W 550.0
#define PANEL_H 560.0
#define LEFT 78.0    /* room for the y tic labels and label */
#define RIGHT 20.0   /* from the panel's right edge */
#define TOP 56.0     /* the title above the plot area */
#define BOTTOM 150.0 /* the x tics, the x label and the legend */
#define MAX_TICS 24

static const char *const colours[8] = {"#9400d3", "#009e73", "#56b4e9",
                                       "#e69f00", "#f0e442", "#0072b2",
                                       "#e51e10", "#000000"};

/* One axis of a panel: where its values fall on the page. */
typedef struct scale {
	bool log;
	double lo, hi;       /* in values (for log: > 0) */
	double from, length; /* in pixels: lo at from, hi at from + length */
} scale;

static double
place(const scale *s, double v)
{
	double f = s->log ? (log(v) - log(s->lo)) / (log(s->hi) - log(s->lo))
	                  : (v - s->lo) / (s->hi - s->lo);

	return s->from + f * s->length;
}

/* xml_text writes s with XML's special characters escaped. */
static void
xml_text(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

/* tic_label writes v as gnuplot's "%.1s%c" does: 250k, 1.5M. */
static void
tic_label(char *out, size_t len, double v, bool logscale)
{
	if (logscale || fabs(v) < 1e3)
		snprintf(out, len, "%g", v);
	else if (fabs(v) < 1e6)
		snprintf(out, len, "%gk", v / 1e3);
	else if (fabs(v) < 1e9)
		snprintf(out, len, "%gM", v / 1e6);
	else
		snprintf(out, len, "%gG", v / 1e9);
}

/* The range of one axis: log scales with room of a factor 1.5 around the
 * points, linear ones from 0 (y) or with 8 % of room, up to a round
 * step. Fills tics[] and returns their count. */
static unsigned
set_range(scale *s, bool logscale, bool from_zero, double lo, double hi,
          double *tics)
{
	unsigned n = 0;

	s->log = logscale;
	if (logscale) {
		/* 1, 2 and 5 of each decade; every digit in a narrow range. */
		static const double some[] = {1, 2, 5},
		                    all[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
		const double *m = some;
		size_t nm = 3;

		s->lo = lo / 1.5;
		s->hi = hi * 1.5;
		if (s->hi / s->lo < 10) {
			m = all;
			nm = 9;
		}
		for (double d = pow(10, floor(log10(s->lo)));
		     d <= s->hi && n < MAX_TICS; d *= 10)
			for (size_t i = 0; i < nm && n < MAX_TICS; i++)
				if (d * m[i] >= s->lo && d * m[i] <= s->hi)
					tics[n++] = d * m[i];
		return n;
	}
	double pad = (hi - lo) * 0.08, step, mag;

	if (pad <= 0)
		pad = hi != 0 ? fabs(hi) * 0.1 : 1;
	s->lo = from_zero && lo >= 0 ? 0 : lo - pad;
	s->hi = hi + pad;
	/* A step of 1, 2 or 5 times a power of ten: about five tics. */
	mag = pow(10, floor(log10((s->hi - s->lo) / 5)));
	step = mag;
	if ((s->hi - s->lo) / step > 10)
		step = 2 * mag;
	if ((s->hi - s->lo) / step > 10)
		step = 5 * mag;
	s->hi = ceil(s->hi / step) * step;
	for (double t = ceil(s->lo / step) * step; t <= s->hi && n < MAX_TICS;
	     t += step)
		tics[n++] = t;
	return n;
}

/* The x tics of a base-2 axis: every x of the points (the node counts). */
static unsigned
point_xtics(const wbench_plot_panel *p, double *tics)
{
	unsigned n = 0;

	for (unsigned i = 0; i < p->nseries; i++)
		for (unsigned j = 0; j < p->series[i].n; j++) {
			double x = p->series[i].x[j];
			bool dup = false;

			for (unsigned k = 0; k < n && !dup; k++)
				dup = tics[k] == x;
			if (!dup && n < MAX_TICS)
				tics[n++] = x;
		}
	return n;
}

/* marker draws series i's shape at (x, y): filled, then open, shapes. */
static void
marker(FILE *f, unsigned i, double x, double y)
{
	const char *c = colours[i % 8];
	const char *fill = i / 8 % 2 == 0 ? c : "none";

	if (i % 2 == 0)
		fprintf(f,
		        "<circle cx='%.1f' cy='%.1f' r='4.5' fill='%s' "
		        "stroke='%s' stroke-width='1.5'/>\n",
		        x, y, fill, c);
	else
		fprintf(f,
		        "<rect x='%.1f' y='%.1f' width='8' height='8' "
		        "fill='%s' stroke='%s' stroke-width='1.5'/>\n",
		        x - 4, y - 4, fill, c);
}

/* named_xtics reads gnuplot's list of named tics ("'A' 1, 'B' 2"). */
static unsigned
named_xtics(const char *list, double *tics, char names[][16])
{
	unsigned n = 0;
	const char *q, *end;
	char *after;

	while (n < MAX_TICS && (q = strchr(list, '\'')) != NULL &&
	       (end = strchr(q + 1, '\'')) != NULL) {
		snprintf(names[n], 16, "%.*s", (int)(end - q - 1), q + 1);
		tics[n] = strtod(end + 1, &after);
		if (after == end + 1)
			break;
		n++;
		list = after;
	}
	return n;
}

static void
axis_tics(FILE *f, const scale *sx, const scale *sy, const double *xt,
          char xnames[][16], unsigned nx, const double *yt, unsigned ny,
          double y0, double x0)
{
	char t[32];

	for (unsigned k = 0; k < nx; k++) {
		double x = place(sx, xt[k]);

		if (x < sx->from - 0.5 || x > sx->from + sx->length + 0.5)
			continue;
		fprintf(f,
		        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' "
		        "stroke='#ddd'/>\n",
		        x, sy->from, x, sy->from + sy->length);
		tic_label(t, sizeof(t), xt[k], sx->log);
		fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle'>", x,
		        y0 + 18);
		xml_text(f, xnames != NULL ? xnames[k] : t);
		fputs("</text>\n", f);
	}
	for (unsigned k = 0; k < ny; k++) {
		double y = place(sy, yt[k]);

		fprintf(f,
		        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' "
		        "stroke='#ddd'/>\n",
		        sx->from, y, sx->from + sx->length, y);
		tic_label(t, sizeof(t), yt[k], sy->log);
		fprintf(f,
		        "<text x='%.1f' y='%.1f' text-anchor='end'>%s</text>\n",
		        x0 - 6, y + 4, t);
	}
}

static void
legend(FILE *f, const wbench_plot_panel *p, double left, double top)
{
	for (unsigned i = 0; i < p->nseries; i++) {
		double x = left + (i % 2) * (PANEL_W - LEFT) / 2;
		double y = top + (i / 2) * 18;

		if (p->series[i].n == 0)
			continue;
		marker(f, i, x + 6, y - 4);
		fprintf(f, "<text x='%.1f' y='%.1f'>", x + 16, y);
		xml_text(f, p->series[i].title);
		fputs("</text>\n", f);
	}
}

static void
panel(FILE *f, const wbench_plot_panel *p, unsigned k)
{
	double xt[MAX_TICS], yt[MAX_TICS], lo[2] = {0}, hi[2] = {0};
	char xnames[MAX_TICS][16];
	double left = k * PANEL_W, y0 = PANEL_H - BOTTOM;
	unsigned nx, ny;
	scale sx, sy;

	if (!wbench_plot_range(p, lo, hi))
		return;
	nx = set_range(&sx, p->logx, false, lo[0], hi[0], xt);
	if (p->xtics != NULL) {
		nx = named_xtics(p->xtics, xt, xnames);
		/* Categories: half a step of room on either side. */
		sx.lo = lo[0] - 0.5;
		sx.hi = hi[0] + 0.5;
	} else if (p->logx) {
		nx = point_xtics(p, xt);
	}
	ny = set_range(&sy, p->logy, true, lo[1], hi[1], yt);
	sx.from = left + LEFT;
	sx.length = PANEL_W - LEFT - RIGHT;
	sy.from = y0;
	sy.length = -(y0 - TOP);
	fprintf(f, "<g>\n");
	axis_tics(f, &sx, &sy, xt, p->xtics != NULL ? xnames : NULL, nx, yt, ny,
	          y0, sx.from);
	fprintf(f,
	        "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' "
	        "fill='none' stroke='#000'/>\n",
	        sx.from, TOP, sx.length, y0 - TOP);
	fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle'>",
	        sx.from + sx.length / 2, y0 + 40);
	xml_text(f, p->xlabel);
	fprintf(f,
	        "</text>\n<text transform='translate(%.1f %.1f) "
	        "rotate(-90)' text-anchor='middle'>",
	        left + 16, TOP + (y0 - TOP) / 2);
	xml_text(f, p->ylabel);
	fputs("</text>\n", f);
	for (unsigned i = 0; i < p->nseries; i++) {
		const wbench_plot_series *s = &p->series[i];

		if (!p->points && s->n > 1) {
			fprintf(f,
			        "<polyline fill='none' stroke='%s' "
			        "stroke-width='2' points='",
			        colours[i % 8]);
			for (unsigned j = 0; j < s->n; j++)
				fprintf(f, "%s%.1f,%.1f", j ? " " : "",
				        place(&sx, s->x[j]),
				        place(&sy, s->y[j]));
			fputs("'/>\n", f);
		}
		for (unsigned j = 0; j < s->n; j++)
			marker(f, i, place(&sx, s->x[j]), place(&sy, s->y[j]));
	}
	legend(f, p, sx.from, y0 + 66);
	fputs("</g>\n", f);
}

int
wbench_plot_svg(FILE *f, const char *title, const wbench_plot_panel *panels,
                unsigned n)
{
	bool any = false;

	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; i < panels[k].nseries; i++)
			any |= panels[k].series[i].n > 0;
	if (!any)
		return -1;
	fprintf(f,
	        "<?xml version='1.0' encoding='UTF-8'?>\n"
	        "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' "
	        "height='%.0f' viewBox='0 0 %.0f %.0f' "
	        "font-family='sans-serif' font-size='12'>\n"
	        "<rect width='100%%' height='100%%' fill='#fff'/>\n"
	        "<text x='%.1f' y='24' text-anchor='middle' "
	        "font-size='14'>",
	        PANEL_W * n, PANEL_H, PANEL_W * n, PANEL_H, PANEL_W * n / 2);
	xml_text(f, title);
	fputs("</text>\n", f);
	for (unsigned k = 0; k < n; k++)
		panel(f, &panels[k], k);
	fputs("</svg>\n", f);
	return 0;
}
