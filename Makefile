# gpusched - top-level entry points. See README.md.
#   make demo   install what is missing, build, run the main job
#   make test   install, build, run unit + integration tests, then unit tests under ASan+UBSan
#   make bench  throughput benchmark and the FGD experiment, numbers printed
#   make fuzz   libFuzzer targets (clang), each run briefly on its corpus

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
PYTHON ?= /usr/bin/python3
FUZZ_SECONDS ?= 20
GPUSCHED = $(BUILD)/gpusched
TRACE_DIR ?= $(abspath ../shared/traces/openb)

.PHONY: all deps build demo test unit integration asan bench fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(GPUSCHED)

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

integration: build
	GPUSCHED_BIN=$(abspath $(GPUSCHED)) GS_TRACE_DIR=$(TRACE_DIR) $(PYTHON) -m pytest -q tests/integration tests/kube

asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGS_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

test: unit integration asan

bench: build
	@bash bench/run.sh $(GPUSCHED)

fuzz:
	@bash scripts/install-deps.sh --fuzz
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGS_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@set -e; for t in $(FUZZ_BUILD)/tests/fuzz_*; do \
	  name=$$(basename $$t); short=$${name#fuzz_}; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$short; \
	  echo "fuzz: $$name for $(FUZZ_SECONDS)s"; \
	  $$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=0 $(FUZZ_BUILD)/corpus/$$short tests/fuzz/corpus/$$short; \
	done

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
