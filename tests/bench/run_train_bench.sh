#!/usr/bin/env bash
# Training throughput, Baton vs PyTorch, side by side in one run.
#   tests/bench/run_train_bench.sh [BUILD_DIR]
# Installs PyTorch (Debian python3-torch + libopenblas0; large, so kept out
# of packaging/test.sh) and runs PyTorch at its best: OPENBLAS_CORETYPE is
# set to SkylakeX on AVX-512 machines, where Debian's OpenBLAS 0.3.21
# otherwise picks its Prescott kernels. Prints figures; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
bash "$here/../../packaging/bench-deps.sh"
# Debian's python3 (not a pyenv one on PATH) has Debian's torch.
[ -x "$build/bin/bench_train" ] || { echo "build bench_train first: cmake --build $build --target bench_train"; exit 2; }
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi

best() {  # best of 3 runs: the least disturbed by other load
  local out="" v
  for _ in 1 2 3; do
    v=$("$@" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')
    out=$(python3 -c "print(max(float('$v'), float('${out:-0}')))")
  done
  echo "$out"
}

printf "%-24s %6s %8s %14s %14s %8s  %s\n" model batch threads "baton smp/s" "torch smp/s" ratio goal
for spec in "784,1024,1024,10 256 40 1.2" "64,128,128,10 64 2000 3"; do
  set -- $spec
  for t in 1 2; do
    b=$(best "$build/bin/bench_train" --layers "$1" --batch "$2" --threads "$t" --steps "$3" --json)
    # OpenBLAS starts its own threads unless told: pin it to the same count.
    p=$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t best /usr/bin/python3 "$here/torch_mlp.py" --layers "$1" --batch "$2" --threads "$t" --steps "$3")
    printf "%-24s %6s %8s %14.0f %14.0f %7.2fx  >= %sx\n" "$1" "$2" "$t" "$b" "$p" \
      "$(python3 -c "print($b / $p)")" "$4"
  done
done
echo
echo "Large model against the single-core sgemm peak (same process):"
"$build/bin/bench_train" --layers 784,1024,1024,10 --batch 256 --threads 1 --steps 40
