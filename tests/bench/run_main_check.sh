#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run_main_check.sh BUILD_DIR: runs the main job (scripts/run-main.sh) in its
# quick form and checks what it promises: every section, the legend, the
# plot drawn without any optional tool (an SVG), the spread of repeated
# runs in the tables and the JSON, and a closing line that names exactly
# the files written.
set -euo pipefail

build_dir=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail() {
	echo "run_main_check: $*" >&2
	exit 1
}

WEFT_BENCH_QUICK=1 WEFT_BENCH_PEERS=3 WEFT_BENCH_REPEAT=2 \
	WEFT_BENCH_RESULTS="$out/results" \
	bash "$src/scripts/run-main.sh" "$build_dir" >"$out/stdout" 2>"$out/stderr" ||
	fail "run-main.sh failed: $(tail -n 20 "$out/stderr")"
for want in "== Cluster" "== Pipeline" "== What the columns say" \
	"msgs/wk " "2 runs: " "Written to $out/results/: "; do
	grep -qF -- "$want" "$out/stdout" || fail "no \"$want\" in the output"
done
# The closing line names what is there, and only that.
line=$(grep -F "Written to $out/results/: " "$out/stdout")
named=$(echo "${line#*: }" | tr ' ' '\n' | sort)
there=$(cd "$out/results" && ls | sort)
[ "$named" = "$there" ] || fail "closing line names [$named], written [$there]"
echo "$named" | grep -qx cluster.svg || fail "no cluster.svg"
echo "$named" | grep -qx cluster.json || fail "no cluster.json"
[ "$(echo "$named" | grep -c '^throughput-')" = 3 ] ||
	fail "not three throughput figures"
[ "$(echo "$named" | grep -c '^latency-')" = 3 ] || fail "not three latency figures"
# The plot: an SVG document with both I/O models in it.
head -c 5 "$out/results/cluster.svg" | grep -q '<?xml' || fail "cluster.svg is no SVG"
tail -n 1 "$out/results/cluster.svg" | grep -qx '</svg>' || fail "cluster.svg unfinished"
grep -qF 'weft (event loops)' "$out/results/cluster.svg" || fail "no loop series"
grep -qF 'thread-per-peer' "$out/results/cluster.svg" || fail "no threads series"
# The spread and the machine's state in the JSON.
grep -qF '"repeat": 2' "$out/results/cluster.json" || fail "no repeat in cluster.json"
grep -qF '"ops_per_s_lo": ' "$out/results/cluster.json" || fail "no spread in cluster.json"
for f in "$out"/results/*.json; do
	grep -qF '"machine_before": {"busy": ' "$f" || fail "no machine_before in $f"
done
echo "run_main_check: ok ($(echo "$named" | wc -l) files)"
