#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-example.sh DISCARD: starts the discard server on an ephemeral port,
# sends it 100,000 bytes over bash's /dev/tcp, and waits for the server to
# say it discarded them all.
set -euo pipefail

discard=$1
fifo=$(mktemp -u)
mkfifo "$fifo"
"$discard" 127.0.0.1:0 >"$fifo" &
pid=$!
exec 4<"$fifo"
trap 'kill "$pid" 2>/dev/null || true; rm -f "$fifo"' EXIT

read -r -t 10 line <&4
echo "server: $line"
port=${line##*:}
exec 3<>"/dev/tcp/127.0.0.1/$port"
head -c 100000 /dev/zero >&3
exec 3>&-
read -r -t 10 line <&4
echo "server: $line"
case $line in
"discarded 100000 bytes from 127.0.0.1:"*) ;;
*) echo "FAIL: unexpected '$line'" >&2; exit 1 ;;
esac
kill -TERM "$pid"
wait "$pid"
