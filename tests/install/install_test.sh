#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# install_test.sh CMAKE BUILD_DIR CONSUMER_DIR WORK_DIR CC LIBDIR SANITIZER
#                 VERSION SOVERSION CXX CHECK_HEADERS
#
# Installs the weft build in BUILD_DIR into WORK_DIR/prefix, then, as a user
# of the installed package would:
#   1. builds CONSUMER_DIR with find_package(weft) (shared and static, and
#      the cluster simulator weft::weft_sim) and runs the programs; the consumer's CMakeLists.txt fails if
#      find_package(weft) changed any variable of its own;
#   2. does it again with only the public dependencies visible to
#      pkg-config (no inih, no OpenSSL, ...): weft::weft must still be
#      found, built against and run;
#   3. builds CONSUMER_DIR/main.c with `pkg-config --cflags --libs weft`
#      and runs it, with every dependency and with the public ones only;
#   4. checks the version: pkg-config's, the SONAME of libweft.so
#      (libweft.so.SOVERSION) and weft_version() (in the consumer);
#   5. compiles every installed public header on its own as strict C11 and
#      as C++ (CHECK_HEADERS; CXX "-" when there is no C++ compiler);
#   6. runs the installed weft-gen-certs, and checks weftd@.service: its
#      command lines run (weftd --check-config on a cluster of the
#      certificates just made) and, where systemd-analyze is installed,
#      `systemd-analyze verify` accepts it;
#   7. builds every example program (examples/*/*.c) with the README's
#      command, `cc -std=c11 app.c $(pkg-config --cflags --libs weft)`;
#   8. finds the man pages installed: each function's own page (from the
#      headers, where python3 made them; `man weft_msvc_call` opens it)
#      and the section pages (where scdoc built them).
#   9. finds the documentation, the examples' sources and the sample
#      configuration in the doc directory, and weftd accepts the sample.
# Nothing runs with LD_LIBRARY_PATH: a prefix the dynamic linker does not
# search works through the RUNPATH that weft.pc's -Wl,-rpath gives a
# program (and libweft_sim's own, $ORIGIN); weftd@.service names this
# prefix's weftd and configuration, not the configured prefix's.
# SANITIZER may be empty. Exits 0 on success, 77 (ctest: skipped) when it
# cannot run here.
set -euo pipefail

