#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-example.sh SERVER CLIENT: starts the echo server on an ephemeral port,
# runs the client against it with 10,000 messages, and stops the server.
set -euo pipefail

server=$1
client=$2
fifo=$(mktemp -u)
mkfifo "$fifo"
"$server" 127.0.0.1:0 >"$fifo" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$fifo"' EXIT

# The server prints its address once it listens.
read -r line <"$fifo"
address=${line##* }
echo "server: $line"
"$client" "$address" 10000
kill -TERM "$pid"
wait "$pid"
