#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-example.sh HELLO CONFIG: the guide's messaging step as written: node
# n2 serves, node n1 asks it once and must print n2's answer. Run through
# examples/run-isolated.sh (the configuration names fixed ports).
set -euo pipefail

hello=$1 config=$2
fifo=$(mktemp -u)
mkfifo "$fifo"
"$hello" --config "$config" --id n2 >"$fifo" &
pid=$!
exec 4<"$fifo"
trap 'kill "$pid" 2>/dev/null || true; rm -f "$fifo"' EXIT
read -r -t 10 line <&4
echo "n2: $line"
out=$("$hello" --config "$config" --id n1 --ask n2 | tail -n 1)
echo "n1: $out"
if [ "$out" != "n2 answered: hello, n1, from n2" ]; then
	echo "FAIL: unexpected answer" >&2
	exit 1
fi
kill -TERM "$pid"
wait "$pid"
