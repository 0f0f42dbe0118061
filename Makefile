# SPDX-License-Identifier: MIT
# Makefile: entry points that wrap CMake. `make run` runs the main job (the
# benchmarks), `make test` builds and runs every test. See README.md.

NPROC := $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
PREFIX ?= /usr/local
# Extra -D options for every configure, e.g. CMAKE_ARGS=-DWEFT_WERROR=OFF.
CMAKE_ARGS ?=
# ctest runs two tests at a time: the machine has two cores.
CTEST_JOBS ?= 2

# Sanitizer builds keep assertions (Debug) but optimise a little, so the
# network tests stay fast under instrumentation.
SAN_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1"

# A test that trips a sanitizer fails at once, with a stack trace.
SAN_ENV := ASAN_OPTIONS=halt_on_error=1:print_stacktrace=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
TSAN_SUPP := $(wildcard $(CURDIR)/tests/tsan.supp)
TSAN_ENV := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1$(if \
	$(TSAN_SUPP),:suppressions=$(TSAN_SUPP))

# gcc's ThreadSanitizer aborts with "unexpected memory mapping" on kernels
# that randomise mmap with more than 28 bits (vm.mmap_rnd_bits = 32 on some
# recent distributions). Running the tests without address randomisation
# avoids it and changes nothing else, so use setarch -R wherever it works.
TSAN_WRAP := $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && \
	echo setarch $$(uname -m) -R)

.PHONY: all deps deps-all configure build test test-slow test-asan \
	test-tsan format-check format install deb run clean fuzz soak

all: build

# What building and testing need; deps-all adds the optional tools
# (clang-format, gnuplot, clang for fuzzing, liburcu, promtool).
deps:
	@scripts/install-deps.sh

deps-all:
	@scripts/install-deps.sh --all

configure:
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		$(CMAKE_ARGS)

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j$(NPROC)

# Tests labelled "slow" (the long fault runs) are left to make test-slow.
test: deps build
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j$(CTEST_JOBS) \
		-LE slow

test-slow: deps build
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -L slow

test-asan: deps
	$(CMAKE) -S . -B $(ASAN_DIR) $(SAN_CMAKE_ARGS) \
		-DWEFT_SANITIZER=address,undefined $(CMAKE_ARGS)
	$(CMAKE) --build $(ASAN_DIR) -j$(NPROC)
	$(SAN_ENV) $(CTEST) --test-dir $(ASAN_DIR) --output-on-failure \
		-j$(CTEST_JOBS) -LE slow

# A failing TSan test runs once more before it fails the run: OpenSSL's
# uninstrumented internals (see tests/tsan.supp) now and then still yield a
# report TSan cannot order. The first report stays in the output, to read.
test-tsan: deps
	$(CMAKE) -S . -B $(TSAN_DIR) $(SAN_CMAKE_ARGS) \
		-DWEFT_SANITIZER=thread $(CMAKE_ARGS)
	$(CMAKE) --build $(TSAN_DIR) -j$(NPROC)
	$(TSAN_ENV) $(TSAN_WRAP) $(CTEST) --test-dir $(TSAN_DIR) \
		--output-on-failure -j$(CTEST_JOBS) -L threaded -LE slow \
		--repeat until-pass:2

# Fuzzing: every libFuzzer target of tests/fuzz/ for FUZZ_SECONDS each,
# built with clang, ASan and UBSan in build-fuzz/ (scripts/fuzz.sh).
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
FUZZ_EXPECT_CRASH ?=

fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) \
		FUZZ_EXPECT_CRASH="$(FUZZ_EXPECT_CRASH)" scripts/fuzz.sh

# The message-ledger burn test for as long as asked, with every fault kind
# (SOAK_FAULTS narrows them: delay,stall,corrupt,drop,pause,restart);
# WEFT_SIM_SEED=0x... replays a failed run's fault schedule.
SOAK_SECONDS ?= 600
SOAK_FAULTS ?= all

soak: deps build
	WEFT_BURN_SECONDS=$(SOAK_SECONDS) WEFT_BURN_FAULTS=$(SOAK_FAULTS) \
		$(BUILD_DIR)/tests/sim/test_burn

# Every C file in the repository (tracked, or new and not ignored).
FORMAT_FILES = $(shell git ls-files --cached --others --exclude-standard \
	'*.c' '*.h' 2>/dev/null || find . -path './build*' -prune -o \
	\( -name '*.c' -o -name '*.h' \) -print)

# clang-format is optional: only these two targets need it.
CLANG_FORMAT ?= clang-format
NEED_CLANG_FORMAT = @command -v $(CLANG_FORMAT) >/dev/null 2>&1 || { \
	echo "make $@: $(CLANG_FORMAT) is not installed (Debian package" \
		"clang-format; make deps-all installs it)" >&2; exit 1; }

format-check:
	$(NEED_CLANG_FORMAT)
	@$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES)

format:
	$(NEED_CLANG_FORMAT)
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

# The unit, weft.pc and the RUNPATHs follow PREFIX (see "Installing" in
# README.md): no ldconfig or LD_LIBRARY_PATH needed.
install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)

# The Debian packages (debian/), built from a copy of the tree into
# $(DEB_DIR) and checked: lintian, installed, built against, weftd started,
# then purged again (scripts/deb-check.sh: root only, it installs them).
DEB_DIR ?= $(BUILD_DIR)/deb

deb:
	scripts/deb-check.sh $(DEB_DIR)

# The main job lives in one script, so it can change without this file.
# The main job. The build's own output goes to a log, so that the tables
# come first; a failed build shows the end of it.
run: deps
	@mkdir -p $(BUILD_DIR)
	@echo "weft: building $(BUILD_DIR)/ (its output: $(BUILD_DIR)/build.log)"
	@$(MAKE) --no-print-directory build >$(BUILD_DIR)/build.log 2>&1 || \
		{ tail -n 30 $(BUILD_DIR)/build.log; exit 1; }
	@scripts/run-main.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) build-fuzz
