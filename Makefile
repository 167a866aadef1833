# attn — the front door. `make` builds into build/, `make run` runs the main
# job, `make test` runs every test. Both install what they need first.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all build run test test-cuda test-sanitize deps deps-test install clean bench bench-mpi

all: build

deps:
	@scripts/install-deps.sh build

deps-test:
	@scripts/install-deps.sh test

# Configure $(1) with tests $(2), every time (cheap when nothing changed):
# each target states what it needs, `make run` never needs the test packages.
# A failed configure removes its cache, so no later target mistakes the
# half-made folder for a good one.
configure = cmake -S . -B $(1) $(2) $(CMAKE_ARGS) || { rm -f $(1)/CMakeCache.txt; exit 1; }

build: deps
	@$(call configure,$(BUILD),-DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF)
	cmake --build $(BUILD) -j $(JOBS)

# The main job: train the tiny char-level GPT on Tiny Shakespeare (fetched
# by scripts/get-data.sh if missing), then print a sample from it.
RUN_DIR ?= runs/tiny
# A second `make run` continues (or, finished, just samples) the saved run
# instead of replacing it; `rm -r $(RUN_DIR)` starts over.
run: build
	@scripts/get-data.sh
	$(BUILD)/attn train --preset tiny --data data/tinyshakespeare.txt --out $(RUN_DIR) \
	  $$([ -e $(RUN_DIR)/train_state.safetensors ] && echo --resume)
	@echo "--- sample from $(RUN_DIR) ---"
	$(BUILD)/attn generate --checkpoint $(RUN_DIR) --max-new-tokens 500 --seed 1337

# The data the tests read (data/, from ../shared/data or its public home).
TEST_DATA = tinyshakespeare the-verdict gpt2 book

test: deps-test
	@scripts/get-data.sh $(TEST_DATA)
	@scripts/get-book.sh || echo "attn: without the book's code, book_ch67_fixtures skips" >&2
	@$(call configure,$(BUILD),-DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=ON)
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j 1; rc=$$?; scripts/skipped.sh $(BUILD); exit $$rc

# Only the GPU tests (tests/cuda/), on a machine with a CUDA device; they
# report "Skipped" elsewhere.
test-cuda: deps-test
	@$(call configure,$(BUILD),-DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=ON)
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j 1 -L cuda

# The suite again under AddressSanitizer + UndefinedBehaviorSanitizer (the
# Criterion binaries again at ATTN_SIMD=avx2 and generic only: avx512's run
# is make test's; book_ch67_fixtures runs only the book's code and torch).
test-sanitize: deps-test
	@scripts/get-data.sh $(TEST_DATA)
	@$(call configure,$(BUILD_ASAN),-DCMAKE_BUILD_TYPE=Debug -DATTN_SANITIZE=ON -DATTN_BUILD_TESTS=ON '-DATTN_TEST_SIMD_LEVELS=avx2;generic')
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -j 1 -E 'parity_live|install_consumer|book_ch67_fixtures'; \
	  rc=$$?; scripts/skipped.sh $(BUILD_ASAN); exit $$rc

# attn against PyTorch on the issue's attention cases (same run), then the
# nanoGPT-CPU training benchmark. Minutes; not part of `make test`.
bench: deps-test build
	bench/run.sh
	bench/train_nanogpt.sh $(BUILD)

# Data-parallel training: 1 process x 2 threads, --grad-accum 2 and
# mpirun -np 2 x 1 thread on nanogpt-cpu and seed004 (batch 8). Minutes.
bench-mpi: deps-test build
	bench/train_mpi.sh $(BUILD)

# `make install PREFIX=DIR` installs under DIR (default CMake's, /usr/local);
# DESTDIR=STAGE puts that tree under STAGE instead (packaging).
PREFIX ?=
# GPT-2's vocabulary files go with it (PREFIX/share/attn/gpt2), fetched here.
install: build
	@scripts/get-data.sh gpt2
	$(if $(DESTDIR),DESTDIR='$(DESTDIR)') cmake --install $(BUILD) $(if $(PREFIX),--prefix '$(PREFIX)')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)

# Only sample from the model the last `make run` trained (no training, no
# data); fails with a clear message when there is none. SAMPLE_ARGS adds
# `attn generate` options, e.g. make sample SAMPLE_ARGS='--seed 7 --prompt ROMEO:'.
SAMPLE_ARGS ?= --max-new-tokens 500 --seed 1337
.PHONY: sample
sample: build
	@test -f $(RUN_DIR)/model.safetensors || { \
	  echo "make sample: no trained model in $(RUN_DIR)/ (model.safetensors); run 'make run' first" >&2; \
	  exit 1; }
	$(BUILD)/attn generate --checkpoint $(RUN_DIR) $(SAMPLE_ARGS)
