#!/bin/sh
# SPDX-License-Identifier: MIT
#
# kv-join.sh BUILD [KEYS] [SIZE] [SECONDS]: a member joining and leaving
# the key-value service by DNS alone, under load. A benchmark, not a test:
# its figures depend on the machine.
#
# unbound, started here on loopback, serves _weft._tcp.join.test with the
# SRV records of n1, n2 and n3 (TTL 1 s); three weftd nodes find each
# other through it ([cluster] discovery = dns-srv, write_quorum =
# majority, repair_interval = 1s). weft-bench mix (its clients only, with
# --hosts) loads KEYS keys of SIZE bytes (default 100,000 of 1,024) and
# then runs 90 % gets for SECONDS (default 40). Meanwhile:
#
#  1. n4 starts, empty; then its SRV record appears. The clock runs from
#     the record's appearance to n4's /readyz answering 200 (ready: its
#     replica has copied the others' data and answers reads).
#  2. n4's record goes; the others drop it after dns_grace (2 s), and n4
#     is stopped once all of them have.
#  3. The anti-entropy rounds of the loaded cluster are counted from the
#     members' metrics: rounds, ranges found different, bytes pulled;
#     then for the 8 s after the load, and for 8 s of the idle cluster.
#
# weft-bench's own row then says what the clients saw: errors (requests
# answered with an error: a get refused while a replica catches up, a
# write that missed its quorum) and lost (requests whose callback never
# ran; weft-bench fails the run if any was). Bounded: each wait gives up
# after 600 s; everything started here stops at the end.
#
#   scripts/kv-join.sh build 100000 1024 40
set -eu

build=${1:?usage: kv-join.sh BUILD [KEYS] [SIZE] [SECONDS]}
keys=${2:-100000}
size=${3:-1024}
seconds=${4:-40}
weftd=$build/services/weftd/weftd
bench=$build/bench/weft-bench/weft-bench
unbound=/usr/sbin/unbound
control=/usr/sbin/unbound-control
for t in "$weftd" "$bench" "$unbound" "$control" curl; do
	command -v "$t" >/dev/null || { echo "kv-join: no $t" >&2; exit 1; }
done

dir=$(mktemp -d)
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

base=$((22000 + ($$ % 2000) * 10))
dns=$((base + 9))
port() { echo $((base + $1)); }
metrics_port() { echo $((base + 4 + $1)); }
ms() { echo $(($(date +%s%N) / 1000000)); }
# wait_for WHAT CMD...: CMD until it succeeds, every 10 ms, 600 s at most.
wait_for() {
	echo "kv-join: waiting: $1" >"$dir/step"
	what=$1
	shift
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 60000 ] || { echo "kv-join: $what: gave up" >&2; exit 1; }
		sleep 0.01
	done
}

# The DNS server: the nodes' A records, and SRV records for n1..n3.
cat >"$dir/unbound.conf" <<EOF
server:
  interface: 127.0.0.1@$dns
  port: $dns
  do-ip6: no
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "$dir"
  pidfile: "$dir/unbound.pid"
  logfile: "$dir/unbound.log"
  use-syslog: no
  num-threads: 1
  module-config: "iterator"
  access-control: 127.0.0.0/8 allow
  local-zone: "join.test." static
EOF
for n in 1 2 3 4; do
	echo "  local-data: \"n$n.join.test. 60 IN A 127.0.0.1\"" \
	    >>"$dir/unbound.conf"
done
cat >>"$dir/unbound.conf" <<EOF
remote-control:
  control-enable: yes
  control-interface: "$dir/control.sock"
EOF
"$unbound" -d -c "$dir/unbound.conf" &
pids="$pids $!"
wait_for "unbound" "$control" -c "$dir/unbound.conf" status
srv() { echo "_weft._tcp.join.test. 1 IN SRV 0 0 $(port "$1") n$1.join.test."; }
records() {
	"$control" -c "$dir/unbound.conf" local_data_remove \
	    _weft._tcp.join.test >/dev/null
	for n in "$@"; do
		"$control" -c "$dir/unbound.conf" local_data "$(srv "$n")" \
		    >/dev/null
	done
}
records 1 2 3

# Each node's file names itself; the others come from DNS.
for n in 1 2 3 4; do
	cat >"$dir/n$n.ini" <<EOF
