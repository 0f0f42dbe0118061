/* SPDX-License-Identifier: MIT */
/*
 * netns.c: cluster --netns, the --hosts path tried on one machine. Each
 * of P weftd nodes runs in a network namespace of its own, with one end
 * of a veth pair as eth0 (10.77.x.y/16); the other ends join a bridge in
 * a hub namespace, where this process's client joins the cluster. So
 * every message crosses a real network stack (veth, bridge, no loopback
 * shortcut) between processes that share nothing but the wire protocol.
 *
 * Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2; where
 * namespaces cannot be made it says so and exits with WBENCH_SKIPPED.
 * Namespaces are named "weftb<pid>-hub" and "weftb<pid>-n<i>"; those
 * of a weft-bench that died are removed (with their processes) at the
 * next start.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/transport.h>

#include "wbench.h"

#define NETNS_DIR "/run/netns"
#define NODE_PORT 7100
#define NODE_PORT_TEXT "7100"
/* The hub's address on the bridge, where weft-bench joins as a member. */
#define HUB_ADDR "10.77.255.254"
#define COORDINATOR_ID "c0"

typedef struct netns_run {
	const wbench_opts *o;
	unsigned n;
	char prefix[32];      /* weftb<pid> */
	char dir[64];         /* the config directory */
	char weftd[PATH_MAX]; /* the weftd binary */
	char *hosts;          /* n0@10.77.0.1:7100,... */
	pid_t *pids;          /* weftd processes */
	int *out_fds;         /* their standard output */
	bool made_hub;
	unsigned made_nodes; /* namespaces n0 .. made_nodes - 1 exist */
} netns_run;

static void
node_addr(unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "10.77.%u.%u", (i + 1) / 250, (i + 1) % 250 + 1);
}

/* ip_batch runs `ip [-n NS] -batch -` with the lines given; 0 or -1. */
static int
ip_batch(const char *ns, const char *lines)
{
	char cmd[128];
	FILE *p;

	if (ns != NULL)
		snprintf(cmd, sizeof(cmd), "ip -n %s -batch - 2>&1", ns);
	else
		snprintf(cmd, sizeof(cmd), "ip -batch - 2>&1");
	if ((p = popen(cmd, "w")) == NULL)
		return -1;
	fputs(lines, p);
	return pclose(p) == 0 ? 0 : -1;
}

/* kill_ns_pids ends the processes left in a namespace. */
static void
kill_ns_pids(const char *ns)
{
	char cmd[384], line[32];
	FILE *p;

	if (snprintf(cmd, sizeof(cmd), "ip netns pids %s 2>/dev/null", ns) >=
	        (int)sizeof(cmd) ||
	    (p = popen(cmd, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), p) != NULL)
		kill((pid_t)atoi(line), SIGKILL);
	pclose(p);
}

/* clean_stale removes the namespaces of weft-bench runs that died. */
static void
clean_stale(void)
{
	DIR *d = opendir(NETNS_DIR);
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char cmd[320];
		int pid;

		if (sscanf(e->d_name, "weftb%d-", &pid) != 1 ||
		    (kill(pid, 0) == 0 || errno != ESRCH))
			continue;
		kill_ns_pids(e->d_name);
		snprintf(cmd, sizeof(cmd), "netns del %s\n", e->d_name);
		ip_batch(NULL, cmd);
	}
	if (d != NULL)
		closedir(d);
}

/* make_hub makes the hub namespace and its bridge; a failure here means
 * namespaces are not allowed. */
static int
make_hub(netns_run *r)
{
	char cmd[256], hub[64];

	snprintf(hub, sizeof(hub), "%s-hub", r->prefix);
	snprintf(cmd, sizeof(cmd), "netns add %s\n", hub);
	if (ip_batch(NULL, cmd) != 0)
		return -1;
	r->made_hub = true;
	return ip_batch(hub, "link set lo up\n"
	                     "link add br0 type bridge\n"
	                     "addr add " HUB_ADDR "/16 dev br0\n"
	                     "link set br0 up\n");
}

