/* SPDX-License-Identifier: MIT */
/*
 * procs.c: the processes a node workload starts and talks to: each an
 * exec of weft-bench with its standard input and output on pipes, saying
 * one line at a time what it has reached; and the argument lists they
 * are started with.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wbench.h"

extern char **environ;

#define LINE_MAX_BYTES (1u << 16)

void
wbench_argv_init(wbench_argv *a, const char *exe, const char *subcommand)
{
	memset(a, 0, sizeof(*a));
	wbench_argv_add(a, exe);
	wbench_argv_add(a, subcommand);
}

void
wbench_argv_add(wbench_argv *a, const char *word)
{
	size_t len = strlen(word) + 1;

	/* The lists are ours and short: running out is a bug. */
	if (a->n + 1 >= WBENCH_ARGV_MAX || a->used + len > sizeof(a->text)) {
		fprintf(stderr, "weft-bench: argument list too long\n");
		abort();
	}
	a->v[a->n++] = memcpy(a->text + a->used, word, len);
	a->used += len;
	a->v[a->n] = NULL;
}

void
wbench_argv_addf(wbench_argv *a, const char *name, const char *fmt, ...)
{
	char word[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(word, sizeof(word), fmt, ap);
	va_end(ap);
	wbench_argv_add(a, name);
	wbench_argv_add(a, word);
}

int
wbench_procs_init(wbench_procs *g, unsigned n)
{
	memset(g, 0, sizeof(*g));
	if ((g->p = calloc(n ? n : 1, sizeof(*g->p))) == NULL)
		return -1;
	g->n = n;
	for (unsigned i = 0; i < n; i++) {
		g->p[i].pid = -1;
		g->p[i].in_fd = g->p[i].out_fd = -1;
		if ((g->p[i].buf = malloc(LINE_MAX_BYTES)) == NULL)
			return -1;
	}
	return 0;
}

int
wbench_procs_spawn(wbench_procs *g, unsigned i, const wbench_argv *a)
{
	wbench_proc *p = &g->p[i];
	posix_spawn_file_actions_t fa;
	int in[2], out[2], rv;

	if (pipe2(in, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	rv = posix_spawn(&p->pid, a->v[0], &fa, NULL, a->v, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	p->in_fd = in[1];
	p->out_fd = out[0];
	if (rv != 0) {
		p->pid = -1;
		fprintf(stderr, "weft-bench: cannot start %s: %s\n", a->v[0],
		        strerror(rv));
		return -1;
	}
	return 0;
}

/* read_proc takes what process i printed and hands on its whole lines. */
static void
read_proc(wbench_procs *g, unsigned i)
{
	wbench_proc *p = &g->p[i];
	ssize_t n =
	    read(p->out_fd, p->buf + p->have, LINE_MAX_BYTES - 1 - p->have);
	char *nl, *line;

	if (n <= 0) {
		if (n == 0 || errno != EINTR)
			p->dead = true;
		return;
	}
	p->have += (size_t)n;
	p->buf[p->have] = '\0';
	line = p->buf;
	while ((nl = strchr(line, '\n')) != NULL) {
		*nl = '\0';
		g->on_line(g, i, line);
		line = nl + 1;
	}
	p->have -= (size_t)(line - p->buf);
	memmove(p->buf, line, p->have);
	if (p->have == LINE_MAX_BYTES - 1)
		p->dead = true; /* a line longer than anything we print */
}

int
wbench_procs_pump(wbench_procs *g, int phase, unsigned from, unsigned to,
                  uint64_t timeout_ms)
{
	uint64_t deadline = wbench_now_ns() + timeout_ms * 1000000u;
	struct pollfd *pfd = calloc(g->n ? g->n : 1, sizeof(*pfd));
	int rv = -1;

	while (pfd != NULL && wbench_now_ns() < deadline) {
		unsigned waiting = 0;

		for (unsigned i = 0; i < g->n; i++) {
			bool wanted = i >= from && i < to;
			bool there = !wanted || g->reached(g, i, phase);

			if (g->p[i].dead && !there)
				goto out;
			waiting += !there;
			pfd[i].fd = g->p[i].dead ? -1 : g->p[i].out_fd;
			pfd[i].events = POLLIN;
		}
		if (waiting == 0) {
			rv = 0;
			break;
		}
		if (poll(pfd, g->n, 200) > 0)
			for (unsigned i = 0; i < g->n; i++)
				if (pfd[i].revents)
					read_proc(g, i);
		if (g->progress != NULL)
			g->progress(g);
	}
out:
	free(pfd);
	return rv;
}

int
wbench_procs_tell(wbench_procs *g, unsigned from, unsigned to, const char *line)
{
	size_t len = strlen(line);

	for (unsigned i = from; i < to && i < g->n; i++)
		if (wbench_write_all(g->p[i].in_fd, line, len) != 0)
			return -1;
	return 0;
}

void
wbench_procs_reap(wbench_procs *g, bool failed)
{
	for (unsigned i = 0; g->p != NULL && i < g->n; i++) {
		wbench_proc *p = &g->p[i];

		if (p->in_fd >= 0)
			close(p->in_fd);
		if (p->out_fd >= 0)
			close(p->out_fd);
		if (p->pid > 0) {
			if (failed)
				kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
		}
		free(p->buf);
	}
	free(g->p);
	g->p = NULL;
}
