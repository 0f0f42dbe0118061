#!/bin/sh
# SPDX-License-Identifier: MIT
# handshake-bench.sh: the CPU of a mutual TLS 1.3 handshake, both ends
# together, for openssl s_time (-new: full, -reuse: resumed) against
# openssl s_server and for weft (weft-tls-bench --only connect), in one
# run with the same certificates.
#
#   scripts/handshake-bench.sh [-t SECONDS] [-p PORT] [-b WEFT_TLS_BENCH] [DIR]
#
# DIR holds ca.crt, bench-node.crt and bench-node.key (scripts/gen-certs.sh
# DIR bench-node); without it they are made in a temporary directory.
# s_time's own figure is its client's user time only: this script adds
# the system time and the server's CPU (from /proc), so that every row
# counts both ends. Each s_time connection fetches s_server's -www page
# and weft's sends one 64-byte round trip: a request and its answer on top
# of the handshake in both.
set -eu

secs=5
port=14433
bench=build/bench/tls/weft-tls-bench
while getopts t:p:b: opt; do
	case $opt in
	t) secs=$OPTARG ;;
	p) port=$OPTARG ;;
	b) bench=$OPTARG ;;
	*)
		echo "usage: $0 [-t SECONDS] [-p PORT] [-b WEFT_TLS_BENCH] [DIR]" >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
tmp=
if [ $# -ge 1 ]; then
	dir=$1
else
	tmp=$(mktemp -d)
	dir=$tmp
	sh "$(dirname "$0")/gen-certs.sh" "$dir" bench-node >/dev/null
fi
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	[ -n "$tmp" ] && rm -rf "$tmp"
	return 0
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)

# cpu_ticks PID: user plus system time of a running process, in ticks.
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# s_time MODE: one s_time run; prints "connections client-seconds".
s_time() {
	# times: the second line is the children's user and system time.
	(
		openssl s_time -connect "127.0.0.1:$port" "$1" -time "$secs" \
			-tls1_3 -verify 1 -CAfile "$dir/ca.crt" \
			-cert "$dir/bench-node.crt" -key "$dir/bench-node.key" \
			-www / 2>/dev/null >"$dir/s_time.out"
		times
	) | awk -v f="$dir/s_time.out" '
		function sec(t) { split(t, a, "m"); sub("s", "", a[2]);
			return a[1] * 60 + a[2] }
		NR == 2 { cpu = sec($1) + sec($2) }
		END {
			while ((getline line < f) > 0)
				if (line ~ /connections in .* real seconds/) {
					split(line, w, " "); n = w[1] }
			print n, cpu }'
}

openssl s_server -accept "$port" -tls1_3 -Verify 1 -CAfile "$dir/ca.crt" \
	-cert "$dir/bench-node.crt" -key "$dir/bench-node.key" -www -quiet \
	</dev/null >/dev/null 2>&1 &
server=$!
sleep 1

printf '%-28s %12s %14s %16s\n' "handshake (both ends)" "connections" \
	"CPU us each" "per CPU second"
for mode in -new -reuse; do
	before=$(cpu_ticks "$server")
	# shellcheck disable=SC2046 # two numbers, split on purpose
	set -- $(s_time "$mode")
	after=$(cpu_ticks "$server")
	awk -v n="$1" -v c="$2" -v s="$((after - before))" -v t="$tick" \
		-v m="openssl s_time $mode" 'BEGIN {
		us = (c + s / t) * 1e6 / n
		printf "%-28s %12d %14.0f %16.0f\n", m, n, us, 1e6 / us }'
done
kill "$server"
server=
"$bench" --only connect --tls-only --certs "$dir" | awk '
	/us CPU per connect/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "full") full = $(i + 1)
			if ($i == "resumed") res = $(i + 1)
		}
	}
	END {
		printf "%-28s %12s %14.0f %16.0f\n", "weft full", "2000", full, 1e6 / full
		printf "%-28s %12s %14.0f %16.0f\n", "weft resumed", "2000", res, 1e6 / res
	}'
