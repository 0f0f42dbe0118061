#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-main.sh [BUILD_DIR]: the project's main job, run by `make run` after the
# build (about a minute and a half).
#
# 1. The cluster benchmark: P node processes on loopback, each keeping 64
#    requests of 64 B in flight round-robin over the others, at P = 3 and 16,
#    with weft's messaging service (--io=loop) beside the thread-per-peer
#    baseline (--io=threads), 1 s warm-up and a 2 s window, over mutual TLS
#    (certificates made by scripts/gen-certs.sh in BUILD_DIR/bench-certs).
# 2. The same cluster workload across network namespaces (root only; P = 3):
#    weftd nodes each in a namespace of their own, joined by veth pairs, run
#    by weft-bench's --hosts path (skipped where namespaces are not allowed).
# 3. The pipeline benchmarks: throughput and ping-pong latency at 64 B, 1 KiB
#    and 64 KiB, weft's full pipeline beside the raw-socket reference.
#
# WEFT_BENCH_PEERS (default 3,16) and WEFT_BENCH_REPEAT (default 1: runs of
# each pipeline figure, the median is shown) change the amount of work;
# WEFT_BENCH_TLS=0 runs the cluster in plaintext.
# Every figure also goes to BUILD_DIR/bench-results/*.json. docs/BENCHMARKS.md
# explains the method and what the columns mean.
set -euo pipefail

build_dir=${1:-build}
bench="$build_dir/bench/weft-bench/weft-bench"
peers=${WEFT_BENCH_PEERS:-3,16}
repeat=${WEFT_BENCH_REPEAT:-1}
results="$build_dir/bench-results"
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
run cluster --peers "$peers" --io both --outstanding 64 --size 64 \
		--warmup 1 --duration 2 --quiet "${tls[@]}" \
	--json "$results/cluster.json" --plot "$results/cluster.png"

echo "== The --hosts path on one machine: weftd nodes in network namespaces"
rc=0
run cluster --netns --peers 3 --outstanding 64 --size 64 --warmup 1 \
	--duration 2 --quiet "${tls[@]}" --json "$results/cluster-netns.json" ||
	rc=$?
if [ "$rc" = 77 ]; then
	echo "(skipped: network namespaces are not allowed here)"
	echo
elif [ "$rc" != 0 ]; then
	exit "$rc"
fi

echo "== Pipeline: weft against raw blocking sockets (same frames, same checks)"
for size in 64 1K 64K; do
	run throughput --size "$size" --impl both --repeat "$repeat" --quiet \
		--json "$results/throughput-$size.json"
done
for size in 64 1K 64K; do
	run latency --size "$size" --count 10k --impl both \
		--repeat "$repeat" --quiet --json "$results/latency-$size.json"
done
echo "JSON results and the cluster plot (cluster.png): $results/"
