#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-metrics.sh METRICS_TEST WEFTD WORK_DIR: runs `promtool check
# metrics` (Prometheus's own parser and linter) on
#   1. the messaging service's dump from METRICS_TEST (test_msvc_metrics,
#      with a verb whose name holds a quote, a backslash and a newline);
#   2. what weftd serves on /metrics: its own metrics, the build and
#      process metrics, the messaging service's and the key-value store's.
# Exits 0 when promtool accepts both, 77 (ctest: skipped) when promtool is
# not installed (scripts/install-deps.sh --all installs it).
set -euo pipefail

metrics_test=$1 weftd=$2 work=$3

if ! command -v promtool >/dev/null 2>&1; then
	echo "SKIP: promtool is not installed (scripts/install-deps.sh --all)"
	exit 77
fi
rm -rf "$work"
mkdir -p "$work"

echo "-- the messaging service's dump"
WEFT_METRICS_DUMP="$work/msvc.txt" "$metrics_test" >"$work/test.log" 2>&1 ||
	{ cat "$work/test.log"; exit 1; }
promtool check metrics <"$work/msvc.txt"
echo "promtool: ok ($(grep -vc '^#' "$work/msvc.txt") samples)"

echo "-- weftd's /metrics"
cat >"$work/cluster.ini" <<CONF
[cluster]
name = metrics
[node n1]
host = 127.0.0.1
port = 0
[node n2]
host = 127.0.0.1
port = 0
[weftd]
metrics_listen = 127.0.0.1:0
log_level = warn
CONF
mkfifo "$work/ready"
"$weftd" --config "$work/cluster.ini" --id n1 >"$work/ready" \
	2>"$work/weftd.err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
read -r -t 10 line <"$work/ready"
port=${line##*metrics=127.0.0.1:}
# HTTP/1.0 over bash's /dev/tcp: no curl needed.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
sed '1,/^\r$/d' <&3 >"$work/weftd.txt"
exec 3<&-
kill -TERM "$pid"
wait "$pid"
trap - EXIT
grep -q '^weft_build_info{version="' "$work/weftd.txt"
grep -q '^process_resident_memory_bytes ' "$work/weftd.txt"
grep -q '^weft_msvc_peer_up{node="n1",peer="n2"} 0$' "$work/weftd.txt"
promtool check metrics <"$work/weftd.txt"
echo "promtool: ok ($(grep -vc '^#' "$work/weftd.txt") samples)"
