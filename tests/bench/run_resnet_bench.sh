#!/usr/bin/env bash
# ResNet training throughput, Baton vs PyTorch, side by side in one run:
#   tests/bench/run_resnet_bench.sh [BUILD_DIR]
# The same small ResNet (3x3 stem 16, stages [16,2] [32,2] [64,2] of basic
# blocks with BatchNorm), batch 64 of 32x32x3 synthetic images, SGD with
# momentum, same thread count (tests/bench/resnet_synthetic.json and
# torch_resnet.py). PyTorch at its best: both memory formats (NCHW and
# channels-last) and every split of its threads between OpenBLAS and its
# intra-op pool; the fastest counts. Every measurement (Baton's, and each
# PyTorch setting's) is the best of REPEATS runs (default 3): on a shared
# machine one run can lose half its speed to a neighbour. Prints figures,
# the ratio, the goal and the CPU model; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
bash "$here/../../packaging/bench-deps.sh"
[ -x "$build/bin/bench_train" ] || { echo "build bench_train first: cmake --build $build --target bench_train"; exit 2; }
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $("$build/bin/baton" --version | sed -n 2p)"
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
repeats=${REPEATS:-3}
max() { python3 -c "import sys; print(max(float(v) for v in sys.argv[1:]))" "$@"; }

printf "%-34s %7s %12s %12s %7s %5s  %s\n" model threads "baton img/s" "torch img/s" ratio goal "PyTorch's best setting"
for t in 1 2; do
  runs=()
  for ((r = 0; r < repeats; r++)); do
    runs+=("$("$build/bin/bench_train" --config "$here/resnet_synthetic.json" --threads "$t" \
               --steps 10 --json | field samples_per_s)")
  done
  b=$(max "${runs[@]}")
  best=0 how=""
  for fmt in "" --channels-last; do
    for ((ob = 1; ob <= t; ob++)); do
      for io in 1 "$t"; do
        runs=()
        for ((r = 0; r < repeats; r++)); do
          runs+=("$(OPENBLAS_NUM_THREADS=$ob OMP_NUM_THREADS=$io /usr/bin/python3 \
                      "$here/torch_resnet.py" --threads "$io" --steps 10 $fmt | field images_per_s)")
        done
        v=$(max "${runs[@]}")
        if python3 -c "import sys; sys.exit(0 if $v > $best else 1)"; then
          best=$v how="${fmt:-NCHW} OpenBLAS $ob intra-op $io"
        fi
        [ "$io" = "$t" ] && break
      done
    done
  done
  printf "%-34s %7s %12.0f %12.0f %6.2fx %4sx  %s\n" "ResNet 16/32/64x2, 32x32x3, b 64" "$t" "$b" \
    "$best" "$(python3 -c "print($b / $best)")" 1.3 "$how"
done
echo "(Baton: median step after warm-up through the full trainer; convolutions are oneDNN's: direct,"
echo " Winograd for the 3x3 layers of 32+ channels where the CPU has it; best of $repeats runs each side.)"
