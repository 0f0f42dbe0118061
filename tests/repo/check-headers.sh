#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-headers.sh CC CXX INCLUDE_ROOT... [-- FLAG...]: compiles every public
# header <weft/NAME.h> found under the INCLUDE_ROOTs on its own, twice:
#   CC  -std=c11 -pedantic          (strict C11: no _GNU_SOURCE, no extensions)
#   CXX -std=c++11 -pedantic        (C++: extern "C", no C-only constructs)
# each with -Wall -Wextra -Werror. FLAGs (include paths of the
# dependencies) are passed to both. CXX may be "-" to skip the C++ half
# (it is then reported as skipped and the script exits 77 when nothing
# else failed). Exits 0 when every header compiles both ways.
set -euo pipefail

if [ $# -lt 3 ]; then
	echo "usage: $0 CC CXX INCLUDE_ROOT... [-- FLAG...]" >&2
	exit 2
fi
cc=$1 cxx=$2
shift 2
roots=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	roots+=("$1")
	shift
done
[ $# -gt 0 ] && shift
flags=("$@")
includes=()
for r in "${roots[@]}"; do
	includes+=("-I$r")
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0 count=0
for r in "${roots[@]}"; do
	for header in "$r"/weft/*.h; do
		[ -f "$header" ] || continue
		name=weft/$(basename "$header")
		count=$((count + 1))
		printf '#include <%s>\n' "$name" >"$work/h.c"
		cp "$work/h.c" "$work/h.cc"
		if ! "$cc" -std=c11 -pedantic -Wall -Wextra -Werror \
			-fsyntax-only "${includes[@]}" "${flags[@]}" \
			"$work/h.c"; then
			echo "FAIL: <$name> is not strict C11 on its own" >&2
			failed=$((failed + 1))
		fi
		if [ "$cxx" != "-" ] && ! "$cxx" -std=c++11 -pedantic -Wall \
			-Wextra -Werror -fsyntax-only "${includes[@]}" \
			"${flags[@]}" "$work/h.cc"; then
			echo "FAIL: <$name> does not compile as C++ on its own" >&2
			failed=$((failed + 1))
		fi
	done
done
if [ "$count" -eq 0 ]; then
	echo "FAIL: no header under ${roots[*]}" >&2
	exit 1
fi
if [ "$failed" -ne 0 ]; then
	exit 1
fi
if [ "$cxx" = "-" ]; then
	echo "headers: $count compile alone as strict C11;" \
		"C++ skipped (no C++ compiler: install g++)"
	exit 77
fi
echo "headers: $count compile alone as strict C11 and as C++"
