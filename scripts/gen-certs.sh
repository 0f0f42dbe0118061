#!/bin/sh
# SPDX-License-Identifier: MIT
# weft-gen-certs: a cluster CA and one certificate per node, with the
# openssl command line tool, for weft's mutual TLS (weft-gen-certs(1)).
# Installed as weft-gen-certs; scripts/gen-certs.sh in the source tree.
#
#   weft-gen-certs [options] OUTDIR [NODE-ID...]
#   weft-gen-certs --help | --version
#
# OUTDIR gets:
#   ca.crt, ca.key     the cluster CA (made once; reused when present, so
#                      nodes can be added later). Keep ca.key offline.
#   ID.crt, ID.key     per node: subjectAltName DNS:ID and CN=ID, usable as
#                      TLS server and client (a node accepts and dials).
#
# Options:
#   -c FILE            also every [node ID] section of a cluster config
#   -d DAYS            validity of new certificates (default 825)
#   --ca-days DAYS     validity of a new CA (default 3650)
#   --rsa              RSA 3072 keys instead of EC P-256
#   --client ID        ID.crt/.key for a client that is not a member
#                      (TLS client use only)
# For tests:
#   --other-ca ID      ID.crt/.key signed by a second CA, other-ca.crt, that
#                      the cluster does not trust
#   --expired ID       ID.crt/.key signed by the cluster CA, expired a year
#                      ago
#
# Then, in the cluster config of node ID:
#   [tls]
#   mode = all
#   cert = OUTDIR/ID.crt
#   key = OUTDIR/ID.key
#   ca = OUTDIR/ca.crt
set -eu

# The build writes the release here when it installs the script; in the
# source tree, <weft/core.h> next to it says.
version='@PROJECT_VERSION@'
me=$(basename "$0")

days=825
ca_days=3650
keytype=ec
config=
out=
nodes=
clients=
others=
expired=

die() {
	echo "$me: $*" >&2
	exit 2
}

print_version() {
	case $version in
	@*)
		h=$(dirname "$0")/../core/include/weft/core.h
		version=$(sed -n 's/^#define WEFT_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' \
			"$h" 2>/dev/null | paste -sd. -)
		;;
	esac
	echo "weft-gen-certs ${version:-unknown}"
	exit 0
}

usage() {
	sed -n '3,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit "${1:-2}"
}

check_id() {
	case "$1" in
	'' | *[!A-Za-z0-9_.-]*) die "bad id '$1' (1-63 of A-Z a-z 0-9 _ . -)" ;;
	esac
	[ "${#1}" -le 63 ] || die "id '$1' is longer than 63 bytes"
}

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--version) print_version ;;
	-c) [ $# -ge 2 ] || usage; config=$2; shift 2 ;;
	-d) [ $# -ge 2 ] || usage; days=$2; shift 2 ;;
	--ca-days) [ $# -ge 2 ] || usage; ca_days=$2; shift 2 ;;
	--rsa) keytype=rsa; shift ;;
	--client) [ $# -ge 2 ] || usage; check_id "$2"; clients="$clients $2"; shift 2 ;;
	--other-ca) [ $# -ge 2 ] || usage; check_id "$2"; others="$others $2"; shift 2 ;;
	--expired) [ $# -ge 2 ] || usage; check_id "$2"; expired="$expired $2"; shift 2 ;;
	-*) die "unknown option $1" ;;
	*)
		if [ -z "$out" ]; then out=$1; else check_id "$1"; nodes="$nodes $1"; fi
		shift
		;;
	esac
done
[ -n "$out" ] || usage
command -v openssl >/dev/null 2>&1 || die "needs the openssl command"
if [ -n "$config" ]; then
	[ -r "$config" ] || die "cannot read $config"
	# Words, not lines: ids have no spaces, and this trims them.
	# shellcheck disable=SC2013
	for id in $(sed -n 's/^[[:space:]]*\[node[[:space:]][[:space:]]*\([^]]*\)\].*/\1/p' "$config"); do
		check_id "$id"
		nodes="$nodes $id"
	done
fi
[ -n "$nodes$clients$others$expired" ] || die "no node ids (give some, or -c FILE)"

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 077

newkey() {
	if [ "$keytype" = rsa ]; then
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out "$1" 2>/dev/null
	else
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
	fi
}

# make_ca NAME SUBJECT: NAME.crt and NAME.key in OUTDIR, unless present.
make_ca() {
	if [ -f "$out/$1.crt" ] && [ -f "$out/$1.key" ]; then
		return
	fi
	newkey "$out/$1.key"
	openssl req -x509 -new -key "$out/$1.key" -subj "/CN=$2" -sha256 \
		-days "$ca_days" -out "$out/$1.crt" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-addext "subjectKeyIdentifier=hash"
	chmod 644 "$out/$1.crt"
	echo "made $out/$1.crt (keep $out/$1.key offline)"
}

# issue CA ID USAGE [START END]: ID.crt/.key signed by CA, for USAGE
# (extendedKeyUsage), valid -d days or from START to END (YYYYMMDDHHMMSSZ).
issue() {
	ca=$1 id=$2 usage=$3
	newkey "$out/$id.key"
	openssl req -new -key "$out/$id.key" -subj "/CN=$id" -out "$work/$id.csr"
	cat >"$work/ca.cnf" <<-EOF
		[ca]
		default_ca = weft
		[weft]
		database = $work/index.txt
		new_certs_dir = $work
		serial = $work/serial
		default_md = sha256
		policy = any
		unique_subject = no
		copy_extensions = none
		[any]
		commonName = supplied
		[leaf]
		basicConstraints = critical,CA:FALSE
		keyUsage = critical,digitalSignature,keyEncipherment
		extendedKeyUsage = $usage
		subjectAltName = DNS:$id
		subjectKeyIdentifier = hash
		authorityKeyIdentifier = keyid
	EOF
	: >"$work/index.txt"
	openssl rand -hex 16 >"$work/serial"
	if [ $# -ge 5 ]; then
		validity="-startdate $4 -enddate $5"
	else
		validity="-days $days"
	fi
	# shellcheck disable=SC2086 # validity is two words on purpose
	openssl ca -batch -config "$work/ca.cnf" -cert "$out/$ca.crt" \
		-keyfile "$out/$ca.key" -in "$work/$id.csr" -out "$out/$id.crt" \
		-extensions leaf -notext $validity 2>"$work/ca.log" ||
		{ cat "$work/ca.log" >&2; die "signing $id failed"; }
	chmod 644 "$out/$id.crt"
	echo "made $out/$id.crt and $out/$id.key"
}

make_ca ca "weft cluster CA"
for id in $nodes; do
	issue ca "$id" serverAuth,clientAuth
done
for id in $clients; do
	issue ca "$id" clientAuth
done
for id in $expired; do
	last_year=$(($(date -u +%Y) - 1))
	issue ca "$id" serverAuth,clientAuth "${last_year}0101000000Z" \
		"${last_year}0201000000Z"
done
if [ -n "$others" ]; then
	make_ca other-ca "a CA the cluster does not trust"
	for id in $others; do
		issue other-ca "$id" serverAuth,clientAuth
	done
fi
