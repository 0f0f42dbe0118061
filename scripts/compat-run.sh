#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# compat-run.sh BUILD_DIR REV: a node of this build serves nodes and
# clients of an earlier one. Builds weftd and weft-kv of commit REV (from
# this repository's history) in build-compat/, then runs a 3-node cluster
# on loopback in which n3 is of REV and the client (weft-kv) too, with
# puts and gets through every node for a bounded time (skew-run.sh with
# no clock offset). Fails if a request failed or none was served. Where
# REV is not in the history (a shallow clone), says so and skips (77).
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
trap 'rm -rf "$src"' EXIT
git -C "$root" archive "$rev" | tar -x -C "$src"
cmake -S "$src" -B "$old" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$old" -j"$(nproc)" --target weftd weft-kv >/dev/null

line=$(bash "$root/scripts/skew-run.sh" "$build" +0 "$seconds" "$old" "$old")
echo "compat with $rev (n3 and weft-kv of $rev): $line"
if [[ $line =~ requests\ ([0-9]+)\ served,\ ([0-9]+)\ failed ]] &&
	[ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" -eq 0 ]; then
	exit 0
fi
echo "compat-run.sh: a node of this build failed a node or client of $rev" >&2
exit 1
