/* SPDX-License-Identifier: MIT */
/*
 * plot.c: --plot FILE.png with gnuplot (FILE.svg: svg.c, with nothing to
 * install): panels side by side, each a few
 * named series of points. The ranges are set from the points with room
 * around them, so that one point draws as well as many (gnuplot warns of
 * an empty range otherwise); a series without points is left out (gnuplot
 * warns of it too); and the legend sits below the panel, where it hides
 * no point.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wbench.h"

void
wbench_plot_add(wbench_plot_panel *p, const char *title, double x, double y)
{
	wbench_plot_series *s = NULL;

	if (p->logy && !(y > 0))
		return; /* nothing to draw on a log scale */
	for (unsigned i = 0; i < p->nseries && s == NULL; i++)
		if (strcmp(p->series[i].title, title) == 0)
			s = &p->series[i];
	if (s == NULL && p->nseries < WBENCH_PLOT_SERIES) {
		s = &p->series[p->nseries++];
		snprintf(s->title, sizeof(s->title), "%s", title);
	}
	if (s == NULL || s->n == WBENCH_PLOT_POINTS)
		return;
	s->x[s->n] = x;
	s->y[s->n++] = y;
}

bool
wbench_plot_range(const wbench_plot_panel *p, double lo[2], double hi[2])
{
	bool any = false;

	for (unsigned i = 0; i < p->nseries; i++)
		for (unsigned j = 0; j < p->series[i].n; j++) {
			double v[2] = {p->series[i].x[j], p->series[i].y[j]};

			for (int k = 0; k < 2; k++) {
				lo[k] = any && lo[k] < v[k] ? lo[k] : v[k];
				hi[k] = any && hi[k] > v[k] ? hi[k] : v[k];
			}
			any = true;
		}
	return any;
}

/* axis sets one axis's scale and a range with room around the points. */
static void
axis(FILE *gp, char name, bool log, double lo, double hi, bool from_zero)
{
	double pad = (hi - lo) * 0.08;

	if (log) {
		/* Base 2: a tic every doubling, even in a narrow range. */
		fprintf(gp, "set logscale %c 2\nset %crange [%g:%g]\n", name,
		        name, lo / 1.5, hi * 1.5);
		return;
	}
	if (pad <= 0)
		pad = hi != 0 ? fabs(hi) * 0.1 : 1;
	fprintf(gp, "unset logscale %c\nset %crange [%g:%g]\n", name, name,
	        from_zero && lo >= 0 ? 0 : lo - pad, hi + pad);
}

static void
panel_data(FILE *gp, const wbench_plot_panel *p, unsigned k)
{
	for (unsigned i = 0; i < p->nseries; i++) {
		const wbench_plot_series *s = &p->series[i];

		fprintf(gp, "$p%us%u << EOD\n", k, i);
		for (unsigned j = 0; j < s->n; j++)
			fprintf(gp, "%.9g %.9g\n", s->x[j], s->y[j]);
		fprintf(gp, "EOD\n");
	}
}

/* log_xtics puts a tic at every x of the points (the node counts). */
static void
log_xtics(FILE *gp, const wbench_plot_panel *p)
{
	double seen[WBENCH_PLOT_POINTS];
	unsigned n = 0;

	fputs("set xtics (", gp);
	for (unsigned i = 0; i < p->nseries; i++)
		for (unsigned j = 0; j < p->series[i].n; j++) {
			double x = p->series[i].x[j];
			bool dup = false;

			for (unsigned k = 0; k < n && !dup; k++)
				dup = seen[k] == x;
			if (dup || n == WBENCH_PLOT_POINTS)
				continue;
			fprintf(gp, "%s%g", n ? ", " : "", x);
			seen[n++] = x;
		}
	fputs(")\n", gp);
}

