#!/usr/bin/env bash
# install-deps.sh: install the Debian packages weft needs to build and test.
#
# Quiet when nothing is missing. As root it installs only what is missing;
# otherwise it prints the apt-get line to run and exits 1.
set -euo pipefail

packages=(
	build-essential # gcc with its ASan/UBSan/TSan runtimes, make
	cmake
	pkg-config
	libevent-dev    # libevent_core, libevent_pthreads, libevent_openssl
	libmsgpack-dev  # msgpack-c (C API)
	libssl-dev
	openssl         # the CLI makes test certificates
	libcmocka-dev
	libinih-dev
	liburcu-dev     # wfcqueue, for the hand-off queue benchmark
	gnuplot-nox     # benchmark plots
	iproute2        # ss/ip for network tests and benchmarks
	nftables        # nft: the process-fault tests' partitions (as root)
	clang           # libFuzzer targets
	libclang-rt-14-dev # clang's sanitizer and fuzzer runtimes
	clang-format    # make format-check
)

missing=()
for pkg in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null ||
		true)
	if [ "$status" != "installed" ]; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "weft: missing Debian packages: ${missing[*]}" >&2
	echo "Install them with:" >&2
	echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi

echo "weft: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
