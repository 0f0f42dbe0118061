#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-man-page.sh WEFT_BENCH PAGE.scd: weft-bench(1) is complete. Every
# workload `weft-bench --help` lists has a line of the page's SYNOPSIS,
# and every option `weft-bench WORKLOAD --help` lists is described on the
# page (as *--option*). Exits 0 or 1.
set -euo pipefail

bench=$1 page=$2
failed=0
synopsis=$(sed -n '/^# SYNOPSIS/,/^# DESCRIPTION/p' "$page")
workloads=$("$bench" --help 2>&1 | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p')
[ -n "$workloads" ] || { echo "FAIL: no workload in weft-bench --help" >&2; exit 1; }
nopts=0
for w in $workloads; do
	if ! grep -qF "*weft-bench* *$w*" <<<"$synopsis"; then
		echo "FAIL: workload $w is not in $(basename "$page")'s SYNOPSIS" >&2
		failed=1
	fi
	for opt in $("$bench" "$w" --help 2>&1 |
		sed -n 's/^  \(--[a-z][a-z0-9-]*\).*/\1/p'); do
		nopts=$((nopts + 1))
		if ! grep -qF -- "*$opt*" "$page"; then
			echo "FAIL: $w's option $opt is not on $(basename "$page")" >&2
			failed=1
		fi
	done
done
echo "weft-bench(1): $(wc -w <<<"$workloads") workloads in the SYNOPSIS," \
	"$nopts options of theirs described"
exit "$failed"