static void
panel_plot(FILE *gp, const wbench_plot_panel *p, unsigned k)
{
	/* Filled shapes first, then open ones: with 8 colours, no two
	 * series of a panel look alike. */
	static const unsigned shapes[WBENCH_PLOT_SERIES] = {
	    5, 7, 9, 11, 13, 15, 4, 6, 8, 10, 12, 14, 1, 2, 3, 16};
	double lo[2], hi[2];
	const char *sep = "plot ";

	if (!wbench_plot_range(p, lo, hi)) {
		fprintf(gp, "set multiplot next\n");
		return;
	}
	axis(gp, 'x', p->logx, lo[0], hi[0], false);
	axis(gp, 'y', p->logy, lo[1], hi[1], true);
	fprintf(gp, "set xlabel '%s'\nset ylabel '%s'\n", p->xlabel, p->ylabel);
	if (p->xtics != NULL)
		fprintf(gp, "set xtics (%s)\n", p->xtics);
	else if (p->logx)
		log_xtics(gp, p);
	else
		fprintf(gp, "set xtics autofreq\n");
	fprintf(gp, "set format y '%s'\n", p->logy ? "%g" : "%.1s%c");
	for (unsigned i = 0; i < p->nseries; i++) {
		fprintf(gp,
		        "%s$p%us%u using 1:2 with %s lw 2 lc %u pt %u ps 1.3 "
		        "title '%s'",
		        sep, k, i, p->points ? "points" : "linespoints",
		        i % 8 + 1, shapes[i], p->series[i].title);
		sep = ", ";
	}
	fputc('\n', gp);
}

int
wbench_plot_script(FILE *gp, const char *png, const char *title,
                   const wbench_plot_panel *panels, unsigned n)
{
	bool any = false;

	for (unsigned k = 0; k < n; k++) {
		double lo[2], hi[2];

		any |= wbench_plot_range(&panels[k], lo, hi);
		panel_data(gp, &panels[k], k);
	}
	if (!any)
		return -1;
	fprintf(gp,
	        "set terminal pngcairo size %u,560 font ',10'\n"
	        "set output '%s'\n"
	        "set grid\nset key below horizontal height 1\n"
	        "set multiplot layout 1,%u title '%s'\n",
	        550 * n, png, n, title);
	for (unsigned k = 0; k < n; k++)
		panel_plot(gp, &panels[k], k);
	fprintf(gp, "unset multiplot\n");
	return 0;
}

/* on_path is true when an executable called name is on $PATH. */
static bool
on_path(const char *name)
{
	const char *path = getenv("PATH"), *end;
	char file[4096];

	for (; path != NULL && *path != '\0'; path = *end ? end + 1 : end) {
		end = strchrnul(path, ':');
		if (snprintf(file, sizeof(file), "%.*s/%s", (int)(end - path),
		             path, name) < (int)sizeof(file) &&
		    access(file, X_OK) == 0)
			return true;
	}
	return false;
}

int
wbench_plot_draw(const char *png, const char *title,
                 const wbench_plot_panel *panels, unsigned n)
{
	size_t len = strlen(png);
	FILE *gp;
	int rv;

	/* An SVG needs no tool: weft-bench draws it itself. */
	if (len > 4 && strcmp(png + len - 4, ".svg") == 0) {
		if ((gp = fopen(png, "w")) == NULL) {
			fprintf(stderr,
			        "weft-bench: --plot %s: cannot write it\n",
			        png);
			return -1;
		}
		rv = wbench_plot_svg(gp, title, panels, n);
		if (rv != 0)
			fprintf(stderr, "weft-bench: --plot: nothing was "
			                "measured\n");
		if (fclose(gp) != 0 && rv == 0) {
			fprintf(stderr, "weft-bench: --plot %s: write failed\n",
			        png);
			rv = -1;
		}
		if (rv != 0)
			unlink(png);
		return rv;
	}
	/* gnuplot is optional: without it the figures are still printed
	 * and written, and no plot is made. */
	if (!on_path("gnuplot")) {
		fprintf(stderr,
		        "weft-bench: --plot %s: gnuplot is not installed "
		        "(Debian package gnuplot-nox, or "
		        "scripts/install-deps.sh --all): no plot made; "
		        "FILE.svg needs nothing\n",
		        png);
		return 0;
	}
	if ((gp = popen("gnuplot", "w")) == NULL) {
		fprintf(stderr, "weft-bench: cannot run gnuplot\n");
		return -1;
	}
	rv = wbench_plot_script(gp, png, title, panels, n);
	if (rv != 0)
		fprintf(stderr, "weft-bench: --plot: nothing was measured\n");
	if (pclose(gp) != 0 && rv == 0) {
		fprintf(stderr, "weft-bench: gnuplot failed\n");
		rv = -1;
	}
	return rv;
}

