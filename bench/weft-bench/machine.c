/* SPDX-License-Identifier: MIT */
/*
 * machine.c: how busy the machine was before a run began. Figures taken
 * on a loaded machine can be off by a factor of 3 (a run at load 24 gave
 * a third of what a rerun at load 2 gave), so every command samples the
 * CPUs for a moment before it starts: the share others kept busy, the
 * share a hypervisor took (steal), and the load average. Past a
 * threshold it says so on stderr, and every --json carries the sample.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wbench.h"

/* Busy beyond this share of the CPUs, or steal beyond this one, and the
 * figures are suspect. */
#define BUSY_LIMIT 0.2
#define STEAL_LIMIT 0.05
#define SAMPLE_MS 200

static wbench_machine sampled;

/* cpu_ticks reads the first line of /proc/stat: all, idle and steal. */
static bool
cpu_ticks(unsigned long long *all, unsigned long long *idle,
          unsigned long long *steal)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (f == NULL)
		return false;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
	           &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 4)
		return false;
	*all = 0;
	for (int i = 0; i < 8; i++)
		*all += v[i];
	*idle = v[3] + v[4]; /* idle and iowait */
	*steal = v[7];
	return true;
}

void
wbench_machine_check(void)
{
	unsigned long long a0, i0, s0, a1, i1, s1;
	struct timespec ts = {0, SAMPLE_MS * 1000000L};
	wbench_machine *m = &sampled;
	FILE *f;

	memset(m, 0, sizeof(*m));
	m->cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if ((f = fopen("/proc/loadavg", "r")) != NULL) {
		if (fscanf(f, "%lf", &m->loadavg) != 1)
			m->loadavg = 0;
		fclose(f);
	}
	if (!cpu_ticks(&a0, &i0, &s0))
		return;
	nanosleep(&ts, NULL);
	if (!cpu_ticks(&a1, &i1, &s1) || a1 <= a0)
		return;
	m->sampled = true;
	m->busy = 1 - (double)(i1 - i0) / (double)(a1 - a0);
	m->steal = (double)(s1 - s0) / (double)(a1 - a0);
	m->busy_warning = m->busy > BUSY_LIMIT || m->steal > STEAL_LIMIT;
	if (m->busy_warning)
		fprintf(
		    stderr,
		    "weft-bench: WARNING: the machine was busy before this "
		    "run (%.0f%% of %ld CPUs in use by others, steal %.0f%%, "
		    "load average %.2f): its figures may be low; rerun on "
		    "an idle machine\n",
		    m->busy * 100, m->cpus, m->steal * 100, m->loadavg);
}

const wbench_machine *
wbench_machine_sampled(void)
{
	return &sampled;
}

bool
wbench_spread_warn(const char *what, double lo, double hi, double median)
{
	double spread = median > 0 ? (hi - lo) / median : 0;

	if (spread <= WBENCH_SPREAD_LIMIT)
		return false;
	fprintf(stderr,
	        "weft-bench: WARNING: the runs of %s disagree: %.0f%% between "
	        "the lowest and the highest; the machine may be busy, or the "
	        "window too short\n",
	        what, spread * 100);
	return true;
}
