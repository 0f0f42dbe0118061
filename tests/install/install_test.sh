#!/usr/bin/env bash
# install_test.sh CMAKE BUILD_DIR CONSUMER_DIR WORK_DIR CC LIBDIR [SANITIZER]
#
# Installs the weft build in BUILD_DIR into WORK_DIR/prefix, then, as a user
# of the installed package would:
#   1. builds CONSUMER_DIR with find_package(weft) (shared and static, and
#      the cluster simulator weft::weft_sim) and runs the programs;
#   2. builds CONSUMER_DIR/main.c with `pkg-config --cflags --libs weft` and
#      runs it;
#   3. compiles every installed public header on its own, to show each one
#      is self-contained.
# Exits 0 on success, 77 (ctest: skipped) when it cannot run here.
set -euo pipefail

if [ $# -lt 6 ]; then
	echo "usage: $0 CMAKE BUILD_DIR CONSUMER_DIR WORK_DIR CC LIBDIR [SAN]" >&2
	exit 2
fi
cmake=$1 build_dir=$2 consumer_dir=$3 work=$4 cc=$5 libdir=$6
sanitizer=${7:-}
prefix=$work/prefix
expected="protocol error"

if ! command -v pkg-config >/dev/null 2>&1; then
	echo "SKIP: pkg-config not found"
	exit 77
fi

# A sanitized libweft needs its runtime in every program that loads it.
san_flags=
if [ -n "$sanitizer" ]; then
	san_flags="-fsanitize=$sanitizer"
fi

step() {
	echo "-- $*"
}

check_output() {
	local what=$1 out=$2

	if [ "$out" != "$expected" ]; then
		echo "FAIL: $what printed '$out', expected '$expected'" >&2
		exit 1
	fi
	echo "$what: ok ($out)"
}

rm -rf "$work"
mkdir -p "$work"

step "installing $build_dir into $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log"

step "building the consumer with find_package(weft)"
"$cmake" -S "$consumer_dir" -B "$work/cmake-build" \
	-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" \
	>"$work/cmake-configure.log" 2>&1 ||
	{ cat "$work/cmake-configure.log"; exit 1; }
"$cmake" --build "$work/cmake-build" >"$work/cmake-build.log" 2>&1 ||
	{ cat "$work/cmake-build.log"; exit 1; }
check_output "find_package, weft::weft" "$("$work/cmake-build/consumer")"
check_output "find_package, weft::weft_static" \
	"$("$work/cmake-build/consumer_static")"
check_output "find_package, weft::weft_sim" \
	"$("$work/cmake-build/consumer_sim" 2>/dev/null)"

step "building the consumer with pkg-config"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
read -r -a pc_flags <<<"$(pkg-config --cflags --libs weft)"
echo "pkg-config --cflags --libs weft: ${pc_flags[*]}"
# shellcheck disable=SC2086 # san_flags is empty or one word
"$cc" -std=c11 -Wall -Wextra -Werror $san_flags \
	-o "$work/consumer-pc" "$consumer_dir/main.c" "${pc_flags[@]}"
libdir_abs=$(pkg-config --variable=libdir weft)
check_output "pkg-config" \
	"$(LD_LIBRARY_PATH="$libdir_abs" "$work/consumer-pc")"

step "compiling each installed header on its own"
read -r -a pc_cflags <<<"$(pkg-config --cflags weft)"
count=0
for header in "$prefix"/include/weft/*.h; do
	name=weft/$(basename "$header")
	printf '#include <%s>\n' "$name" >"$work/header.c"
	"$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only \
		"${pc_cflags[@]}" "$work/header.c" ||
		{ echo "FAIL: <$name> does not compile alone" >&2; exit 1; }
	count=$((count + 1))
done
echo "headers: ok ($count compiled alone)"
