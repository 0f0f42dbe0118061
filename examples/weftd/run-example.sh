#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-example.sh WEFTD WEFT_KV CLIENT WEFTD_MD: docs/WEFTD.md's three-node
# cluster, as written: its configuration is taken from the document (the
# first ini block), the three nodes are started with the document's
# command lines on one host, each serves /metrics on its own port, and
# weft-kv and the guide's cluster-client talk to them. Run through
# examples/run-isolated.sh (the document names fixed ports).
set -euo pipefail

weftd=$1 weft_kv=$2 client=$3 doc=$4
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

awk '/^```ini$/ && !done {inside=1; next}
     /^```$/ && inside {inside=0; done=1}
     inside' "$doc" >"$work/cluster.ini"
grep -q '^\[node n3\]' "$work/cluster.ini" ||
	{ echo "FAIL: no cluster configuration in $doc" >&2; exit 1; }
cd "$work"
# The document's commands, with this build's weftd.
for id in n1 n2 n3; do
	cmd=$(grep -E "^weftd --config cluster.ini --id $id\$" "$doc")
	mkfifo "$id.ready"
	"$weftd" ${cmd#weftd } >"$id.ready" 2>"$id.err" &
	pids+=($!)
	exec {fd}<"$id.ready"
	read -r -t 10 line <&"$fd" ||
		{ cat "$id.err"; echo "FAIL: $id did not start" >&2; exit 1; }
	echo "$line"
	case $line in
	"weftd ready node=$id port="*" metrics=127.0.0.1:910"[0-9]) ;;
	*) cat "$id.err"; echo "FAIL: $id: '$line'" >&2; exit 1 ;;
	esac
done
for port in 9101 9102 9103; do
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
	grep -q '^weftd_info{node="n' <&3 ||
		{ echo "FAIL: no metrics on $port" >&2; exit 1; }
	exec 3<&-
done
echo "metrics: 127.0.0.1:9101, :9102 and :9103 answer"
"$weft_kv" --config cluster.ini --node n1 put city Lisbon
out=$("$weft_kv" --config cluster.ini --node n3 get city)
[ "$out" = Lisbon ] || { echo "FAIL: weft-kv get: '$out'" >&2; exit 1; }
echo "weft-kv: put on n1, got '$out' from n3"
"$client" --config cluster.ini
for p in "${pids[@]}"; do
	kill -TERM "$p"
	wait "$p"
done
pids=()
