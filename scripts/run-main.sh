#!/usr/bin/env bash
# run-main.sh [BUILD_DIR]: the project's main job, run by `make run` after the
# build.
#
# For now: weft-bench throughput and latency at 64 B, 1 KiB and 64 KiB
# messages over TCP loopback, weft's full pipeline beside the raw-socket
# reference, each the median of WEFT_BENCH_REPEAT runs (default 3). Every
# figure also goes to BUILD_DIR/bench-results/*.json.
# TODO(bench): the cluster benchmark (issue 5) once the messaging service is
# in.
set -euo pipefail

build_dir=${1:-build}
bench="$build_dir/bench/weft-bench/weft-bench"
repeat=${WEFT_BENCH_REPEAT:-3}
results="$build_dir/bench-results"

if [ ! -x "$bench" ]; then
	echo "run-main: $bench is missing: build first (make build)" >&2
	exit 1
fi
mkdir -p "$results"

run() {
	local workload=$1 size=$2
	shift 2
	echo "== weft-bench $workload --size $size --impl both" \
		"--repeat $repeat $*"
	"$bench" "$workload" --size "$size" --impl both --repeat "$repeat" \
		--json "$results/$workload-$size.json" "$@"
	echo
}

for size in 64 1K 64K; do
	run throughput "$size"
done
for size in 64 1K 64K; do
	run latency "$size" --count 20k
done

cat <<'NOTE'
Targets: weft >= 70% of a bare libevent loop at 64 B and
1 KiB (about 9-11 M msgs/s at 64 B on the reference machine), >= 3 GB/s at
64 KiB, and a ping-pong p50 within 1.15x of the raw blocking sockets.
NOTE
echo "JSON results: $results/"