/* make_node makes node i's namespace and its veth pair. */
static int
make_node(netns_run *r, unsigned i)
{
	char cmd[512], hub[64], ns[64], addr[32];

	snprintf(hub, sizeof(hub), "%s-hub", r->prefix);
	snprintf(ns, sizeof(ns), "%s-n%u", r->prefix, i);
	node_addr(i, addr, sizeof(addr));
	snprintf(cmd, sizeof(cmd), "netns add %s\n", ns);
	if (ip_batch(NULL, cmd) != 0)
		return -1;
	r->made_nodes = i + 1;
	snprintf(cmd, sizeof(cmd),
	         "link add v%u type veth peer name eth0 netns %s\n"
	         "link set v%u master br0 up\n",
	         i, ns, i);
	if (ip_batch(hub, cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
	         "link set lo up\naddr add %s/16 dev eth0\nlink set eth0 up\n",
	         addr);
	return ip_batch(ns, cmd);
}

/* write_config writes the cluster's weftd configuration. */
static int
write_config(netns_run *r)
{
	char path[128], addr[32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cluster.ini", r->dir);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fprintf(f, "[cluster]\nname = weft-bench-netns\n");
	for (unsigned i = 0; i < r->n; i++) {
		node_addr(i, addr, sizeof(addr));
		fprintf(f, "[node n%u]\nhost = %s\nport = %u\n", i, addr,
		        NODE_PORT);
	}
	/* weft-bench itself, in the hub: the load verb is for members. */
	fprintf(f, "[node %s]\nhost = %s\nport = %u\n", COORDINATOR_ID,
	        HUB_ADDR, NODE_PORT);
	/* The same limits as a local cluster run (cnode.c). */
	fprintf(f, "[limits]\nloops = 1\nrequest_timeout = 30s\n"
	           "heartbeat_interval = 10s\nheartbeat_misses = 30\n"
	           "connect_timeout = 30s\n"
	           "[weftd]\nload = on\nlog_level = error\n"
	           "shutdown_timeout = 2s\n");
	if (r->o->tls_dir != NULL)
		fprintf(f, "[tls]\nmode = all\nca = %s/ca.crt\n",
		        r->o->tls_dir);
	return fclose(f) == 0 ? 0 : -1;
}

/*
 * start_weftd starts node i in its namespace, its stdout on a pipe. The
 * child joins the namespace itself (setns) rather than through `ip netns
 * exec`, which also remounts /sys and fails in containers that allow
 * namespaces but not that mount.
 */
static int
start_weftd(netns_run *r, unsigned i)
{
	char ns[PATH_MAX], id[16], ini[128], cert[PATH_MAX], key[PATH_MAX];
	char *argv[16] = {r->weftd, "--config", ini, "--id", id, NULL};
	int out[2], nsfd;
	pid_t pid;

	snprintf(ns, sizeof(ns), NETNS_DIR "/%s-n%u", r->prefix, i);
	snprintf(id, sizeof(id), "n%u", i);
	snprintf(ini, sizeof(ini), "%s/cluster.ini", r->dir);
	if (r->o->tls_dir != NULL) {
		snprintf(cert, sizeof(cert), "%s/n%u.crt", r->o->tls_dir, i);
		snprintf(key, sizeof(key), "%s/n%u.key", r->o->tls_dir, i);
		argv[5] = "--tls-cert";
		argv[6] = cert;
		argv[7] = "--tls-key";
		argv[8] = key;
	}
	if ((nsfd = open(ns, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(nsfd);
		return -1;
	}
	if ((pid = fork()) == 0) {
		/* Only async-signal-safe calls until exec. */
		if (setns(nsfd, CLONE_NEWNET) != 0 || dup2(out[1], 1) < 0)
			_exit(127);
		execv(r->weftd, argv);
		_exit(127);
	}
	close(nsfd);
	close(out[1]);
	r->out_fds[i] = out[0];
	if (pid < 0)
		return -1;
	r->pids[i] = pid;
	return 0;
}

/* wait_ready reads each node's "weftd ready" line. */
static int
wait_ready(netns_run *r, uint64_t timeout_ms)
{
	uint64_t deadline = wbench_now_ns() + timeout_ms * 1000000u;

	for (unsigned i = 0; i < r->n; i++) {
		char line[256] = "";
		size_t have = 0;

		while (strstr(line, "weftd ready") == NULL) {
			struct pollfd p = {.fd = r->out_fds[i],
			                   .events = POLLIN};
			ssize_t got;

			if (wbench_now_ns() >= deadline || poll(&p, 1, 200) < 0)
				return -1;
			if (p.revents == 0)
				continue;
			got = read(r->out_fds[i], line + have,
			           sizeof(line) - 1 - have);
			if (got <= 0) {
				fprintf(stderr,
				        "weft-bench: weftd n%u did "
				        "not start\n",
				        i);
				return -1;
			}
			have += (size_t)got;
			line[have] = '\0';
			if (have == sizeof(line) - 1)
				have = 0;
		}
	}
	return 0;
}

/* find_weftd: --weftd, else next to weft-bench in the build tree or the
 * install's bin directory. */
static int
find_weftd(netns_run *r)
{
	const char *tails[] = {"/../../services/weftd/weftd", "/weftd"};
	char self[PATH_MAX];
	const char *slash;
	int dir_len;

	if (r->o->weftd_path != NULL) {
		snprintf(r->weftd, sizeof(r->weftd), "%s", r->o->weftd_path);
		return access(r->weftd, X_OK);
	}
	if (realpath(r->o->self_exe, self) == NULL)
		return -1;
	slash = strrchr(self, '/');
	dir_len = slash ? (int)(slash - self) : 1;
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		snprintf(r->weftd, sizeof(r->weftd), "%.*s%s", dir_len,
		         slash ? self : ".", tails[i]);
		if (access(r->weftd, X_OK) == 0)
			return 0;
	}
	return -1;
}

static int
make_hosts(netns_run *r)
{
	size_t len = (size_t)r->n * 40 + 1, off = 0;

	if ((r->hosts = malloc(len)) == NULL)
		return -1;
	r->hosts[0] = '\0';
	for (unsigned i = 0; i < r->n; i++) {
		char addr[32], hostport[WEFT_ADDRESS_MAX];

		node_addr(i, addr, sizeof(addr));
		weft_address_join(addr, NODE_PORT, hostport, sizeof(hostport));
		off += (size_t)snprintf(r->hosts + off, len - off, "%sn%u@%s",
		                        i ? "," : "", i, hostport);
	}
	return 0;
}

/* in_hub runs the mesh from the hub namespace (the threads the run makes
 * live there too), then comes back. */
static int
in_hub(netns_run *r, wbench_cresult *res)
{
	char path[128];
	wbench_opts o = *r->o;
	int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), hub, rv;

	snprintf(path, sizeof(path), NETNS_DIR "/%s-hub", r->prefix);
	hub = open(path, O_RDONLY | O_CLOEXEC);
	if (home < 0 || hub < 0 || setns(hub, CLONE_NEWNET) != 0) {
		perror("weft-bench: entering the hub namespace");
		rv = -1;
		goto out;
	}
	o.hosts = r->hosts;
	o.peers = r->n;
	o.cluster_name = "weft-bench-netns";
	o.coordinator = COORDINATOR_ID "@" HUB_ADDR ":" NODE_PORT_TEXT;
	rv = wbench_mesh_run(&o, res);
	if (setns(home, CLONE_NEWNET) != 0) {
		perror("weft-bench: leaving the hub namespace");
		rv = -1;
	}
out:
	if (home >= 0)
		close(home);
	if (hub >= 0)
		close(hub);
	return rv;
}

static void
teardown(netns_run *r)
{
	char cmd[128];

	for (unsigned i = 0; r->pids != NULL && i < r->n; i++)
		if (r->pids[i] > 0)
			kill(r->pids[i], SIGTERM);
	for (unsigned i = 0; r->pids != NULL && i < r->n; i++) {
		if (r->pids[i] > 0)
			waitpid(r->pids[i], NULL, 0);
		if (r->out_fds[i] > 0)
			close(r->out_fds[i]);
	}
	for (unsigned i = 0; i < r->made_nodes; i++) {
		snprintf(cmd, sizeof(cmd), "%s-n%u", r->prefix, i);
		kill_ns_pids(cmd);
		snprintf(cmd, sizeof(cmd), "netns del %s-n%u\n", r->prefix, i);
		ip_batch(NULL, cmd);
	}
	if (r->made_hub) {
		snprintf(cmd, sizeof(cmd), "netns del %s-hub\n", r->prefix);
		ip_batch(NULL, cmd);
	}
	if (r->dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "%s/cluster.ini", r->dir);
		unlink(cmd);
		rmdir(r->dir);
	}
	free(r->pids);
	free(r->out_fds);
	free(r->hosts);
}

/* netns_one runs the cluster workload on n namespaced weftd nodes.
 * Returns 0, -1, or WBENCH_SKIPPED. */
static int
netns_one(const wbench_opts *o, const char *weftd, unsigned n,
          wbench_cresult *res)
{
	netns_run r = {.o = o, .n = n};
	int rv = -1;

	snprintf(r.weftd, sizeof(r.weftd), "%s", weftd);
	snprintf(r.prefix, sizeof(r.prefix), "weftb%d", (int)getpid());
	snprintf(r.dir, sizeof(r.dir), "/tmp/weft-bench-netns.XXXXXX");
	if (mkdtemp(r.dir) == NULL) {
		r.dir[0] = '\0';
		goto out;
	}
	if (make_hub(&r) != 0) {
		fprintf(stderr, "weft-bench: --netns: cannot make network "
		                "namespaces here (`ip netns add` or a bridge "
		                "failed): skipped\n");
		rv = WBENCH_SKIPPED;
		goto out;
	}
	r.pids = calloc(n, sizeof(*r.pids));
	r.out_fds = calloc(n, sizeof(*r.out_fds));
	if (r.pids == NULL || r.out_fds == NULL || make_hosts(&r) != 0 ||
	    write_config(&r) != 0)
		goto out;
	for (unsigned i = 0; i < n; i++)
		if (make_node(&r, i) != 0) {
			fprintf(stderr,
			        "weft-bench: --netns: cannot set up "
			        "node n%u's namespace\n",
			        i);
			goto out;
		}
	for (unsigned i = 0; i < n; i++)
		if (start_weftd(&r, i) != 0)
			goto out;
	if (wait_ready(&r, 30000 + 500 * (uint64_t)n) != 0) {
		fprintf(stderr, "weft-bench: --netns: the weftd nodes did not "
		                "all start\n");
		goto out;
	}
	rv = in_hub(&r, res);
out:
	teardown(&r);
	return rv;
}

int
wbench_netns_run(const wbench_opts *o, wbench_cresult *rows, unsigned *nrows)
{
	netns_run probe = {.o = o};

	*nrows = 0;
	if (geteuid() != 0) {
		fprintf(stderr, "weft-bench: --netns needs root (it makes "
		                "network namespaces): skipped\n");
		return WBENCH_SKIPPED;
	}
	if (find_weftd(&probe) != 0) {
		fprintf(stderr, "weft-bench: --netns: no weftd binary found "
		                "(give --weftd PATH)\n");
		return -1;
	}
	clean_stale();
	for (unsigned p = 0; p < o->npeer_list; p++) {
		int rv =
		    netns_one(o, probe.weftd, o->peer_list[p], &rows[*nrows]);

		if (rv != 0)
			return rv;
		(*nrows)++;
	}
	return 0;
}
