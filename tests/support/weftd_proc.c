/* SPDX-License-Identifier: MIT */
/* weftd_proc.c: weftd and weft-kv processes for tests (see
 * weftd_proc.h). */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/core.h>

#include "ports.h"
#include "weftd_proc.h"

uint64_t
wt_ms_since(uint64_t start_ns)
{
	return (weft_now_ns() - start_ns) / 1000000;
}

void
wt_pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

void
wt_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

ssize_t
wt_read_line(int fd, char *buf, size_t cap, uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	size_t n = 0;

	while (n + 1 < cap) {
		uint64_t spent = wt_ms_since(start);

		if (spent >= timeout_ms ||
		    poll(&pfd, 1, (int)(timeout_ms - spent)) <= 0)
			return -1;
		if (read(fd, buf + n, 1) <= 0)
			return -1;
		if (buf[n] == '\n') {
			buf[n] = '\0';
			return (ssize_t)n;
		}
		n++;
	}
	return -1;
}

/* The test thread's: the file limit of the next processes. */
static unsigned spawn_nofile;

void
wt_spawn_nofile(unsigned n)
{
	spawn_nofile = n;
}

pid_t
wt_spawn(char *const argv[], const char *err_path, int *out_fd)
{
	return wt_spawn_in(argv, err_path, out_fd, -1);
}

pid_t
wt_spawn_in(char *const argv[], const char *err_path, int *out_fd, int ns_fd)
{
	struct rlimit rl = {spawn_nofile, spawn_nofile};
	int fds[2], err;
	pid_t pid;

	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		err = open(err_path ? err_path : "/dev/null",
		           O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (err < 0 || dup2(fds[1], 1) < 0 || dup2(err, 2) < 0)
			_exit(126);
		/* Joined here rather than through `ip netns exec`, which also
		 * remounts /sys (refused in some containers). */
		if (ns_fd >= 0 && setns(ns_fd, CLONE_NEWNET) != 0)
			_exit(125);
		/* Nothing else of the test's: its sockets (a flood a failed
		 * test left open) would count against the node's file
		 * limit. */
		if (close_range(3, ~0u, 0) != 0)
			_exit(125);
		/* No node outlives a test that dies (a ctest timeout). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (spawn_nofile != 0 && setrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(125);
		/* The tests read info lines (a TLS reload) from the log. */
		setenv("WEFT_LOG", "info", 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	*out_fd = fds[0];
	return pid;
}

int
wt_wait_exit(pid_t pid, uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), status = -1;
	struct pollfd p = {.fd = pfd, .events = POLLIN};
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (wt_ms_since(start) >= timeout_ms)
			break;
		/* A pidfd turns readable at the exit; without one, poll. */
		if (pfd >= 0)
			poll(&p, 1, (int)(timeout_ms - wt_ms_since(start)));
		else
			wt_pause_ms(5);
	}
	if (pfd >= 0)
		close(pfd);
	return r == pid ? status : -1;
}

bool
wt_file_contains(const char *path, const char *needle, uint64_t timeout_ms)
{
	return wt_file_contains_from(path, 0, needle, timeout_ms);
}

long
wt_file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

bool
wt_file_contains_from(const char *path, long offset, const char *needle,
                      uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();
	size_t cap = 1 << 20, n;
	char *buf = malloc(cap);
	bool found = false;
	FILE *fp;

	assert_non_null(buf);
	while (!found && wt_ms_since(start) < timeout_ms) {
		if ((fp = fopen(path, "r")) != NULL) {
			n = fseek(fp, offset, SEEK_SET) == 0
			        ? fread(buf, 1, cap - 1, fp)
			        : 0;
			buf[n] = '\0';
			fclose(fp);
			found = strstr(buf, needle) != NULL;
		}
		if (!found)
			wt_pause_ms(10);
	}
	free(buf);
	return found;
}

void
wt_node_start(struct wt_proc *p, const char *config, const char *dir,
              const char *id, uint16_t port, char *const extra[])
{
	wt_node_start_in(p, config, dir, id, port, extra, -1);
}

