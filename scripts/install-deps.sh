#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# install-deps.sh [--all]: install the Debian packages weft needs.
#
# Without options: what building weft and running its tests need (`make
# deps`, and so `make test` and `make run`). With --all: also the tools of
# the optional targets and checks, which CI runs:
#   clang-format             make format, make format-check
#   gnuplot-nox              weft-bench --plot FILE.png (an SVG needs nothing)
#   clang, libclang-rt-14-dev  the libFuzzer targets (-DWEFT_FUZZ=ON)
#   liburcu-dev              weft-queue-bench's comparison with liburcu
#   libsystemd-dev           the journal log sink (log_format = journal;
#                            CMake WEFT_HAVE_SYSTEMD)
#   nftables                 the process-fault tests' partitions (as root)
#   python3-yaml             the contrib check (Kubernetes manifests, alert
#                            rules and dashboard against weftd)
#   dpkg-dev, debhelper,     the Debian packages: building them (debian/)
#   fakeroot, lintian        and checking them (scripts/deb-check.sh, make deb)
#   promtool                 the metrics test (promtool check metrics): taken
#                            out of Debian's prometheus package, which would
#                            otherwise bring a whole Prometheus server
# Each of these is optional: without it the target says what is missing, and
# the test that needs it is skipped with the reason.
#
# Quiet when nothing is missing. As root it installs only what is missing;
# otherwise it prints the commands to run and exits 1.
set -euo pipefail

required=(
	build-essential # gcc and g++ with their ASan/UBSan/TSan runtimes, make
	cmake
	pkg-config
	libevent-dev   # libevent_core, _pthreads, _openssl, _extra (evdns, evhttp)
	libmsgpack-dev # msgpack-c (C API)
	libssl-dev
	openssl        # the CLI makes test certificates, and weft-gen-certs
	libcmocka-dev
	libinih-dev
	liblz4-dev     # the compression codec: LZ4 and zstd
	libzstd-dev
	scdoc          # the man pages (docs/man/*.scd)
	groff-base     # renders them in the man page test
	iproute2       # ip, for the network namespace test (skipped elsewhere)
	libfaketime    # shifts one weftd's clock in test_weftd_clock
	curl           # the fault scripts read a node's /metrics
	libc-ares-dev  # DNS SRV discovery (services/discovery, weftd)
	unbound        # the DNS server the discovery tests start on loopback
)
optional=(
	clang-format
	gnuplot-nox
	clang
	libclang-rt-14-dev
	liburcu-dev
	libsystemd-dev
	nftables
	python3-yaml
	dpkg-dev
	debhelper
	fakeroot
	lintian
)

all=false
case ${1:-} in
--all) all=true ;;
"") ;;
*)
	echo "usage: $0 [--all]" >&2
	exit 2
	;;
esac

packages=("${required[@]}")
if $all; then
	packages+=("${optional[@]}")
fi

missing=()
for pkg in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null ||
		true)
	if [ "$status" != "installed" ]; then
		missing+=("$pkg")
	fi
done
need_promtool=false
if $all && ! command -v promtool >/dev/null 2>&1; then
	need_promtool=true
fi

if [ "${#missing[@]}" -eq 0 ] && ! $need_promtool; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	if [ "${#missing[@]}" -ne 0 ]; then
		echo "weft: missing Debian packages: ${missing[*]}" >&2
		echo "Install them with:" >&2
		echo "  sudo apt-get install -y --no-install-recommends" \
			"${missing[*]}" >&2
	fi
	if $need_promtool; then
		echo "weft: promtool is missing; run this script as root to" \
			"take it from Debian's prometheus package" >&2
	fi
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
updated=false
if [ "${#missing[@]}" -ne 0 ]; then
	echo "weft: installing ${missing[*]}" >&2
	apt-get update -qq
	updated=true
	apt-get install -y -qq --no-install-recommends "${missing[@]}" \
		</dev/null
fi

# promtool alone: download the prometheus package (apt-get download, no
# install, so no server, no service and none of its web dependencies) and
# keep its promtool binary.
if $need_promtool; then
	echo "weft: installing promtool (from Debian's prometheus package)" >&2
	$updated || apt-get update -qq
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# apt-get download writes as the _apt user where it can.
	chown _apt "$tmp" 2>/dev/null || chmod 777 "$tmp"
	(cd "$tmp" && apt-get download -qq prometheus </dev/null)
	dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb |
		tar -x -C "$tmp" ./usr/bin/promtool
	install -m 755 "$tmp/usr/bin/promtool" /usr/local/bin/promtool
	promtool --version 2>&1 | head -n 1 >&2
fi
