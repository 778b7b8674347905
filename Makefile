# Front door. `make test` and `make bench` install what is missing, configure, build, run.
BUILD ?= build
CMAKE_FLAGS ?=
# ON: compile the CUDA transport wherever nvcc is; AUTO: only where an NVIDIA driver is too.
CUDA ?= AUTO
JOBS ?= $(shell nproc)

.PHONY: all deps build test test-all test-long test-asan bench install clean fuzz format format-check

all: build

deps:
	@scripts/setup-deps build

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DSYMCOLL_ENABLE_CUDA=$(CUDA) $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The quick suite (label "quick": every collective, dtype class, mode and fault kind, short):
# a few minutes on 2 cores from a fresh clone. GPU tests report themselves skipped where there
# is no GPU. Without an NVIDIA driver the CUDA kernels are not compiled (SYMCOLL_ENABLE_CUDA=AUTO).
test: deps
	@t0=$$(date +%s); cmake -S . -B $(BUILD) -G Ninja -DSYMCOLL_ENABLE_CUDA=$(CUDA) $(CMAKE_FLAGS) >/dev/null && \
	  cmake --build $(BUILD) -j $(JOBS) | tail -1 && echo "make test: built in $$(( $$(date +%s) - t0 )) s"
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS) -L quick

# Everything else: the long collective matrices, soaks, valgrind, jobs across network
# namespaces, the Python suite with torch (into the build's virtual environment). CI runs it
# after `make test`. It compiles the CUDA transport wherever nvcc is (CUDA=OFF: not), so that
# a machine without a GPU still checks that the kernels build.
test-all: deps
	cmake -S . -B $(BUILD) -G Ninja -DSYMCOLL_ENABLE_CUDA=$(if $(filter AUTO,$(CUDA)),ON,$(CUDA)) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS) -LE "quick|extended"

# The longest host runs, left out of test-all (and CI): 8-rank emulated nodes, larger soaks.
test-long: deps
	cmake -S . -B $(BUILD) -G Ninja -DSYMCOLL_ENABLE_CUDA=$(CUDA) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure --timeout 900 -j $(JOBS) -L extended

# The host tests once more under AddressSanitizer and UBSan (but the long random streams, which
# make test-all runs without them: the quick streams take the same paths under the sanitizers;
# and five of the 8-rank runs, whose paths the 8-rank collective matrices and the smaller norm
# and node runs take here too: 120 s of CI's two cores). Built with Clang where it is installed,
# so that CI compiles the tree with both compilers (the other builds take the system's cc).
ASAN_CC ?= $(shell command -v clang >/dev/null 2>&1 && echo clang || echo cc)
test-asan: deps
	CC=$(ASAN_CC) cmake -S . -B $(BUILD)-asan -G Ninja -DSYMCOLL_SANITIZE=ON -DSYMCOLL_ENABLE_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && TH_SMALL=1 ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -L host -LE "valgrind|soak|python|netns|long" \
	  -E "^(norm_host_(thread|process)_8|coll_host_nodes_(process_8x2|thread_8x4)|coll_host_small_thread_8)$$" --timeout 600 -j $(JOBS)

# The all-reduce benchmark on whatever this machine has: all its GPUs, else CPU ranks.
bench: deps
	@scripts/setup-deps bench
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	scripts/bench

# make install PREFIX=/opt/symcoll (default /usr/local): the prefix is taken at install time,
# so it works after any build.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan

# The bootstrap parser under libFuzzer for FUZZ_SECONDS (default 60).
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/setup-deps fuzz
	mkdir -p $(BUILD)-fuzz/corpus
	clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -DSYMCOLL_BUILDING \
	  tests/fuzz_boot.c src/core/bootstrap.c src/core/log.c src/core/clock.c src/core/fault.c src/core/env.c src/core/status.c \
	  -o $(BUILD)-fuzz/fuzz_boot -lpthread
	$(BUILD)-fuzz/fuzz_boot -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(BUILD)-fuzz/corpus 2>&1 | tail -15

# .clang-format over every C, CUDA and header file: check, or rewrite in place.
format-check:
	@scripts/format-check
format:
	@scripts/format-check --fix
