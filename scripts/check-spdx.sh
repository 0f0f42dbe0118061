#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-spdx.sh [DIR]: every source file of the tree in DIR (default: the
# repository this script is in) names its licence in its first three lines:
# "SPDX-License-Identifier: MIT". Source files are the C files (.c, .h), the
# CMake files, the shell scripts and the Makefile. Prints each file that
# does not, and exits 1 if there is one.
set -euo pipefail

dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$dir"

list_files() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files --cached --others --exclude-standard
	else
		find . -path './build*' -prune -o -path ./.git -prune -o \
			-type f -print | sed 's|^\./||'
	fi
}

missing=0
checked=0
while IFS= read -r f; do
	case $f in
	*.c | *.h | *.cc | *.cpp | */CMakeLists.txt | CMakeLists.txt | \
		*.cmake | *.cmake.in | *.pc.in | *.sh | Makefile | .ci/run) ;;
	*) continue ;;
	esac
	[ -f "$f" ] || continue # deleted in the work tree, not yet in git
	checked=$((checked + 1))
	if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT'; then
		echo "missing SPDX-License-Identifier: $f"
		missing=$((missing + 1))
	fi
done < <(list_files)

if [ "$missing" -ne 0 ]; then
	echo "check-spdx: $missing of $checked files have no SPDX line" >&2
	echo "  add '/* SPDX-License-Identifier: MIT */' (C) or" \
		"'# SPDX-License-Identifier: MIT' as the first line" >&2
	exit 1
fi
echo "check-spdx: all $checked source files carry an SPDX line"