if [ $# -lt 11 ]; then
	echo "usage: $0 CMAKE BUILD_DIR CONSUMER_DIR WORK_DIR CC LIBDIR SAN" \
		"VERSION SOVERSION CXX CHECK_HEADERS" >&2
	exit 2
fi
cmake=$1 build_dir=$2 consumer_dir=$3 work=$4 cc=$5 libdir=$6
sanitizer=$7 version=$8 soversion=$9 cxx=${10} check_headers=${11}
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
unset LD_LIBRARY_PATH

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
check_output "pkg-config, no LD_LIBRARY_PATH" "$("$work/consumer-pc")"
# The RUNPATH that finds libweft: from weft.pc's Libs (this prefix is not
# one the linker searches), and libweft_sim's own.
runpath() {
	readelf -d "$1" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p'
}
rp=$(runpath "$work/consumer-pc")
if [ -z "$rp" ] || [ "$(cd "$rp" && pwd)" != "$(cd "$libdir_abs" && pwd)" ]; then
	echo "FAIL: the pkg-config consumer's RUNPATH is '$rp'," \
		"not $libdir_abs" >&2
	exit 1
fi
rp=$(runpath "$libdir_abs/libweft_sim.so")
# shellcheck disable=SC2016 # the literal $ORIGIN
if [ "$rp" != '$ORIGIN' ]; then
	echo "FAIL: libweft_sim.so's RUNPATH is '$rp', not \$ORIGIN" >&2
	exit 1
fi
echo "RUNPATH: ok (consumer: $(runpath "$work/consumer-pc"); libweft_sim: \$ORIGIN)"

step "checking the version"
modversion=$(pkg-config --modversion weft)
if [ "$modversion" != "$version" ]; then
	echo "FAIL: pkg-config says weft $modversion, the build is $version" >&2
	exit 1
fi
soname=$(readelf -d "$libdir_abs/libweft.so" |
	sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
if [ "$soname" != "libweft.so.$soversion" ]; then
	echo "FAIL: SONAME '$soname', expected libweft.so.$soversion" >&2
	exit 1
fi
echo "version: ok ($modversion, SONAME $soname)"

# Only libevent_core and msgpack, weft's public dependencies, stay visible
# to pkg-config: a program linked against the shared library must not need
# inih, OpenSSL or the other private ones.
step "building against weft with only its public dependencies visible"
public_pc=$work/pc-public
mkdir -p "$public_pc"
for pc in libevent_core msgpack; do
	cp "$(pkg-config --variable=pcfiledir "$pc")/$pc.pc" "$public_pc/"
done
export PKG_CONFIG_LIBDIR="$public_pc:$prefix/$libdir/pkgconfig"
unset PKG_CONFIG_PATH
if pkg-config --exists inih || pkg-config --exists openssl; then
	echo "FAIL: inih or openssl is still visible to pkg-config" >&2
	exit 1
fi
"$cmake" -S "$consumer_dir" -B "$work/cmake-public" \
	-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
	-DWEFT_CONSUMER_SHARED_ONLY=ON \
	-DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" \
	>"$work/cmake-public.log" 2>&1 ||
	{ cat "$work/cmake-public.log"; exit 1; }
grep -q "weft::weft_static is not defined" "$work/cmake-public.log" ||
	{ cat "$work/cmake-public.log"; echo "FAIL: no word on weft_static" >&2;
	  exit 1; }
"$cmake" --build "$work/cmake-public" >"$work/cmake-public-build.log" 2>&1 ||
	{ cat "$work/cmake-public-build.log"; exit 1; }
check_output "find_package, public dependencies only" \
	"$("$work/cmake-public/consumer")"
read -r -a pc_flags <<<"$(pkg-config --cflags --libs weft)"
# shellcheck disable=SC2086 # san_flags is empty or one word
"$cc" -std=c11 -Wall -Wextra -Werror $san_flags \
	-o "$work/consumer-pc-public" "$consumer_dir/main.c" "${pc_flags[@]}"
check_output "pkg-config, public dependencies only" \
	"$("$work/consumer-pc-public")"

step "compiling each installed header on its own"
rv=0
bash "$check_headers" "$cc" "$cxx" "$prefix/include" -- \
	$(pkg-config --cflags libevent_core msgpack) || rv=$?
if [ "$rv" -ne 0 ] && [ "$rv" -ne 77 ]; then
	exit 1
fi

step "weft-gen-certs and weftd@.service"
bindir=$prefix/bin
out=$("$bindir/weft-gen-certs" --version)
if [ "$out" != "weft-gen-certs $version" ]; then
	echo "FAIL: weft-gen-certs --version printed '$out'" >&2
	exit 1
fi
"$bindir/weft-gen-certs" "$work/certs" n1 >/dev/null
for f in ca.crt n1.crt n1.key; do
	[ -s "$work/certs/$f" ] || { echo "FAIL: no $f" >&2; exit 1; }
done
cat >"$work/cluster.ini" <<EOF
[cluster]
name = installed
[node n1]
host = 127.0.0.1
port = 0
[tls]
mode = all
cert = $work/certs/n1.crt
key = $work/certs/n1.key
ca = $work/certs/ca.crt
EOF
# Installed weftd and weft-kv link libweft statically: they start as
# they are.
out=$("$bindir/weftd" --version)
case $out in
"weftd $version"*) echo "weftd --version, no LD_LIBRARY_PATH: ok ($out)" ;;
*) echo "FAIL: weftd --version printed '$out'" >&2; exit 1 ;;
esac
unit=$prefix/lib/systemd/system/weftd@.service
[ -f "$unit" ] || { echo "FAIL: $unit is not installed" >&2; exit 1; }
# Written for this prefix, not the configured one (/usr/local).
for cmd in "ExecStart=$bindir/weftd --config $prefix/etc/weft/cluster.ini" \
	"ExecStartPre=$bindir/weftd --check-config --config $prefix/etc/weft/cluster.ini"; do
	grep -qxF -- "$cmd --id %i" "$unit" ||
		{ grep '^Exec' "$unit"; echo "FAIL: no '$cmd --id %i'" >&2;
		  exit 1; }
done
echo "weftd@.service: ok (ExecStart=$bindir/weftd, $prefix/etc/weft/cluster.ini)"
# The unit as installed under this prefix, reading the test's cluster.
sed -e "s|=/[^ ]*/bin/weftd |=$bindir/weftd |" \
	-e "s|--config [^ ]*|--config $work/cluster.ini|" \
	-e "s|^User=.*|User=$(id -un)|" -e "s|^Group=.*|Group=$(id -gn)|" \
	"$unit" >"$work/weftd@.service"
