#!/usr/bin/env bash
# run-main.sh BUILD_DIR: the project's main job, run by `make run` after the
# build. For now: weft-bench throughput and latency at 64 B and 64 KiB.
# TODO(bench): replace with the full benchmark run and its report.
set -euo pipefail

build_dir=${1:-build}
bench="$build_dir/bench/weft-bench"

if [ ! -x "$bench" ]; then
	echo "weft-bench is not built yet ($bench missing): nothing to run."
	exit 0
fi

for size in 64 65536; do
	echo "== weft-bench throughput, ${size}-byte messages"
	"$bench" throughput --size "$size"
	echo "== weft-bench latency, ${size}-byte messages"
	"$bench" latency --size "$size"
done
