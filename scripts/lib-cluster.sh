# SPDX-License-Identifier: MIT
#
# lib-cluster.sh: sourced (bash) by the scripts that run a three-node
# weftd cluster on loopback, skew-run.sh and rolling-upgrade.sh.
#
# cluster_ini NAME FILE writes the cluster's file: nodes n1..n3 on ports
# base+1..base+3, their metrics endpoints on base+11..base+13, a majority
# write quorum; it sets base, a port below the kernel's ephemeral range
# (32768 up, by default), so that no outgoing connection of this run or
# another holds one of them.
cluster_ini() {
	local i

	base=$((20000 + RANDOM % 12000))
	{
		printf '[cluster]\nname = %s\n' "$1"
		for i in 1 2 3; do
			printf '[node n%d]\nhost = 127.0.0.1\nport = %d\n' $i \
				$((base + i))
		done
		printf '[weftd]\nlog_level = info\n'
		for i in 1 2 3; do
			printf '[weftd n%d]\nmetrics_listen = 127.0.0.1:%d\n' $i \
				$((base + 10 + i))
		done
		printf '[kv]\nwrite_quorum = majority\nreplicate_timeout = 2s\n'
	} >"$2"
}
