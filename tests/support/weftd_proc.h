/* SPDX-License-Identifier: MIT */
/* weftd_proc.h: weftd and weft-kv processes for tests, their
 * configuration, and the test's own client service. Helpers assert with
 * cmocka, so call them from the test's thread (except wt_call_done).
 * Programs link weft_test_weftd, which defines WEFTD_PATH and
 * WEFT_KV_PATH for them too. */
#ifndef WEFT_TEST_WEFTD_PROC_H
#define WEFT_TEST_WEFTD_PROC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <weft/messaging.h>

#ifndef WEFTD_PATH
#error "WEFTD_PATH must name the weftd binary"
#endif
#ifndef WEFT_KV_PATH
#error "WEFT_KV_PATH must name the weft-kv binary"
#endif

#define WT_READY_MS 10000
#define WT_EXIT_MS 8000

/* One weftd process. */
struct wt_proc {
	pid_t pid;
	int out_fd; /* the read end of its stdout */
	uint16_t port;
	uint16_t metrics_port;
	char err_path[256]; /* its stderr */
};

uint64_t wt_ms_since(uint64_t start_ns);
void wt_pause_ms(long ms);
void wt_write_file(const char *path, const char *text);
/* Reads one line (without its newline) within the deadline; returns its
 * length, or -1. */
ssize_t wt_read_line(int fd, char *buf, size_t cap, uint64_t timeout_ms);
/* Starts argv with stdout on a pipe (*out_fd, its read end) and stderr
 * appended to err_path (NULL: /dev/null). */
pid_t wt_spawn(char *const argv[], const char *err_path, int *out_fd);
/* wt_spawn_nofile sets the file limit (RLIMIT_NOFILE) of the processes
 * wt_spawn starts from now on; 0: inherited. */
void wt_spawn_nofile(unsigned n);
/* wt_spawn_in is wt_spawn in the network namespace ns_fd (-1: this
 * process's). */
pid_t wt_spawn_in(char *const argv[], const char *err_path, int *out_fd,
                  int ns_fd);
/* Waits for pid to exit; returns its wait status, or -1 at the
 * deadline. */
int wt_wait_exit(pid_t pid, uint64_t timeout_ms);
/* Runs argv (stderr to /dev/null), reads its first output line into out
 * ("" if none comes within timeout_ms), waits as long for its exit and
 * returns its exit code; asserts that it exited. */
int wt_run_line(char *const argv[], char *out, size_t cap, uint64_t timeout_ms);
/* wt_run_output is wt_run_line reading all of the output (up to cap - 1
 * bytes, NUL-terminated) and appending stderr to err_path (NULL:
 * /dev/null). */
int wt_run_output(char *const argv[], const char *err_path, char *out,
                  size_t cap, uint64_t timeout_ms);
/* Waits until the file holds needle; returns whether it did. */
bool wt_file_contains(const char *path, const char *needle,
                      uint64_t timeout_ms);
/* wt_file_contains_from looks only past the first offset bytes;
 * wt_file_size is how many there are now (0 if none). */
bool wt_file_contains_from(const char *path, long offset, const char *needle,
                           uint64_t timeout_ms);
long wt_file_size(const char *path);

/*
 * wt_http_send connects to 127.0.0.1:port, writes the len bytes of req
 * (then, with half_close, shuts down its side) and reads the answer up to
 * the server's close, at most timeout_ms, into buf (NUL-terminated).
 * Returns the bytes read.
 */
size_t wt_http_send(uint16_t port, const char *req, size_t len, bool half_close,
                    char *buf, size_t cap, uint64_t timeout_ms);
/* wt_http_ask asks a node's metrics endpoint for path with method
 * (HTTP/1.0, so the answer ends at the close); see wt_http_send. */
size_t wt_http_ask(uint16_t port, const char *method, const char *path,
                   char *buf, size_t cap);

/*
 * wt_node_start runs `weftd --config config --id id` plus extra arguments
 * (NULL-terminated, may be NULL), its stderr in dir/ID.err, and waits for
 * the ready line, which must name port.
 */
void wt_node_start(struct wt_proc *p, const char *config, const char *dir,
                   const char *id, uint16_t port, char *const extra[]);
/* wt_node_start_in is wt_node_start in the network namespace ns_fd. */
void wt_node_start_in(struct wt_proc *p, const char *config, const char *dir,
                      const char *id, uint16_t port, char *const extra[],
                      int ns_fd);
/* wt_node_signal_exit sends sig and waits for the exit; returns the wait
 * status (-1 if it had to be killed). */
int wt_node_signal_exit(struct wt_proc *p, int sig);

/*
 * wt_nodes_stop stops every node still running with SIGTERM and returns
 * how many did not exit with 0; for those, the end of their stderr goes
 * to the test's stderr. Does not assert, so that a teardown stops them
 * all.
 */
int wt_nodes_stop(struct wt_proc *p, size_t n);

/*
 * wt_scratch_new makes a test's scratch: a fresh directory /tmp/PREFIX-
 * XXXXXX in dir, the path of its cluster.ini in config, and a free port
 * for each of the n nodes. wt_scratch_remove stops the nodes p (as
 * wt_nodes_stop, whose count it returns) and removes their stderr files,
 * config and dir (which must hold nothing else by then).
 */
void wt_scratch_new(const char *prefix, char *dir, size_t dir_cap, char *config,
                    size_t config_cap, uint16_t *ports, size_t n);
int wt_scratch_remove(struct wt_proc *p, size_t n, const char *config,
                      const char *dir);

/*
 * wt_config_begin writes into text the start of a cluster configuration
 * the weftd tests share: [cluster] named name, a [node] for each of the n
 * ids on 127.0.0.1 and its port, and the first keys of [limits] (one loop,
 * 200 ms heartbeats, reconnects from 10 to 200 ms). Returns the length
 * written; the caller appends the rest of [limits] and other sections.
 */
int wt_config_begin(char *text, size_t cap, const char *name,
                    const char *const ids[], const uint16_t ports[], size_t n);

/*
 * wt_client_start loads config and starts a non-member service named id
 * (opts may be NULL, as for weft_msvc_new) on a new group of one loop;
 * the caller owns both and ends them with wt_client_stop.
 */
void wt_client_start(const char *config, const char *id,
                     const weft_msvc_opts *opts, weft_loop_group **group,
                     weft_msvc **out);
/* wt_client_stop stops the service at once and frees it and its group. */
void wt_client_stop(weft_loop_group *group, weft_msvc *svc);
/* wt_peer finds node id in svc's configuration; asserts that it is there. */
weft_msvc_peer *wt_peer(weft_msvc *svc, const char *id);

/* One request, ended on a loop thread and waited for by the test's. */
struct wt_call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls;
	int status;
	size_t len; /* of the reply */
};

#define WT_CALL_INIT                                                           \
	{                                                                      \
		.lock = PTHREAD_MUTEX_INITIALIZER,                             \
		.cond = PTHREAD_COND_INITIALIZER                               \
	}

/* wt_call_done is a weft_msvc_reply_cb; arg is a struct wt_call. */
void wt_call_done(weft_msvc *svc, int status, const void *data, size_t len,
                  void *arg);
/* wt_call_wait waits up to timeout_ms for the call to end, asserts that it
 * ended once, destroys its lock and returns its status. */
int wt_call_wait(struct wt_call *c, uint64_t timeout_ms);

#endif
