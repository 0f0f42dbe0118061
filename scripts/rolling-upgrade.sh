#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# rolling-upgrade.sh NEW_BUILD OLD_BUILD [SECONDS]: a rolling upgrade of a
# 3-node weftd cluster on loopback under steady key-value load.
#
# The three nodes start from OLD_BUILD. A load of weft-kv puts (write
# quorum: majority) and gets runs through every node in turn, from
# clients of both builds, while each node in turn is stopped (SIGTERM: it
# drains) and started again from NEW_BUILD, which copies the data from the
# others before it is ready (/readyz). Between two restarts the cluster
# runs for a while whole. Then every put that was acknowledged must read
# back, with its value, from every node: an upgrade loses nothing
# accepted. A request that was not acknowledged (its node was down at
# that moment) is counted, not an error: its client was told. Prints one
# line; exits 1 if an acknowledged write is missing or wrong, if nothing
# was served, or if a node exited on its own.
set -euo pipefail

new=${1:?usage: rolling-upgrade.sh NEW_BUILD OLD_BUILD [SECONDS]}
old=${2:?usage: rolling-upgrade.sh NEW_BUILD OLD_BUILD [SECONDS]}
seconds=${3:-4}
for b in "$new" "$old"; do
	[ -x "$b/services/weftd/weftd" ] && [ -x "$b/services/weftd/weft-kv" ] ||
		{ echo "rolling-upgrade.sh: no weftd or weft-kv in $b" >&2; exit 2; }
done

dir=$(mktemp -d)
declare -A pid
loadpid=""
cleanup() {
	[ -z "$loadpid" ] || kill "$loadpid" 2>/dev/null || true
	for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

. "$(dirname "$0")/lib-cluster.sh"
cluster_ini rolling "$dir/cluster.ini"

start() { # node build
	"$2/services/weftd/weftd" --config "$dir/cluster.ini" --id "n$1" \
		>>"$dir/n$1.out" 2>>"$dir/n$1.err" &
	pid[$1]=$!
}
ready() { # node: /readyz answers 200 (the replica caught up, peers up)
	local _

	for _ in $(seq 150); do
		curl -sf -o /dev/null "http://127.0.0.1:$((base + 10 + $1))/readyz" &&
			return 0
		sleep 0.1
	done
	echo "rolling-upgrade.sh: n$1 not ready in 15 s; its last lines:" >&2
	tail -n 20 "$dir/n$1.err" >&2
	return 1
}

for i in 1 2 3; do start $i "$old"; done
for i in 1 2 3; do ready $i; done

# The load: puts then gets of key k<n> through node n<n % 3 + 1>, the
# clients alternating between the builds; each acknowledged put is
# written to the ledger with its value.
load() {
	local n=0 node kv

	while :; do
		node=n$((n % 3 + 1))
		kv=$([ $((n % 2)) -eq 0 ] && echo "$new" || echo "$old")
		if "$kv/services/weftd/weft-kv" --config "$dir/cluster.ini" \
			--node $node --timeout-ms 3000 put "k$n" "v$n-$node" \
			>/dev/null 2>>"$dir/load.err"; then
			echo "k$n v$n-$node" >>"$dir/acked"
		else
			echo "k$n" >>"$dir/failed"
		fi
		"$kv/services/weftd/weft-kv" --config "$dir/cluster.ini" \
			--node $node --timeout-ms 3000 get "k$n" >/dev/null \
			2>>"$dir/load.err" && echo get >>"$dir/gets" ||
			echo get >>"$dir/gets_failed"
		n=$((n + 1))
	done
}
touch "$dir/acked" "$dir/failed" "$dir/gets" "$dir/gets_failed"
load &
loadpid=$!

sleep "$seconds"
for i in 1 2 3; do
	kill -TERM "${pid[$i]}"
	wait "${pid[$i]}" 2>/dev/null || true
	start $i "$new"
	ready $i
	sleep "$seconds"
done
kill "$loadpid" 2>/dev/null || true
wait "$loadpid" 2>/dev/null || true
loadpid=""

# Every acknowledged put reads back, with its value, from every node.
missing=0 wrong=0 checked=0
while read -r key value; do
	for i in 1 2 3; do
		got=$("$new/services/weftd/weft-kv" --config "$dir/cluster.ini" \
			--node n$i --timeout-ms 3000 --raw get "$key" 2>/dev/null) ||
			{ missing=$((missing + 1)); continue; }
		# A later put of the same key may have won: keys are not reused
		# by the load, so the value must be this one.
		[ "$got" = "$value" ] || wrong=$((wrong + 1))
	done
	checked=$((checked + 1))
done <"$dir/acked"

gone=""
for i in 1 2 3; do
	kill -0 "${pid[$i]}" 2>/dev/null || gone="$gone n$i"
done
acked=$(wc -l <"$dir/acked")
echo "rolling upgrade $old -> $new under load: $acked puts acknowledged" \
	"($(wc -l <"$dir/failed") refused), $(wc -l <"$dir/gets") gets" \
	"served ($(wc -l <"$dir/gets_failed") refused); after the upgrade" \
	"$checked writes read back from 3 nodes: $missing missing, $wrong" \
	"wrong${gone:+; exited:$gone}"
if [ "$acked" -eq 0 ] || [ $missing -ne 0 ] || [ $wrong -ne 0 ] ||
	[ -n "$gone" ]; then
	tail -n 20 "$dir/load.err" >&2
	exit 1
fi
