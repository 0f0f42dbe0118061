#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-example.sh TIME: starts `time serve` on an ephemeral port, asks it
# the time three times, and checks each answer is within a minute of ours.
set -euo pipefail

time_bin=$1
fifo=$(mktemp -u)
mkfifo "$fifo"
"$time_bin" serve 127.0.0.1:0 >"$fifo" &
pid=$!
exec 4<"$fifo"
trap 'kill "$pid" 2>/dev/null || true; rm -f "$fifo"' EXIT
read -r -t 10 line <&4
echo "server: $line"
address=${line##* }
for _ in 1 2 3; do
	out=$("$time_bin" ask "$address")
	echo "client: $out"
	ms=$(echo "$out" | sed -n 's/^time: \([0-9]*\) ms .*/\1/p')
	now=$(($(date +%s) * 1000))
	if [ -z "$ms" ] || [ $((now - ms)) -gt 60000 ] ||
		[ $((ms - now)) -gt 60000 ]; then
		echo "FAIL: '$out' is not the time" >&2
		exit 1
	fi
done
