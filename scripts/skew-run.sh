#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# skew-run.sh: the health of a 3-node weftd cluster on loopback whose node
# n3 runs with its wall clock shifted (libfaketime, Debian's faketime
# package; the monotonic clock is left alone), over a bounded run of
# weft-kv puts and gets through every node in turn.
#
#   scripts/skew-run.sh BUILD_DIR OFFSET [SECONDS] [OLD_BUILD_DIR]
#       [CLIENT_BUILD_DIR]
#
# OFFSET is libfaketime's: seconds with a sign (+5, -3600). Peer down
# transitions are counted from the first moment on (every node written
# through once), as test_weftd_clock counts them. With
# OLD_BUILD_DIR, n3 runs that build's weftd (a mixed cluster); with
# CLIENT_BUILD_DIR, the puts and gets use that build's weft-kv. Prints one
# line: peer down transitions logged, requests served and failed, and
# what each node's /metrics says (expired on arrival, n1's view of n3's
# clock). Exits 1 if a node exited before the end of the run. With
# SKEW_READ_CONSISTENCY=one|quorum|all in the environment (a weft-kv of
# this build), the gets through n1 and n2 name that read consistency
# (those through n3, which may be of an older build, name none), and the
# line adds how many replicas n1 and n2 left out of such reads for want of
# kv_read (an older n3).
set -euo pipefail

build=${1:?usage: skew-run.sh BUILD_DIR OFFSET [SECONDS] [OLD_BUILD_DIR]}
offset=${2:?offset, e.g. +5 or -3600}
seconds=${3:-20}
n3build=${4:-$build}
kvbuild=${5:-$build}
lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "skew-run.sh: libfaketime not found" >&2; exit 77; }

dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

. "$(dirname "$0")/lib-cluster.sh"
cluster_ini skew "$dir/cluster.ini"

for i in 1 2 3; do
	if [ $i = 3 ]; then
		env LD_PRELOAD="$lib" FAKETIME="$offset" \
			FAKETIME_DONT_FAKE_MONOTONIC=1 \
			"$n3build/services/weftd/weftd" --config "$dir/cluster.ini" \
			--id n$i >"$dir/n$i.out" 2>"$dir/n$i.err" &
	else
		"$build/services/weftd/weftd" --config "$dir/cluster.ini" \
			--id n$i >"$dir/n$i.out" 2>"$dir/n$i.err" &
	fi
	pids+=($!)
done
for i in 1 2 3; do
	for _ in $(seq 50); do
		grep -q ready "$dir/n$i.out" 2>/dev/null && break
		sleep 0.1
	done
done

# The first moment: every node written through once (each dials the
# others then). What the nodes logged until here, startup's dial races
# included, is not counted.
for i in 1 2 3; do
	"$kvbuild/services/weftd/weft-kv" --config "$dir/cluster.ini" \
		--node n$i --timeout-ms 2000 put warm$i up >/dev/null 2>&1 || true
done
sleep 0.5
declare -A mark
for i in 1 2 3; do mark[$i]=$(wc -l <"$dir/n$i.err"); done
since_mark() { # pattern: lines logged after the first moment that match
	local i c=0

	for i in 1 2 3; do
		c=$((c + $(tail -n +$((mark[$i] + 1)) "$dir/n$i.err" |
			{ grep -cE "$1" || true; })))
	done
	echo $c
}

ok=0 failed=0 n=0
end=$((SECONDS + seconds))
while [ $SECONDS -lt $end ]; do
	node=n$((n % 3 + 1))
	if "$kvbuild/services/weftd/weft-kv" --config "$dir/cluster.ini" \
		--node $node --timeout-ms 2000 put "k$n" "v$n" \
		>/dev/null 2>&1; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
	cl=()
	if [ -n "${SKEW_READ_CONSISTENCY:-}" ] && [ $node != n3 ]; then
		cl=(--consistency "$SKEW_READ_CONSISTENCY")
	fi
	if "$kvbuild/services/weftd/weft-kv" --config "$dir/cluster.ini" \
		--node $node --timeout-ms 2000 "${cl[@]}" get "k$n" \
		>/dev/null 2>&1; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
	n=$((n + 1))
done

# A node that is gone by now (crashed, or exited) fails the run: its
# standard error's end is shown, and the line says which.
gone=""
for i in 1 2 3; do
	if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
		gone="$gone n$i"
		echo "skew-run.sh: n$i exited during the run; its last lines:" >&2
		tail -n 20 "$dir/n$i.err" >&2
	fi
done

metric() { # node name [label filter]
	{ curl -s "http://127.0.0.1:$((base + 10 + $1))/metrics" || true; } |
		{ grep "^$2{" || true; } | { grep -- "${3:-}" || true; } |
		awk '{s += $2} END {print s + 0}'
}
downs=$(since_mark 'peer .* (down|unreachable)')
expired=0
for i in 1 2 3; do
	expired=$((expired + $(metric $i weft_msvc_node_expired_on_arrival_total)))
done
seen=$(metric 1 weft_msvc_peer_clock_offset_seconds 'peer="n3"')
skewlog=$(cat "$dir"/n*.err | grep -c "clock is .* ms" || true)
reads=""
if [ -n "${SKEW_READ_CONSISTENCY:-}" ]; then
	reads="; reads at $SKEW_READ_CONSISTENCY: $(($(metric 1 \
		weft_kv_reads_coordinated_total) + $(metric 2 \
		weft_kv_reads_coordinated_total))) coordinated,"
	reads="$reads $(($(metric 1 weft_kv_reads_downgraded_total) + \
		$(metric 2 weft_kv_reads_downgraded_total))) replicas left out"
fi
echo "n3 clock $offset s: peer down transitions $downs;" \
	"requests $ok served, $failed failed;" \
	"expired on arrival $expired; n1 sees n3's clock at ${seen} s;" \
	"clock warnings $skewlog${reads}${gone:+; exited:$gone}"
[ -z "$gone" ]
