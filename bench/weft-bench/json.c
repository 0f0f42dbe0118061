/* SPDX-License-Identifier: MIT */
/*
 * json.c: what every --json report carries: weft's version and commit,
 * the date, the machine (host, CPU, kernel) and the command line; and
 * the pieces the reports write with: strings, and figures that are null
 * when they were not measured.
 */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "wbench.h"
#include "wbench_commit.h"

void
wbench_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void
wbench_json_num(FILE *f, const char *fmt, double v, bool measured)
{
	if (measured)
		fprintf(f, fmt, v);
	else
		fputs("null", f);
}

/* cpu_model reads the first "model name" of /proc/cpuinfo. */
static void
cpu_model(char *out, size_t len)
{
	char line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(out, len, "unknown");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) != 0 || colon == NULL)
			continue;
		colon += 1 + (colon[1] == ' ');
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(out, len, "%s", colon);
		break;
	}
	if (f != NULL)
		fclose(f);
}

/* command_line joins argv, quoting the words a shell would split. */
static void
command_line(const wbench_opts *o, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < o->argc && n < len; i++) {
		const char *a = o->argv[i];
		bool plain =
		    *a && strspn(a, "abcdefghijklmnopqrstuvwxyz"
		                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                    "0123456789-_=+.,:/@%") == strlen(a);
		int w = snprintf(out + n, len - n, plain ? "%s%s" : "%s'%s'",
		                 i ? " " : "", a);

		n += w > 0 ? (size_t)w : 0;
	}
}

void
wbench_json_env(FILE *f, const wbench_opts *o)
{
	const wbench_machine *m = wbench_machine_sampled();
	char date[32], cpu[128], kernel[200], cmd[4096];
	struct utsname u;
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cpu_model(cpu, sizeof(cpu));
	if (uname(&u) != 0)
		memset(&u, 0, sizeof(u));
	snprintf(kernel, sizeof(kernel), "%s %s", u.sysname, u.release);
	command_line(o, cmd, sizeof(cmd));
	fputs("  \"weft_version\": ", f);
	wbench_json_str(f, WBENCH_VERSION);
	fputs(",\n  \"commit\": ", f);
	wbench_json_str(f, WBENCH_COMMIT);
	fputs(",\n  \"date\": ", f);
	wbench_json_str(f, date);
	fputs(",\n  \"host\": ", f);
	wbench_json_str(f, u.nodename);
	fputs(",\n  \"cpu\": ", f);
	wbench_json_str(f, cpu);
	fprintf(f, ",\n  \"cpus\": %ld,\n  \"kernel\": ",
	        sysconf(_SC_NPROCESSORS_ONLN));
	wbench_json_str(f, kernel);
	fputs(",\n  \"command\": ", f);
	wbench_json_str(f, cmd);
	fputs(",\n  \"machine_before\": ", f);
	if (m->sampled)
		fprintf(f,
		        "{\"busy\": %.3f, \"steal\": %.3f, \"loadavg\": %.2f, "
		        "\"busy_warning\": %s}",
		        m->busy, m->steal, m->loadavg,
		        m->busy_warning ? "true" : "false");
	else
		fputs("null", f);
	fputs(",\n", f);
}
