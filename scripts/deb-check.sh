#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deb-check.sh [OUTDIR]: builds weft's Debian packages from this tree and
# checks them as a user of the packages would, on this machine:
#   1. copies the tree (tracked and new files, not build directories) and
#      builds the binary packages in it with dpkg-buildpackage
#      (DEB_BUILD_OPTIONS="nocheck parallel=2" unless set);
#   2. runs lintian on them: an error or a warning fails;
#   3. installs them with apt-get install ./*.deb;
#   4. builds the install test's consumer against the installed libweft-dev
#      with pkg-config and with find_package(weft), and runs it; builds
#      every installed example with pkg-config;
#   5. runs the packaged weftd as the packaged user weft on a generated
#      one-node configuration: --check-config, then a start on loopback,
#      /livez and weft-kv ping, put and get against it, then SIGTERM;
#   6. purges the packages again, with whatever apt-get installed for them
#      and the user weft if the package made it, leaving the machine as it
#      was (also when a step fails).
# The .deb files are kept in OUTDIR if given (`make deb` gives build/deb).
# Root only (it installs packages): CI runs it on a throwaway machine.
# Exits 0 on success, 1 on failure, 77 when it cannot run here (not root,
# no dpkg-buildpackage, debhelper or lintian, or weft packages installed
# already, which it would not remove).
set -euo pipefail

cd "$(dirname "$0")/.."
src=$(pwd)
outdir=${1:-}
packages=(libweft0.1 libweft-dev weftd weft-tools)

skip() {
	echo "SKIP: $*"
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "deb-check.sh installs packages: run it as root"
for tool in dpkg-buildpackage dh lintian apt-get; do
	command -v "$tool" >/dev/null 2>&1 ||
		skip "$tool not found (scripts/install-deps.sh --all installs it)"
done
for pkg in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null ||
		true)
	if [ -n "$status" ] && [ "$status" != "not-installed" ] &&
		[ "$status" != "config-files" ]; then
		skip "$pkg is installed already; this check installs and" \
			"purges it"
	fi
done

started=$(date +%s)
step_started=$started
step() {
	local now

	now=$(date +%s)
	echo "-- $* (at $((now - started)) s)"
	step_started=$now
}
# took NAME: how long the step that ends here took.
took() {
	echo "   $1: $(($(date +%s) - step_started)) s"
}

work=$(mktemp -d)
# apt-get reads the .deb files as the _apt user, weftd its configuration
# as weft: the directory must be readable by others.
chmod 755 "$work"
dpkg-query -W -f='${Package}\n' | sort >"$work/before.txt"
user_existed=false
getent passwd weft >/dev/null && user_existed=true
weftd_pid=

