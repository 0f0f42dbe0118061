/* procs.h: weftd and weft-kv processes for the weftd tests. Helpers assert
 * with cmocka, so call them from the test's thread. */
#ifndef WEFTD_TEST_PROCS_H
#define WEFTD_TEST_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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
/* A port that was free a moment ago on 127.0.0.1. */
uint16_t wt_free_port(void);
void wt_write_file(const char *path, const char *text);
/* Reads one line (without its newline) within the deadline; returns its
 * length, or -1. */
ssize_t wt_read_line(int fd, char *buf, size_t cap, uint64_t timeout_ms);
/* Starts argv with stdout on a pipe (*out_fd, its read end) and stderr
 * appended to err_path (NULL: /dev/null). */
pid_t wt_spawn(char *const argv[], const char *err_path, int *out_fd);
/* Waits for pid to exit; returns its wait status, or -1 at the
 * deadline. */
int wt_wait_exit(pid_t pid, uint64_t timeout_ms);
/* Waits until the file holds needle; returns whether it did. */
bool wt_file_contains(const char *path, const char *needle,
                      uint64_t timeout_ms);

/*
 * wt_node_start runs `weftd --config config --id id` plus extra arguments
 * (NULL-terminated, may be NULL), its stderr in dir/ID.err, and waits for
 * the ready line, which must name port.
 */
void wt_node_start(struct wt_proc *p, const char *config, const char *dir,
                   const char *id, uint16_t port, char *const extra[]);
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

#endif
