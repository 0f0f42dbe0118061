#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-certs.sh DIR P: the certificates of a benchmark cluster of up to P
# nodes over mutual TLS, made with gen-certs.sh into DIR: n0 to n(P-1), and
# c0, weft-bench's own identity. c0 is a client of the nodes in the cluster
# runs, and a member the nodes dial in the --netns and --hosts runs
# (weft-bench joins as the coordinator there), so it gets a node's
# certificate: server and client use both. Used by run-main.sh and by the
# tests of the namespace run, so that both make the same choice.
set -eu

[ $# -eq 2 ] || {
	echo "usage: $0 DIR P" >&2
	exit 2
}
dir=$1
max=$2
ids=$(seq -f 'n%g' 0 $((max - 1)))
# shellcheck disable=SC2086 # one argument per id
exec sh "$(dirname "$0")/gen-certs.sh" "$dir" $ids c0
