#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-example.sh TLS_ECHO GEN_CERTS: makes a CA, a server and a client
# certificate with weft-gen-certs, starts `tls-echo serve` on an ephemeral
# port and checks that `tls-echo ask` gets its greeting back over TLS from
# the server its certificate names.
set -euo pipefail

tls_echo=$1 gen_certs=$2
work=$(mktemp -d)
fifo=$work/fifo
mkfifo "$fifo"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
sh "$gen_certs" "$work/certs" server --client client >/dev/null
"$tls_echo" serve 127.0.0.1:0 "$work/certs" >"$fifo" &
pid=$!
exec 4<"$fifo"
read -r -t 10 line <&4
echo "server: $line"
address=${line##* }
out=$("$tls_echo" ask "$address" "$work/certs")
echo "$out"
grep -q '^connected to server over TLSv1.3' <<<"$out"
grep -q '^echo: hello over TLS$' <<<"$out"