void
wt_node_start_in(struct wt_proc *p, const char *config, const char *dir,
                 const char *id, uint16_t port, char *const extra[], int ns_fd)
{
	char *argv[16] = {WEFTD_PATH, "--config", (char *)config, "--id",
	                  (char *)id};
	char path[sizeof(p->err_path)], line[256];
	unsigned got_port, mport;
	size_t n = 5;

	while (extra != NULL && *extra != NULL && n < 15)
		argv[n++] = *extra++;
	argv[n] = NULL;
	snprintf(path, sizeof(path), "%s/%s.err", dir, id);
	memcpy(p->err_path, path, sizeof(path));
	p->pid = wt_spawn_in(argv, p->err_path, &p->out_fd, ns_fd);
	assert_true(wt_read_line(p->out_fd, line, sizeof(line), WT_READY_MS) >
	            0);
	assert_int_equal(sscanf(line,
	                        "weftd ready node=%*s port=%u "
	                        "metrics=127.0.0.1:%u",
	                        &got_port, &mport),
	                 2);
	assert_int_equal(got_port, port);
	p->port = (uint16_t)got_port;
	p->metrics_port = (uint16_t)mport;
}

int
wt_node_signal_exit(struct wt_proc *p, int sig)
{
	int status;

	assert_int_equal(kill(p->pid, sig), 0);
	status = wt_wait_exit(p->pid, WT_EXIT_MS);
	if (status == -1) {
		kill(p->pid, SIGKILL);
		wt_wait_exit(p->pid, WT_EXIT_MS);
	}
	close(p->out_fd);
	p->pid = 0;
	return status;
}

/* Copies the last bytes of path to stderr. */
static void
dump_tail(const char *path)
{
	char buf[4096];
	size_t n;
	FILE *fp;

	if ((fp = fopen(path, "r")) == NULL)
		return;
	if (fseek(fp, -(long)sizeof(buf), SEEK_END) != 0)
		rewind(fp);
	n = fread(buf, 1, sizeof(buf), fp);
	fclose(fp);
	fprintf(stderr, "---- end of %s ----\n%.*s\n----\n", path, (int)n, buf);
}

int
wt_run_line(char *const argv[], char *out, size_t cap, uint64_t timeout_ms)
{
	int fd, status;
	pid_t pid;

	pid = wt_spawn(argv, NULL, &fd);
	if (wt_read_line(fd, out, cap, timeout_ms) < 0)
		out[0] = '\0';
	status = wt_wait_exit(pid, timeout_ms);
	close(fd);
	assert_true(status != -1 && WIFEXITED(status));
	return WEXITSTATUS(status);
}

int
wt_run_output(char *const argv[], const char *err_path, char *out, size_t cap,
              uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();
	struct pollfd pfd;
	size_t len = 0;
	ssize_t n = 1;
	int status;
	pid_t pid;

	pid = wt_spawn(argv, err_path, &pfd.fd);
	pfd.events = POLLIN;
	/* To the end of its output, or of the buffer, within the deadline. */
	while (n > 0 && len + 1 < cap && wt_ms_since(start) < timeout_ms) {
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		if ((n = read(pfd.fd, out + len, cap - 1 - len)) > 0)
			len += (size_t)n;
	}
	out[len] = '\0';
	status = wt_wait_exit(pid, timeout_ms);
	close(pfd.fd);
	assert_true(status != -1 && WIFEXITED(status));
	return WEXITSTATUS(status);
}

int
wt_nodes_stop(struct wt_proc *p, size_t n)
{
	int bad = 0, status;
	size_t i;

	for (i = 0; i < n; i++) {
		if (p[i].pid <= 0)
			continue;
		kill(p[i].pid, SIGTERM);
		status = wt_wait_exit(p[i].pid, WT_EXIT_MS);
		if (status == -1) {
			kill(p[i].pid, SIGKILL);
			wt_wait_exit(p[i].pid, WT_EXIT_MS);
		}
		close(p[i].out_fd);
		p[i].pid = 0;
		if (status != 0) {
			fprintf(stderr, "weftd %s: wait status %d\n",
			        p[i].err_path, status);
			dump_tail(p[i].err_path);
			bad++;
		}
	}
	return bad;
}

