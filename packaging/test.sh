#!/usr/bin/env bash
# Installs what Baton needs, builds it, and runs every test:
#   1. a Release build and ctest (engine tests, the CLI end to end, the
#      studio, MPI and launch tests), all but label long (the example GPT
#      trained to its loss goal: five minutes of both cores; it says so);
#   2. an ASan + UBSan build of the engine, the studio and their tests, and
#      ctest -L engine and -L ui (the Release run alone trains the CNN to
#      its accuracy goal, label model, and GPT-2 small's step);
#   3. the libFuzzer targets (tests/fuzz), 10 s each on their seed corpora;
#   4. the Debian package (cpack -G DEB) from the Release build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Each stage's wall time, for keeping the whole run inside CI's limit.
stage_start=$SECONDS
stage_name=""
stage() {
  [ -z "$stage_name" ] || echo "== $stage_name: $((SECONDS - stage_start)) s ($((SECONDS / 60)) min in all) =="
  stage_start=$SECONDS
  stage_name=$1
  [ "$1" = done ] || echo "== $1 =="
}
stage "Installing the dependencies"
bash "$root/packaging/deps.sh" test

# Two tests at a time on two cores: OpenMP's threads sleep when they wait
# instead of spinning (libgomp's default spin starves the neighbour test's
# threads: a finite-difference check of a tiny block took 1.3 s beside
# itself, 0.12 s passive). The engine's own default is left alone.
export OMP_WAIT_POLICY=PASSIVE

stage "Release build and tests"
# The real GPU library is only compiled here (no GPU): for one architecture
# (H100/H200's), not the default two.
bash "$root/packaging/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release -DBATON_BUILD_TESTS=ON \
  -DBATON_CUDA_ARCHITECTURES=90
ctest --test-dir "$root/build" --output-on-failure --no-tests=error -j 2 -LE long
echo "not run here (label long, minutes of both cores; ctest --test-dir build -L long):" \
  "$(ctest --test-dir "$root/build" -N -L long | grep -o 'Test *#[0-9]*: [^ ]*' | sed 's/.*: //' | tr '\n' ' ')"

stage "ASan + UBSan build, engine and studio tests"
# Line tables only (-g1) and -O1 (what the sanitizers' own docs suggest):
# enough for their stack traces, and the build is much faster on two cores.
# The benchmarks and the multi-process tests (labels mpi and launch, not
# run here) are not built.
bash "$root/packaging/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DBATON_SANITIZE=ON -DBATON_BUILD_UI=ON \
  -DBATON_WITH_CUDA=OFF -DBATON_BUILD_TESTS=ON -DBATON_BUILD_BENCH=OFF -DBATON_BUILD_PROCESS_TESTS=OFF
# GPT-2 small's step (1.5 GB of parameters and moments, a 1.5 GB
# checkpoint) is left to the Release run: under ASan it takes twice the
# memory and minutes.
# The studio's tests run the sanitized `baton` too, under mpirun for its
# launched runs (OpenMPI's own leaks at exit are suppressed in that binary:
# app/sanitizer_defaults.cpp).
# (The studio is left out of a build without Qt or QCustomPlot: here it
# must be there.)
ctest --test-dir "$root/build-asan" -N -L '^ui$' | grep -q 'Total Tests: [1-9]' ||
  { echo "the ASan build has no studio tests (Qt 6 or QCustomPlot not found?)"; exit 1; }
# The lower-ISA reruns (isa_avx2, isa_generic) are the Release run's: they
# check each ISA's kernels and rounding, and run the same tests again. So is
# the GPU decode over a 12,289-key cache (one block's threads as fibers
# through 12,289 keys: 3 s in Release, 82 s under ASan), and the tiny GPT's
# training on the emulated GPU (8 s each in Release; the CNN's, which goes
# through the same device-tensor code, runs here) and in the trainer (2 to
# 4 s each in Release; the trainer's MLP runs on the emulated GPU here);
# the rest of label gpu (the emulator and every op) runs here, less the
# clipping of one 21-million-float gradient across two lists (1 s in
# Release; the multi-tensor lists are checked here on 58 smaller tensors),
# and fused attention's run-to-run determinism (bit-identical reruns: 53 s
# under ASan; their match against the CPU runs here).
UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS="suppressions=$root/tests/lsan.supp" \
  ctest --test-dir "$root/build-asan" --output-on-failure --no-tests=error -j 2 -L "^(engine|ui|gpu)$" \
    -E "Gpt2SmallTrainsAStep|^isa_|DecodeWithALongCache|GpuTraining.*/Gpt |TrainerGpu\.(AGpt|OneSeed|Checkpoints|Samples|Bf16)|ClippingSpansLists|BitIdenticalRunToRun"

stage "Fuzzing: every parser of others' input, 10 s each on its seed corpus"
# clang's libFuzzer with ASan + UBSan; each target compiles only the engine
# sources it reads with (tests/fuzz/CMakeLists.txt), so nothing else builds.
CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBATON_FUZZ=ON -DBATON_BUILD_TESTS=OFF -DBATON_BUILD_UI=OFF -DBATON_WITH_CUDA=OFF >/dev/null
cmake --build "$root/build-fuzz" --target baton_fuzzers -j "${BATON_JOBS:-2}"
bash "$root/tests/fuzz/run_fuzzers.sh" "$root/build-fuzz" 10 2

stage "Debian package"
(cd "$root/build" && cpack -G DEB >/dev/null && ls -1 "$root"/build/baton_*.deb)
stage "done"
echo "all tests passed"
