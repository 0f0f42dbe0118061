#!/bin/sh
# SPDX-License-Identifier: MIT
#
# kv-join.sh BUILD [KEYS] [SIZE] [JOBS]: the time from a member being added
# to it serving reads. A three-node weftd cluster on loopback (write_quorum
# = majority) is loaded with KEYS keys of SIZE bytes (default 100,000 of
# 1,024) by weft-kv puts, JOBS at a time (default 8); then [node n4] is
# added to the configuration file, which every node reads again when it
# changes (the file discovery), and n4 starts with that file, empty. The
# clock runs from the file's change to n4's first answered get of a key
# loaded before (weft-kv get through n4, tried every 10 ms: while n4 copies
# the others' data it refuses reads with OVERLOADED). Prints that time,
# n4's own "caught up in" log line and its copy counters. A benchmark,
# not a test: the figure depends on the machine. Bounded: each weft-kv
# gives up after 10 s, the wait for n4 after 600 s; the cluster stops at
# the end.
#
#   scripts/kv-join.sh build 100000 1024 8
set -eu

build=${1:?usage: kv-join.sh BUILD [KEYS] [SIZE] [JOBS]}
keys=${2:-100000}
size=${3:-1024}
jobs=${4:-8}
weftd=$build/services/weftd/weftd
weftkv=$build/services/weftd/weft-kv

dir=$(mktemp -d)
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM

base=$((22000 + ($$ % 2000) * 10))
node() {
	printf '[node n%s]\nhost = 127.0.0.1\nport = %s\n' "$1" "$((base + $1))"
	printf '[weftd n%s]\nmetrics_listen = 127.0.0.1:%s\n' "$1" \
	    "$((base + 5 + $1))"
}
config() {
	printf '[cluster]\nname = join\n'
	for n in "$@"; do node "$n"; done
	printf '[weftd]\nlog_level = info\n[kv]\nwrite_quorum = majority\n'
}
config 1 2 3 >"$dir/cluster.ini"

start_node() {
	"$weftd" --config "$dir/cluster.ini" --id "n$1" >"$dir/n$1.out" \
	    2>"$dir/n$1.err" &
	pids="$pids $!"
}
wait_ready() {
	i=0
	until grep -q '^weftd ready' "$dir/n$1.out" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "n$1 did not start" >&2; exit 1; }
		sleep 0.1
	done
}
for n in 1 2 3; do start_node "$n"; done
for n in 1 2 3; do wait_ready "$n"; done
until "$weftkv" --config "$dir/cluster.ini" --node n1 put warm up \
    >/dev/null 2>&1; do sleep 0.2; done

# The values: SIZE bytes of one letter each, differing by key.
head -c "$size" /dev/zero | tr '\0' v >"$dir/value"
s=$(date +%s%N)
seq 0 $((keys - 1)) | xargs -P "$jobs" -I{} sh -c \
    '"$0" --config "$1" --node "n$(( {} % 3 + 1 ))" --timeout-ms 10000 \
        put "key{}" - <"$2" >/dev/null || echo "put key{} failed" >&2' \
    "$weftkv" "$dir/cluster.ini" "$dir/value"
echo "loaded $keys keys of $size bytes in" \
    "$(( ($(date +%s%N) - s) / 1000000 )) ms"

# n4 joins: the file changes (every node adds n4), then n4 starts.
config 1 2 3 4 >"$dir/cluster.new"
s=$(date +%s%N)
mv "$dir/cluster.new" "$dir/cluster.ini"
for p in $pids; do kill -HUP "$p"; done
start_node 4
wait_ready 4
i=0
until "$weftkv" --config "$dir/cluster.ini" --node n4 --timeout-ms 10000 \
    get key0 >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 60000 ] || { echo "n4 never served reads" >&2; exit 1; }
	sleep 0.01
done
echo "n4 served reads $(( ($(date +%s%N) - s) / 1000000 )) ms after it" \
    "was added"
grep -h 'caught up' "$dir/n4.err" "$dir/n4.out" 2>/dev/null || true
curl -s "http://127.0.0.1:$((base + 9))/metrics" 2>/dev/null |
    grep -E 'weft_kv_(keys|entries_pulled|bytes_pulled|caught_up)' || true