void
wt_scratch_new(const char *prefix, char *dir, size_t dir_cap, char *config,
               size_t config_cap, uint16_t *ports, size_t n)
{
	size_t i;

	snprintf(dir, dir_cap, "/tmp/%s-XXXXXX", prefix);
	assert_non_null(mkdtemp(dir));
	snprintf(config, config_cap, "%s/cluster.ini", dir);
	for (i = 0; i < n; i++)
		ports[i] = weft_test_free_port();
}

int
wt_scratch_remove(struct wt_proc *p, size_t n, const char *config,
                  const char *dir)
{
	int bad = wt_nodes_stop(p, n);
	size_t i;

	for (i = 0; i < n; i++)
		unlink(p[i].err_path);
	unlink(config);
	rmdir(dir);
	return bad;
}

/* ---- Configuration and the test's client ------------------------------- */

int
wt_config_begin(char *text, size_t cap, const char *name,
                const char *const ids[], const uint16_t ports[], size_t n)
{
	int len;
	size_t i;

	len = snprintf(text, cap, "[cluster]\nname = %s\n", name);
	for (i = 0; i < n; i++)
		len += snprintf(text + len, cap - (size_t)len,
		                "[node %s]\nhost = 127.0.0.1\nport = %u\n",
		                ids[i], ports[i]);
	len += snprintf(text + len, cap - (size_t)len,
	                "[limits]\nloops = 1\nheartbeat_interval = 200ms\n"
	                "reconnect_min = 10ms\nreconnect_max = 200ms\n");
	assert_true(len > 0 && (size_t)len < cap);
	return len;
}

void
wt_client_start(const char *config, const char *id, const weft_msvc_opts *opts,
                weft_loop_group **group, weft_msvc **out)
{
	weft_msvc_config *cfg;
	char err[256];

	assert_int_equal(weft_msvc_config_load(config, &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(weft_loop_group_new(1, group), 0);
	assert_int_equal(weft_msvc_new(*group, cfg, id, opts, out), 0);
	assert_int_equal(weft_msvc_start(*out), 0);
	weft_msvc_config_free(cfg);
}

void
wt_client_stop(weft_loop_group *group, weft_msvc *svc)
{
	weft_msvc_stop(svc, 0);
	weft_msvc_free(svc);
	weft_loop_group_free(group);
}

weft_msvc_peer *
wt_peer(weft_msvc *svc, const char *id)
{
	weft_msvc_peer *p = weft_msvc_peer_find(svc, id);

	assert_non_null(p);
	return p;
}

void
wt_call_done(weft_msvc *svc, int status, const void *data, size_t len,
             void *arg)
{
	struct wt_call *c = arg;

	(void)svc;
	(void)data;
	pthread_mutex_lock(&c->lock);
	c->calls++;
	c->status = status;
	c->len = len;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int
wt_call_wait(struct wt_call *c, uint64_t timeout_ms)
{
	struct timespec ts;
	int status;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&c->lock);
	while (c->calls == 0 &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
		;
	assert_int_equal(c->calls, 1);
	status = c->status;
	pthread_mutex_unlock(&c->lock);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	return status;
}

size_t
wt_http_send(uint16_t port, const char *req, size_t len, bool half_close,
             char *buf, size_t cap, uint64_t timeout_ms)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint64_t start = weft_now_ns();
	size_t n = 0;
	ssize_t r;

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* A server may answer and close before it has read it all. */
	while (n < len && (r = send(fd, req + n, len - n, MSG_NOSIGNAL)) > 0)
		n += (size_t)r;
	if (half_close)
		shutdown(fd, SHUT_WR);
	n = 0;
	while (n + 1 < cap && wt_ms_since(start) < timeout_ms) {
		if (poll(&pfd, 1, (int)(timeout_ms - wt_ms_since(start))) <=
		        0 ||
		    (r = read(fd, buf + n, cap - 1 - n)) <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	close(fd);
	return n;
}

size_t
wt_http_ask(uint16_t port, const char *method, const char *path, char *buf,
            size_t cap)
{
	char req[256];
	int len =
	    snprintf(req, sizeof(req),
	             "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", method, path);

	return wt_http_send(port, req, (size_t)len, false, buf, cap,
	                    WT_READY_MS);
}