[cluster]
name = join
discovery = dns-srv
dns_name = join.test
dns_servers = 127.0.0.1:$dns
dns_grace = 2s
[node n$n]
host = 127.0.0.1
port = $(port "$n")
[limits]
allow_clients = true
[weftd]
log_level = info
metrics_listen = 127.0.0.1:$(metrics_port "$n")
[kv]
write_quorum = majority
repair_interval = 1s
EOF
done
# The nodes' resolver asks it too, for the records' targets.
echo "nameserver 127.0.0.1:$dns" >"$dir/resolv.conf"
start_node() {
	WEFT_RESOLV_CONF=$dir/resolv.conf "$weftd" --config "$dir/n$1.ini" --id "n$1" >"$dir/n$1.out" \
	    2>"$dir/n$1.err" &
	eval "pid$1=$!"
	pids="$pids $!"
}
ready() {
	[ "$(curl -s -o /dev/null -w '%{http_code}' \
	    "http://127.0.0.1:$(metrics_port "$1")/readyz")" = 200 ]
}
metric() { # metric NODE NAME: its value on NODE's /metrics
	curl -s "http://127.0.0.1:$(metrics_port "$1")/metrics" |
	    awk -v m="$2" '$1 ~ "^"m"[{]" { print $2; exit }'
}
members_are() { # members_are NODE N: NODE's DNS members number N
	[ "$(metric "$1" weftd_dns_discovery_members)" = "$2" ]
}
sum() { # sum NAME NODE..: NAME summed over the nodes
	name=$1
	shift
	t=0
	for n in "$@"; do t=$((t + $(metric "$n" "$name"))); done
	echo "$t"
}
for n in 1 2 3; do start_node "$n"; done
for n in 1 2 3; do wait_for "n$n ready" ready "$n"; done

# The load: its clients load the keys, then run.
hosts=n1@127.0.0.1:$(port 1),n2@127.0.0.1:$(port 2),n3@127.0.0.1:$(port 3)
"$bench" mix --hosts "$hosts" --cluster-name join --clients 2 \
    --outstanding 16 --mixes 90 --keys "$keys" --size "$size" \
    --warmup 0 --duration "$seconds" --timeout 30 --json "$dir/bench.json" \
    >"$dir/bench.out" 2>&1 &
bench_pid=$!
loaded() { [ "$(metric 1 weft_kv_keys)" -ge "$keys" ]; }
s=$(ms)
wait_for "the keys loaded" loaded
echo "kv-join: $keys keys of $size bytes loaded in $(($(ms) - s)) ms"
sleep 2

# Anti-entropy on the loaded cluster, over 8 s.
ae() { echo "$(sum weft_kv_repair_rounds_total 1 2 3)" \
    "$(sum weft_kv_ranges_repaired_total 1 2 3)" \
    "$(sum weft_kv_bytes_pulled_total 1 2 3)"; }
ae_report() { # ae_report WHEN BEFORE AFTER
	set -- "$1" $2 $3
	echo "kv-join: anti-entropy, $1: $(($5 - $2)) rounds," \
	    "$(($6 - $3)) ranges different, $(($7 - $4)) bytes pulled" \
	    "($((($7 - $4) / (($5 - $2) > 0 ? ($5 - $2) : 1))) a round)"
}
a0=$(ae)
sleep 8
ae_report "loaded cluster, 8 s" "$a0" "$(ae)"

# 1. n4 joins: it starts, then its record appears.
start_node 4
wait_for "n4 listening" members_are 4 3
s=$(ms)
records 1 2 3 4
wait_for "n4 ready" ready 4
echo "kv-join: n4 served reads $(($(ms) - s)) ms after its SRV record" \
    "appeared"
echo "kv-join: n4 holds $(metric 4 weft_kv_keys) keys, pulled" \
    "$(metric 4 weft_kv_bytes_pulled_total) bytes;" \
    "$(metric 4 weft_kv_reads_refused_total) reads refused while catching up"
sleep 3

# 2. n4 leaves: its record goes; it stops once every member dropped it.
s=$(ms)
records 1 2 3
for n in 1 2 3; do wait_for "n$n drops n4" members_are "$n" 2; done
echo "kv-join: n4 left every member $(($(ms) - s)) ms after its SRV" \
    "record went (dns_grace 2 s)"
kill -TERM "$pid4"
wait "$pid4" || true

wait "$bench_pid" || echo "kv-join: weft-bench failed (see its row)"
grep -E "N:get%|:90%" "$dir/bench.out" | grep -v "ops/s, p99 so far" || true
echo "kv-join: the whole run's requests:" $(grep -oE \
    '"(sent|replies|lost|duplicates)": [0-9]+' "$dir/bench.json" | tr -d '"')
grep -E "first error" "$dir/bench.out" || true

# 3. The same cluster once the load has stopped: the first 8 s mend what
# was in flight at its end; the next 8 s are the idle cluster's cost.
a0=$(ae)
sleep 8
a1=$(ae)
ae_report "the 8 s after the load" "$a0" "$a1"
sleep 8
ae_report "idle cluster, 8 s" "$a1" "$(ae)"
