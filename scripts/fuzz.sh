#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuzz.sh [TARGET...]: builds the libFuzzer targets of tests/fuzz/ with
# clang, AddressSanitizer and UBSan in build-fuzz/, then fuzzes each one
# for FUZZ_SECONDS (default 60), starting from its committed corpus
# (tests/fuzz/corpus/TARGET/). What a run finds stays in
# build-fuzz/fuzz-corpus/TARGET/; a crash, a sanitizer report, a leak, a
# timeout or a broken allocation bound is written to
# build-fuzz/fuzz-artifacts/ and fails the run (copy the file into the
# corpus once the bug is fixed: it is then replayed by every ctest run).
#
#   make fuzz FUZZ_SECONDS=600        every target for 10 minutes
#   scripts/fuzz.sh conn envelope     two of them
#
# Environment: FUZZ_SECONDS; FUZZ_JOBS (targets fuzzed at once, default
# 1); FUZZ_BUILD_DIR (build-fuzz); FUZZ_EXPECT_CRASH (targets whose crash
# is reported but does not fail the run: a bug known and being fixed).
# Prints one line per target: executions, executions per second, result.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
jobs=${FUZZ_JOBS:-1}
expect_crash=" ${FUZZ_EXPECT_CRASH:-} "
all=(frame msgpack handshake envelope kv_wire config load metrics_http conn
	decompress chunk)
targets=("${@:-${all[@]}}")

CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug \
	-DCMAKE_C_FLAGS_DEBUG="-g -O1" -DWEFT_FUZZ=ON \
	-DWEFT_SANITIZER=address,undefined -DWEFT_BUILD_BENCH=OFF \
	-DWEFT_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target weft_fuzz_targets >/dev/null
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts" "$build/fuzz-logs"

# fuzz_one TARGET: one libFuzzer run; its log in fuzz-logs/TARGET.log.
fuzz_one() {
	local t=$1

	mkdir -p "$build/fuzz-corpus/$t"
	ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" \
		-print_final_stats=1 -timeout=30 -rss_limit_mb=2560 \
		-artifact_prefix="$build/fuzz-artifacts/$t-" \
		"$build/fuzz-corpus/$t" "tests/fuzz/corpus/$t" \
		>"$build/fuzz-logs/$t.log" 2>&1
}

# report TARGET STATUS: the target's line; returns 1 for a failure that
# counts.
report() {
	local t=$1 status=$2 log="$build/fuzz-logs/$1.log" runs rate result

	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" |
		tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" |
		tail -n 1)
	if [ "$status" -eq 0 ]; then
		result=ok
	elif [[ $expect_crash == *" $t "* ]]; then
		result="crashed (expected: FUZZ_EXPECT_CRASH)"
	else
		result="FAILED (see $log)"
	fi
	printf 'fuzz %-13s %10s runs %7s/s  %s\n' "$t" "${runs:-?}" \
		"${rate:-?}" "$result"
	if [ "$status" -ne 0 ]; then
		grep -m 3 -E 'ERROR: |fuzz: |SUMMARY: ' "$log" | sed 's/^/    /'
		[[ $expect_crash == *" $t "* ]] || return 1
	fi
	return 0
}

declare -A pids
failed=0
queue=("${targets[@]}")
running=()
while [ "${#queue[@]}" -gt 0 ] || [ "${#running[@]}" -gt 0 ]; do
	while [ "${#queue[@]}" -gt 0 ] && [ "${#running[@]}" -lt "$jobs" ]; do
		t=${queue[0]}
		queue=("${queue[@]:1}")
		fuzz_one "$t" &
		pids[$t]=$!
		running+=("$t")
	done
	# Wait for the first target started; the others go on meanwhile.
	t=${running[0]}
	running=("${running[@]:1}")
	status=0
	wait "${pids[$t]}" || status=$?
	report "$t" "$status" || failed=1
done
exit "$failed"