/* ---- The cluster and mix plots ------------------------------------------ */

static const char *
io_title(enum wbench_io io)
{
	return io == WBENCH_IO_THREADS ? "thread-per-peer"
	                               : "weft (event loops)";
}

/* cluster_panels: op rate and p99 against P. */
static void
cluster_panels(const wbench_cresult *rows, unsigned n, wbench_plot_panel *p)
{
	p[0].xlabel = p[1].xlabel = "nodes (P)";
	p[0].logx = p[1].logx = true;
	p[0].ylabel = "ops/s";
	p[1].ylabel = "p99 latency (ms)";
	p[1].logy = true;
	for (unsigned i = 0; i < n; i++) {
		wbench_plot_add(&p[0], io_title(rows[i].io), rows[i].peers,
		                rows[i].ops_per_s);
		wbench_plot_add(&p[1], io_title(rows[i].io), rows[i].peers,
		                rows[i].p99_us / 1e3);
	}
}

/* mix_panels: op rate, and p99 of gets and puts, against the mix. */
static void
mix_panels(const wbench_cresult *rows, unsigned n, wbench_plot_panel *p)
{
	char t[64];

	p[0].xlabel = p[1].xlabel = "gets (%)";
	p[0].ylabel = "ops/s";
	p[1].ylabel = "p99 latency (ms)";
	p[1].logy = true;
	for (unsigned i = 0; i < n; i++) {
		const wbench_cresult *r = &rows[i];
		const char *io = wbench_io_name(r->io);

		snprintf(t, sizeof(t), "%u nodes, %s", r->peers, io);
		wbench_plot_add(&p[0], t, r->read_pct, r->ops_per_s);
		snprintf(t, sizeof(t), "%u nodes, %s, gets", r->peers, io);
		if (r->gets > 0)
			wbench_plot_add(&p[1], t, r->read_pct,
			                r->get_p99_us / 1e3);
		snprintf(t, sizeof(t), "%u nodes, %s, puts", r->peers, io);
		if (r->puts > 0)
			wbench_plot_add(&p[1], t, r->read_pct,
			                r->put_p99_us / 1e3);
	}
}

int
wbench_cplot(const wbench_opts *o, const wbench_cresult *rows, unsigned n)
{
	wbench_plot_panel *p = calloc(2, sizeof(*p));
	char title[160];
	int rv;

	if (p == NULL)
		return -1;
	if (o->workload == WBENCH_MIX) {
		snprintf(title, sizeof(title),
		         "weft-bench mix: %u clients x %u in flight, %zu B "
		         "values%s",
		         o->client_list[0], o->outstanding, o->size,
		         o->tls_dir ? ", TLS" : "");
		mix_panels(rows, n, p);
	} else {
		snprintf(title, sizeof(title),
		         "weft-bench cluster: K=%u in flight per node, %zu B%s",
		         o->outstanding, o->size, o->tls_dir ? ", TLS" : "");
		cluster_panels(rows, n, p);
	}
	rv = wbench_plot_draw(o->plot_path, title, p, 2);
	free(p);
	return rv;
}