cleanup() {
	local rv=$? added

	set +e
	if [ -n "$weftd_pid" ] && kill -0 "$weftd_pid" 2>/dev/null; then
		kill -TERM "$weftd_pid"
		wait "$weftd_pid" 2>/dev/null
	fi
	# Every package the installation added: ours and their dependencies.
	dpkg-query -W -f='${Package}\n' | sort >"$work/after.txt"
	mapfile -t added < <(comm -13 "$work/before.txt" "$work/after.txt")
	if [ "${#added[@]}" -gt 0 ]; then
		echo "-- purging ${added[*]}"
		apt-get purge -y -qq "${added[@]}" >"$work/purge.log" 2>&1 ||
			{ cat "$work/purge.log"; rv=1; }
	fi
	if ! $user_existed && getent passwd weft >/dev/null; then
		deluser --quiet --system weft >/dev/null 2>&1 ||
			userdel weft || rv=1
		getent group weft >/dev/null && groupdel weft
	fi
	rm -rf "$work"
	if [ "$rv" -eq 0 ]; then
		echo "deb-check: ok ($(($(date +%s) - started)) s)"
	else
		echo "deb-check: FAILED after $(($(date +%s) - started)) s" >&2
	fi
	exit "$rv"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
step "copying the tree"
tree=$work/weft-$version
mkdir -p "$tree"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	# Tracked and new files, as they are now; not what .gitignore keeps
	# out (build directories).
	# shellcheck disable=SC2016 # $f is the inner shell's
	git -C "$src" ls-files -z --cached --others --exclude-standard |
		(cd "$src" && xargs -0 sh -c \
			'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
		tar -C "$src" --null -T - -cf - | tar -C "$tree" -xf -
else
	tar -C "$src" --exclude='./build*' --exclude='./obj-*' -cf - . |
		tar -C "$tree" -xf -
fi

step "building the packages (dpkg-buildpackage -us -uc -b)"
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-nocheck parallel=2}
echo "   DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS"
(cd "$tree" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
	{ tail -n 60 "$work/build.log"; fail "dpkg-buildpackage"; }
debs=()
for pkg in "${packages[@]}"; do
	deb=$(find "$work" -maxdepth 1 -name "${pkg}_${version}_*.deb")
	[ -n "$deb" ] || fail "no ${pkg}_${version}_*.deb was built"
	debs+=("$deb")
done
# shellcheck disable=SC2012 # for reading only
ls -l "$work"/*.deb | sed 's/^/   /'
if [ -n "$outdir" ]; then
	mkdir -p "$outdir"
	cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$outdir/"
	echo "   copied to $outdir"
fi
took "package build"

step "lintian"
changes=$(find "$work" -maxdepth 1 -name '*.changes')
lintian --fail-on error,warning --display-info "$changes" \
	>"$work/lintian.log" 2>&1 ||
	{ cat "$work/lintian.log"; fail "lintian"; }
echo "   $(grep -c . "$work/lintian.log" || true) line(s) of lintian output"
sed 's/^/   /' "$work/lintian.log"
took "lintian"

step "installing them (apt-get install ./*.deb)"
apt-get install -y -qq --no-install-recommends "${debs[@]}" \
	>"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; fail "apt-get install"; }
for pkg in "${packages[@]}"; do
	dpkg-query -W -f='   ${Package} ${Version} ${db:Status-Status}\n' "$pkg"
done
getent passwd weft >/dev/null || fail "weftd made no user weft"
[ -f /lib/systemd/system/weftd@.service ] ||
	fail "weftd@.service is not installed"
[ -f /usr/share/doc/weftd/examples/cluster.ini.example ] ||
	fail "no sample configuration in /usr/share/doc/weftd/examples"
took "install"

step "building against the installed libweft-dev"
consumer=$src/tests/install/consumer
pc_flags=$(pkg-config --cflags --libs weft)
echo "   pkg-config --cflags --libs weft: $pc_flags"
# shellcheck disable=SC2086 # pkg-config's words, split as the guide does
cc -std=c11 -Wall -Wextra -Werror "$consumer/main.c" $pc_flags \
	-o "$work/consumer-pc"
out=$("$work/consumer-pc")
[ "$out" = "protocol error" ] || fail "consumer (pkg-config) printed '$out'"
if readelf -d "$work/consumer-pc" | grep -qE 'RPATH|RUNPATH'; then
	fail "a program built against the package carries an RPATH"
fi
echo "   pkg-config consumer: ok ($out)"
if ! { cmake -S "$consumer" -B "$work/consumer-cmake" &&
	cmake --build "$work/consumer-cmake"; } >"$work/cmake.log" 2>&1; then
	cat "$work/cmake.log"
	fail "the find_package(weft) consumer"
fi
for prog in consumer consumer_static consumer_sim; do
	out=$("$work/consumer-cmake/$prog" 2>/dev/null)
	[ "$out" = "protocol error" ] || fail "$prog printed '$out'"
done
echo "   find_package(weft) consumers (shared, static, sim): ok"
count=0
for example in /usr/share/doc/libweft-dev/examples/*/*.c; do
	# shellcheck disable=SC2086
	cc -std=c11 "$example" $pc_flags -o "$work/example" ||
		fail "$example does not build against the package"
	count=$((count + 1))
done
[ "$count" -gt 0 ] || fail "no examples in /usr/share/doc/libweft-dev"
echo "   $count installed examples build"
took "consumer builds"

step "running the packaged weftd"
# Two free loopback ports: the node's and its metrics endpoint's, below
# the ephemeral range (32768 and up), which other programs' connections
# use, and not used by any socket now.
free_port() {
	local port

	while :; do
		port=$((20000 + RANDOM % 12000))
		if ! ss -Htan "( sport = :$port )" 2>/dev/null | grep -q .; then
			echo "$port"
			return
		fi
	done
}
port=$(free_port)
mport=$(free_port)
[ "$port" != "$mport" ] || mport=$((port + 1))
config=$work/cluster.ini
cat >"$config" <<EOF
[cluster]
name = deb-check
[node n1]
host = 127.0.0.1
port = $port
[weftd]
metrics_listen = 127.0.0.1:$mport
EOF
chmod 644 "$config"
# As the packaged user weft, as weftd@.service runs it (setpriv execs weftd
# itself: a signal reaches it, not a wrapper).
as_weft=(setpriv --reuid=weft --regid=weft --clear-groups)
"${as_weft[@]}" /usr/bin/weftd --check-config --config "$config" --id n1 ||
	fail "weftd --check-config"
if command -v systemd-analyze >/dev/null 2>&1; then
	cp /lib/systemd/system/weftd@.service "$work/weftd@n1.service"
	systemd-analyze verify --man=no "$work/weftd@n1.service" ||
		fail "systemd-analyze verify weftd@.service"
	echo "   systemd-analyze verify weftd@.service: ok"
fi
"${as_weft[@]}" /usr/bin/weftd --config "$config" --id n1 \
	>"$work/weftd.log" 2>&1 &
weftd_pid=$!
for _ in $(seq 100); do
	grep -q "weftd ready" "$work/weftd.log" && break
	kill -0 "$weftd_pid" 2>/dev/null ||
		{ cat "$work/weftd.log"; fail "weftd exited"; }
	sleep 0.1
done
grep -q "weftd ready" "$work/weftd.log" ||
	{ cat "$work/weftd.log"; fail "weftd is not ready after 10 s"; }
grep "weftd ready" "$work/weftd.log" | sed 's/^/   /'
livez=$(curl -fsS "http://127.0.0.1:$mport/livez") ||
	fail "/livez did not answer"
echo "   /livez: $livez"
weft-kv --config "$config" ping | sed 's/^/   weft-kv ping: /'
weft-kv --config "$config" put deb-check ok >/dev/null
out=$(weft-kv --config "$config" get deb-check)
[ "$out" = ok ] || fail "weft-kv get printed '$out'"
echo "   weft-kv put, get: ok"
kill -TERM "$weftd_pid"
rv=0
wait "$weftd_pid" || rv=$?
weftd_pid=
[ "$rv" -eq 0 ] || { cat "$work/weftd.log"; fail "weftd exited with $rv"; }
echo "   SIGTERM: weftd exited 0"
took "weftd"
step "purging the packages"
