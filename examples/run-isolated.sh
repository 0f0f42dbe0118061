#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-isolated.sh SCRIPT ARGS...: runs an example's script in a network
# namespace of its own (only a loopback, which nothing else uses), so that
# the fixed ports the guide's configurations name cannot clash with
# anything on the machine. Where namespaces cannot be made (no root, or a
# container that forbids them) it runs the script directly.
set -euo pipefail

if [ -z "${WEFT_ISOLATED:-}" ] &&
	unshare -n true 2>/dev/null; then
	export WEFT_ISOLATED=1
	exec unshare -n bash -c 'ip link set lo up 2>/dev/null ||
		{ echo "run-isolated: no loopback in the namespace" >&2;
		  exit 1; }; exec bash "$@"' run-isolated "$@"
fi
exec bash "$@"
