#!/bin/sh
# SPDX-License-Identifier: MIT
#
# kv-large-puts.sh BUILD [ROUNDS] [CONCURRENT] [SIZE_MIB]: a three-node
# weftd cluster on loopback (write_quorum = majority), and ROUNDS rounds of
# CONCURRENT puts of SIZE_MIB MiB each at once, all through n1 (the
# coordinator), each by its own weft-kv. Prints how many puts succeeded,
# the slowest put of each round, and n1's peak resident memory (VmHWM) and
# its resident memory once the puts are done. Linux only (/proc). Bounded:
# every weft-kv gives up after 30 s, the cluster stops at the end.
#
#   scripts/kv-large-puts.sh build 5 8 16
set -eu

build=${1:?usage: kv-large-puts.sh BUILD [ROUNDS] [CONCURRENT] [SIZE_MIB]}
rounds=${2:-5}
concurrent=${3:-8}
size_mib=${4:-16}
weftd=$build/services/weftd/weftd
weftkv=$build/services/weftd/weft-kv
[ -x "$weftd" ] || weftd=$(find "$build" -name weftd -type f -perm -u+x | head -1)
[ -x "$weftkv" ] || weftkv=$(find "$build" -name weft-kv -type f -perm -u+x | head -1)

dir=$(mktemp -d)
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] || rm -rf "$dir"; echo "dir $dir" >&2
}
trap cleanup EXIT INT TERM

# Ports from the script's pid, so that two runs on one host do not meet.
base=$((20000 + ($$ % 2000) * 10))
cat >"$dir/cluster.ini" <<EOF
[cluster]
name = large
[node n1]
host = 127.0.0.1
port = $((base + 1))
[node n2]
host = 127.0.0.1
port = $((base + 2))
[node n3]
host = 127.0.0.1
port = $((base + 3))
[weftd]
log_level = warn
[kv]
write_quorum = majority
EOF

for n in 1 2 3; do
	"$weftd" --config "$dir/cluster.ini" --id "n$n" >"$dir/n$n.out" \
	    2>"$dir/n$n.err" &
	pids="$pids $!"
	eval "pid_n$n=$!"
done
for n in 1 2 3; do
	i=0
	until grep -q '^weftd ready' "$dir/n$n.out" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "n$n did not start" >&2; exit 1; }
		sleep 0.1
	done
done
# Every member up before the first put.
until "$weftkv" --config "$dir/cluster.ini" --node n1 put warm up \
    >/dev/null 2>&1; do sleep 0.2; done

head -c $((size_mib * 1048576)) /dev/urandom >"$dir/value"
rss() { awk -v k="$2:" '$1 == k { print int($2 / 1024) }' "/proc/$1/status"; }
echo "n1 before: VmRSS $(rss "$pid_n1" VmRSS) MiB"

ok=0 total=0 r=1
while [ $r -le "$rounds" ]; do
	c=1 wait_for=
	start=$(date +%s%N)
	while [ $c -le "$concurrent" ]; do
		(
			s=$(date +%s%N)
			if "$weftkv" --config "$dir/cluster.ini" --node n1 \
			    --timeout-ms 30000 put "big$c" - <"$dir/value" \
			    >"$dir/put$c.out" 2>&1; then
				rv=ok
			else
				rv=$(tr '\n' ' ' <"$dir/put$c.out")
			fi
			echo "$(( ($(date +%s%N) - s) / 1000000 )) $rv" \
			    >"$dir/put$c.res"
		) &
		wait_for="$wait_for $!"
		c=$((c + 1))
	done
	for p in $wait_for; do wait "$p"; done
	slowest=0 good=0
	for c in $(seq 1 "$concurrent"); do
		read -r ms rv <"$dir/put$c.res"
		[ "$ms" -gt "$slowest" ] && slowest=$ms
		if [ "$rv" = ok ]; then good=$((good + 1)); else
			echo "  put big$c: $rv"; fi
	done
	ok=$((ok + good))
	total=$((total + concurrent))
	echo "round $r: $good of $concurrent puts ok, slowest ${slowest} ms," \
	    "round $(( ($(date +%s%N) - start) / 1000000 )) ms"
	r=$((r + 1))
done
sleep 1
echo "puts: $ok of $total ok"
echo "n1 peak: VmHWM $(rss "$pid_n1" VmHWM) MiB; after: VmRSS" \
    "$(rss "$pid_n1" VmRSS) MiB"
echo "n2 peak: VmHWM $(rss "$pid_n2" VmHWM) MiB"
