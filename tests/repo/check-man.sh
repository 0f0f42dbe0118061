#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-man.sh SOURCES PAGES HEADER_ROOT...: the man pages.
#   1. Every function and object a public header exports (WEFT_API) is in
#      the SYNOPSIS of that header's section-3 page (SOURCES/*.3.scd): a
#      new function without its documentation fails here.
#   2. Every page in PAGES (built by scdoc; "-" when scdoc is missing)
#      renders with groff -man without a warning, and has a NAME, a
#      SYNOPSIS or DESCRIPTION, and a SEE ALSO section.
# Exits 0, 1, or 77 (ctest: skipped) when the pages could not be rendered
# for want of scdoc or groff, after the first check passed.
set -euo pipefail

sources=$1 pages=$2
shift 2
failed=0

# The page of a header: weft_NAME.3 for <weft/NAME.h>, but for these.
page_of() {
	case $1 in
	core) echo weft_core ;;
	channel) echo weft_channel ;;
	messaging) echo weft_msvc ;;
	msgpack_codec) echo weft_msgpack ;;
	*) echo "weft_$1" ;;
	esac
}

checked=0
for root in "$@"; do
	for header in "$root"/weft/*.h; do
		base=$(basename "$header" .h)
		scd=$sources/$(page_of "$base").3.scd
		if [ ! -f "$scd" ]; then
			echo "FAIL: <weft/$base.h> has no man page ($scd)" >&2
			failed=1
			continue
		fi
		# Names declared WEFT_API, comments removed.
		names=$(sed 's|/\*.*\*/||g' "$header" |
			tr '\n' ' ' | sed 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/||g' |
			grep -o 'WEFT_API[^;(]*[(;]' |
			grep -o 'weft_[a-z0-9_]*[ ]*[(;]$' | tr -d ' (;' | sort -u)
		synopsis=$(sed -n '/^# SYNOPSIS/,/^# DESCRIPTION/p' "$scd")
		for n in $names; do
			checked=$((checked + 1))
			if ! grep -q "\\b$n\\b" <<<"$synopsis"; then
				echo "FAIL: $n (<weft/$base.h>) is not in" \
					"$(basename "$scd")'s SYNOPSIS" >&2
				failed=1
			fi
		done
	done
done
echo "man: $checked exported names, each in its header's page"
[ "$failed" -eq 0 ] || exit 1

if [ "$pages" = - ]; then
	echo "SKIP: scdoc is not installed: the pages were not built"
	exit 77
fi
if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff is not installed (Debian package groff-base)"
	exit 77
fi
rendered=0
for scd in "$sources"/*.scd; do
	page=$pages/$(basename "$scd" .scd)
	if [ ! -s "$page" ]; then
		echo "FAIL: $page was not built" >&2
		failed=1
		continue
	fi
	warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
	text=$(groff -man -Tutf8 "$page" 2>/dev/null | col -bx 2>/dev/null ||
		groff -man -Tascii -P-c -P-b -P-u "$page")
	if [ -n "$warnings" ]; then
		echo "FAIL: $page: $warnings" >&2
		failed=1
	fi
	for section in NAME "SEE ALSO"; do
		if ! grep -q "^$section" <<<"$text"; then
			echo "FAIL: $page has no $section section" >&2
			failed=1
		fi
	done
	rendered=$((rendered + 1))
done
echo "man: $rendered pages render without a warning"
exit "$failed"