pre=$(sed -n 's/^ExecStartPre=//p' "$work/weftd@.service" | sed 's/%i/n1/g')
# shellcheck disable=SC2086 # the unit's command line, split as systemd does
$pre >"$work/check-config.log" 2>&1 ||
	{ cat "$work/check-config.log"; echo "FAIL: $pre" >&2; exit 1; }
grep -q "configuration OK" "$work/check-config.log"
echo "weftd@.service ExecStartPre: ok ($(cat "$work/check-config.log"))"
if command -v systemd-analyze >/dev/null 2>&1; then
	cp "$work/weftd@.service" "$work/weftd@n1.service"
	systemd-analyze verify --man=no "$work/weftd@n1.service" \
		>"$work/verify.log" 2>&1 ||
		{ cat "$work/verify.log"; echo "FAIL: systemd-analyze" >&2;
		  exit 1; }
	echo "weftd@.service: systemd-analyze verify: ok"
else
	echo "weftd@.service: systemd-analyze is not installed: not verified"
fi

# The README's command, exactly, for every example program; then again
# with every warning on, so that they stay clean.
step "building the examples with the README's command"
examples_dir=$(cd "$consumer_dir/../../../examples" && pwd)
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
unset PKG_CONFIG_LIBDIR
count=0
for src in "$examples_dir"/*/*.c; do
	name=$(basename "$src" .c)
	# shellcheck disable=SC2046 # the README splits pkg-config's words too
	cc -std=c11 "$src" $(pkg-config --cflags --libs weft) \
		-o "$work/example-$name" ||
		{ echo "FAIL: $src does not build with the README's command" >&2;
		  exit 1; }
	# shellcheck disable=SC2046,SC2086
	"$cc" -std=c11 -Wall -Wextra -Werror $san_flags "$src" \
		$(pkg-config --cflags --libs weft) -o "$work/example-$name" ||
		{ echo "FAIL: $src has warnings" >&2; exit 1; }
	count=$((count + 1))
done
echo "examples: ok ($count built with cc -std=c11 ... \$(pkg-config --cflags --libs weft))"

# `make install` puts the man pages in place: a real page per function
# (generated from the headers, with python3), the section pages (scdoc).
step "the man pages"
mandir=$(find "$prefix" -type d -name man3 -path '*/man/*' | head -n 1)
mandir=${mandir%/man3}
if command -v python3 >/dev/null 2>&1; then
	page=$mandir/man3/weft_msvc_call.3
	[ -s "$page" ] ||
		{ echo "FAIL: man3/weft_msvc_call.3 is not installed" >&2; exit 1; }
	if grep -q '^\.so ' "$page" || ! grep -q '^\.SH ERRORS' "$page"; then
		echo "FAIL: man3/weft_msvc_call.3 is not the function's page" >&2
		exit 1
	fi
	if command -v man >/dev/null 2>&1 &&
		! MANPATH=$mandir man -P cat weft_msvc_call 2>/dev/null |
		grep -q 'WEFT_EBUSY'; then
		echo "FAIL: man weft_msvc_call does not find its page" >&2
		exit 1
	fi
fi
if command -v scdoc >/dev/null 2>&1; then
	for f in man8/weftd.8 man5/weft.conf.5 man7/weft.7 man1/weft-kv.1 \
		man1/weft-bench.1 man1/weft-gen-certs.1 man3/weft_msvc.3; do
		[ -s "$mandir/$f" ] ||
			{ echo "FAIL: $f is not installed" >&2; exit 1; }
	done
	echo "man: ok ($(find "$mandir" -type f | wc -l) files in $mandir)"
else
	echo "man: scdoc is not installed: the section pages were not built"
fi

step "documentation, examples and the sample configuration"
docdir=$prefix/share/doc/weft
for f in README.md GUIDE.md WEFTD.md STABILITY.md examples/discard/discard.c \
	examples/weftd/cluster-client.c examples/messaging/cluster.ini \
	cluster.ini.example; do
	[ -s "$docdir/$f" ] || { echo "FAIL: $docdir/$f is not installed" >&2;
		exit 1; }
done
"$bindir/weftd" --check-config --config "$docdir/cluster.ini.example" \
	--id n1 >"$work/sample.log" 2>&1 ||
	{ cat "$work/sample.log"; echo "FAIL: the sample configuration" >&2;
	  exit 1; }
echo "docs: ok ($(find "$docdir" -type f | wc -l) files in $docdir," \
	"the sample configuration passes weftd --check-config)"
