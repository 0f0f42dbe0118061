#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# compat-run.sh BUILD_DIR REV: a node of this build serves nodes and
# clients of an earlier one. Builds weftd and weft-kv of commit REV (from
# this repository's history) in build-compat/, then runs a 3-node cluster
# on loopback in which n3 is of REV and the client (weft-kv) too, with
# puts and gets through every node for a bounded time (skew-run.sh with
# no clock offset), then a rolling upgrade of a cluster of REV to this
# build under key-value load (rolling-upgrade.sh); and the mixed cluster
# once more with this build's weft-kv reading at consistency all through
# n1 and n2, which must leave n3 (without kv_read) out of those reads
# rather than fail them. Fails if a request of
# the mixed cluster failed or none was served, or if the upgrade lost an
# acknowledged write. Where REV is not in the history (a shallow clone),
# says so and skips (77).
set -euo pipefail

build=${1:?usage: compat-run.sh BUILD_DIR REV}
rev=${2:?usage: compat-run.sh BUILD_DIR REV}
seconds=${COMPAT_SECONDS:-8}
root=$(cd "$(dirname "$0")/.." && pwd)
old=$root/build-compat

if ! git -C "$root" cat-file -e "$rev^{commit}" 2>/dev/null; then
	echo "compat-run.sh: $rev is not in this clone's history; skipped"
	exit 77
fi
src=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$src" "$log"' EXIT
# fail WHAT: says on standard output (where CI's log is read) which step
# failed, with the end of what it printed.
fail() {
	echo "compat-run.sh: $1 failed; its last lines:"
	tail -n 40 "$log"
	exit 1
}

git -C "$root" archive "$rev" | tar -x -C "$src" || fail "git archive $rev"
rm -rf "$old"
cmake -S "$src" -B "$old" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 ||
	fail "configuring $rev"
cmake --build "$old" -j"$(nproc)" --target weftd weft-kv >"$log" 2>&1 ||
	fail "building $rev"

rc=0
line=$(bash "$root/scripts/skew-run.sh" "$build" +0 "$seconds" "$old" \
	"$old" 2>"$log") || rc=$?
[ $rc -ne 77 ] || { cat "$log"; exit 77; }
echo "compat with $rev (n3 and weft-kv of $rev): $line"
[ $rc -eq 0 ] || fail "the mixed cluster (skew-run.sh exited $rc)"
if ! [[ $line =~ requests\ ([0-9]+)\ served,\ ([0-9]+)\ failed ]] ||
	[ "${BASH_REMATCH[1]}" -eq 0 ] || [ "${BASH_REMATCH[2]}" -ne 0 ]; then
	echo "compat-run.sh: a node of this build failed a node or client of $rev"
	tail -n 40 "$log"
	exit 1
fi

# Reads at consistency all through this build's nodes, n3 of REV: served,
# with n3 left out of them (reads_downgraded), never failed.
rc=0
line=$(SKEW_READ_CONSISTENCY=all bash "$root/scripts/skew-run.sh" "$build" \
	+0 "$seconds" "$old" 2>"$log") || rc=$?
[ $rc -ne 77 ] || { cat "$log"; exit 77; }
echo "compat with $rev (n3 of $rev, reads at all): $line"
[ $rc -eq 0 ] || fail "the mixed cluster at consistency all"
if ! [[ $line =~ requests\ ([0-9]+)\ served,\ ([0-9]+)\ failed ]] ||
	[ "${BASH_REMATCH[1]}" -eq 0 ] || [ "${BASH_REMATCH[2]}" -ne 0 ] ||
	! [[ $line =~ coordinated,\ ([0-9]+)\ replicas\ left\ out ]] ||
	[ "${BASH_REMATCH[1]}" -eq 0 ]; then
	echo "compat-run.sh: reads at all failed, or did not leave $rev's n3 out"
	tail -n 40 "$log"
	exit 1
fi

# Then every node of REV upgraded to this build, one at a time, under
# key-value load from clients of both: nothing acknowledged is lost.
rc=0
bash "$root/scripts/rolling-upgrade.sh" "$build" "$old" 3 >"$log" 2>&1 ||
	rc=$?
tail -n 1 "$log"
[ $rc -eq 0 ] || fail "the rolling upgrade from $rev"

