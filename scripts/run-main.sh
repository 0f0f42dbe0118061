#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-main.sh [BUILD_DIR]: the project's main job, run by `make run` after the
# build (about three minutes on two cores).
#
# 1. The cluster benchmark: P node processes on loopback, each keeping 64
#    requests of 64 B in flight round-robin over the others, at P = 3 and 16,
#    with weft's messaging service (--io=loop) beside the thread-per-peer
#    baseline (--io=threads), 1 s warm-up and a 2 s window, over mutual TLS
#    (certificates made by scripts/gen-certs.sh in BUILD_DIR/bench-certs).
#    Plotted as BUILD_DIR/bench-results/cluster.svg, drawn by weft-bench
#    itself (nothing to install).
# 2. The same cluster workload across network namespaces (root only; P = 3):
#    weftd nodes each in a namespace of their own, joined by veth pairs, run
#    by weft-bench's --hosts path (skipped where namespaces are not allowed).
# 3. The pipeline benchmarks: throughput and ping-pong latency at 64 B, 1 KiB
#    and 64 KiB, weft's full pipeline beside the raw-socket reference.
#
# Each figure of 1 and 3 is run WEFT_BENCH_REPEAT times (default 3): the
# median is shown with the lowest and highest, and weft-bench warns when the
# runs disagree by more than 20 % or when the machine was busy before a run
# (the JSON records both). WEFT_BENCH_PEERS (default 3,16) changes the
# cluster sizes; WEFT_BENCH_TLS=0 runs the cluster in plaintext. Every
# figure also goes to BUILD_DIR/bench-results/*.json; the legend printed at
# the end explains the columns, docs/BENCHMARKS.md the method.
# WEFT_BENCH_RESULTS names another directory for the results, and
# WEFT_BENCH_QUICK=1 shortens every run to a fraction of a second (and
# leaves the namespaces out): what the test suite runs, to check the job
# itself, not to measure.
set -euo pipefail

build_dir=${1:-build}
bench="$build_dir/bench/weft-bench/weft-bench"
peers=${WEFT_BENCH_PEERS:-3,16}
repeat=${WEFT_BENCH_REPEAT:-3}
results=${WEFT_BENCH_RESULTS:-$build_dir/bench-results}
if [ "${WEFT_BENCH_QUICK:-0}" = 1 ]; then
	window=(--warmup 0.2 --duration 0.3)
	tput_count=(--count 200k)
	rt_count=2k
else
	window=(--warmup 1 --duration 2)
	tput_count=()
	rt_count=10k
fi
certs="$build_dir/bench-certs"
script_dir=$(cd "$(dirname "$0")" && pwd)


if [ ! -x "$bench" ]; then
	echo "run-main: $bench is missing: build first (make build)" >&2
	exit 1
fi
mkdir -p "$results"

run() {
	local status=0

	echo "\$ weft-bench $*"
	"$bench" "$@" || status=$?
	echo
	return "$status"
}

tls=()
if [ "${WEFT_BENCH_TLS:-1}" != 0 ]; then
	# One certificate per node id, n0 to n(P-1) of the largest P, and
	# one for c0, weft-bench itself (bench-certs.sh says why it is a
	# node's).
	max=$(echo "$peers" | tr ',' '\n' | sort -n | tail -1)
	sh "$script_dir/bench-certs.sh" "$certs" "$max" >/dev/null
	tls=(--tls "$certs")
fi

echo "== Cluster: weft's event loops against two blocking threads per peer"
rm -f "$results"/*.json "$results/cluster.svg" "$results/cluster.png"
run cluster --peers "$peers" --io both --outstanding 64 --size 64 \
	"${window[@]}" --repeat "$repeat" --quiet "${tls[@]}" \
	--json "$results/cluster.json" --plot "$results/cluster.svg"

echo "== The --hosts path on one machine: weftd nodes in network namespaces"
rc=0
if [ "${WEFT_BENCH_QUICK:-0}" = 1 ]; then
	echo "(skipped: WEFT_BENCH_QUICK)"
	echo
else
	run cluster --netns --peers 3 --outstanding 64 --size 64 \
		"${window[@]}" --quiet "${tls[@]}" \
		--json "$results/cluster-netns.json" || rc=$?
fi
if [ "$rc" = 77 ]; then
	echo "(skipped: network namespaces are not allowed here)"
	echo
elif [ "$rc" != 0 ]; then
	exit "$rc"
fi

echo "== Pipeline: weft against raw blocking sockets (same frames, same checks)"
for size in 64 1K 64K; do
	run throughput --size "$size" "${tput_count[@]}" --impl both \
		--repeat "$repeat" --quiet --json "$results/throughput-$size.json"
done
for size in 64 1K 64K; do
	run latency --size "$size" --count "$rt_count" --impl both \
		--repeat "$repeat" --quiet --json "$results/latency-$size.json"
done
cat <<'LEGEND'
== What the columns say
  Cluster (one row per P and I/O model; loop = weft's event loops, threads =
  two blocking threads per peer connection, the same wire protocol):
    ops/s      requests answered per second, all nodes together
    mean/p50/p95/p99/p99.9/max us
               request latency, from the request's send to its answer
    vcsw/op    voluntary context switches per request (a thread blocked),
               summed over every process of the run
    ivcs/op    involuntary context switches per request (a thread
               preempted), likewise
    cpu us/op  CPU time (user + system) per request, every process summed
    RSS MB     the processes' peak resident memory, summed; MB/node, the
               same per process
    threads    threads of all processes
    msgs/wk    messages per read event, how much each wake-up batches
               (the baseline counts frames per blocking read)
    errors     requests that failed (lost or duplicated answers fail the
               run)
    N runs     the lowest and highest of the runs; the row is the run of
               the median op rate
  Pipeline (weft = channels with the frame and envelope codecs; raw =
  blocking sockets writing the same frames, with the same checks):
    msgs/s, MB/s, rt/s   messages, bytes, round trips per second
    p50 .. max us        round-trip latency percentiles
    weft/raw             weft's figure over raw's (above 1: weft higher)
LEGEND
echo
written=()
for f in "$results"/cluster.svg "$results"/*.json; do
	[ -e "$f" ] && written+=("$(basename "$f")")
done
echo "Written to $results/: ${written[*]:-nothing}"
