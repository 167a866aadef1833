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

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The main job: train the tiny char-level GPT on Tiny Shakespeare (fetched
# by scripts/get-data.sh if missing), then print a sample from it.
RUN_DIR ?= runs/tiny
run: build
	@scripts/get-data.sh
	./$(BUILD)/attn train --preset tiny --data data/tinyshakespeare.txt --out $(RUN_DIR)
	@echo "--- sample from $(RUN_DIR) ---"
	./$(BUILD)/attn generate --checkpoint $(RUN_DIR) --max-new-tokens 500 --seed 1337

# Re-configure so a build dir made before deps-test installed MPI picks it up.
test: deps-test $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) > /dev/null
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j 1

# Only the GPU tests (tests/cuda/), on a machine with a CUDA device; they
# report "Skipped" elsewhere.
test-cuda: deps-test $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j 1 -L cuda

# The suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-sanitize: deps-test
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DATTN_SANITIZE=ON
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -j 1 -E 'parity_live|install_consumer'

# attn against PyTorch on the issue's attention cases (same run), then the
# nanoGPT-CPU training benchmark. Minutes; not part of `make test`.
bench: deps-test build
	bench/run.sh
	bench/train_nanogpt.sh $(BUILD)

# Data-parallel training: 1 process x 2 threads, --grad-accum 2 and
# mpirun -np 2 x 1 thread on nanogpt-cpu and seed004 (batch 8). Minutes.
bench-mpi: deps-test build
	bench/train_mpi.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
