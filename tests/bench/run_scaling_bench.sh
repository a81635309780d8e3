#!/usr/bin/env bash
# Data-parallel training throughput, Baton vs PyTorch, side by side in one
# run: the MLP 784-1024-1024-10, global batch 256, Adam, one BLAS thread per
# replica (tests/bench/scaling_mlp.json).
#   Baton: one_device (1 rank), multi_worker_mirrored on 2 MPI ranks (with
#          and without gradient overlap), mirrored with 2 replicas (threads).
#   PyTorch: 1 process, and DistributedDataParallel over gloo on 2 processes
#          (tests/bench/torch_ddp.py; Debian's python3-torch with OpenBLAS's
#          SkylakeX kernels where the CPU has AVX-512).
#   tests/bench/run_scaling_bench.sh [BUILD_DIR]
# Baton's figure is the median of its step events' samples/s after the
# first window (the full trainer: input pipeline, forward, backward,
# allreduce, Adam); PyTorch's is its median step on pre-generated data.
# Prints figures; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
baton="$build/bin/baton"
bash "$here/../../packaging/bench-deps.sh"
[ -x "$baton" ] || { echo "build baton first: cmake --build $build --target baton"; exit 2; }
command -v mpirun >/dev/null 2>&1 || { echo "mpirun not found: install openmpi-bin"; exit 2; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Runs go to a scratch history, never the user's.
export XDG_DATA_HOME="$work/data"
cfg="$here/scaling_mlp.json"

median_rate() {  # median samples/s of the step events after the first
  /usr/bin/python3 -c '
import json, statistics, sys
rates = [e["samples_per_s"] for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step"]
print(statistics.median(rates[1:]))' "$1"
}

baton_rate() {  # baton_rate NAME [mpirun -n N] -- [--set ...]
  local name=$1 ev="$work/$1.jsonl"; shift
  local launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  "${launch[@]}" "$baton" train "$cfg" --quiet --runs-dir "$work/runs" --events "$ev" "$@" >/dev/null
  median_rate "$ev"
}

one=$(baton_rate one --)
mwm=$(baton_rate mwm mpirun -n 2 -- --set strategy.type=multi_worker_mirrored)
mwm_sync=$(baton_rate mwm_sync mpirun -n 2 -- --set strategy.type=multi_worker_mirrored \
  --set strategy.allreduce.overlap=false)
mir=$(baton_rate mirrored -- --set strategy.type=mirrored --set strategy.replicas=2)
t1=$(/usr/bin/python3 "$here/torch_ddp.py" --ranks 1 --threads 1 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')
ddp=$(/usr/bin/python3 "$here/torch_ddp.py" --ranks 2 --threads 1 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')

ratio() { /usr/bin/python3 -c "print('%.2fx' % ($1 / $2))"; }
echo "MLP 784-1024-1024-10, global batch 256, Adam, 1 BLAS thread per replica; samples/s"
printf "%-46s %10s\n" "run" "samples/s"
printf "%-46s %10.0f\n" "baton one_device, 1 rank" "$one"
printf "%-46s %10.0f\n" "baton multi_worker_mirrored, 2 ranks" "$mwm"
printf "%-46s %10.0f\n" "baton multi_worker_mirrored, 2 ranks, no overlap" "$mwm_sync"
printf "%-46s %10.0f\n" "baton mirrored, 2 replicas (threads)" "$mir"
printf "%-46s %10.0f\n" "pytorch, 1 process" "$t1"
printf "%-46s %10.0f\n" "pytorch DDP gloo, 2 processes" "$ddp"
echo
echo "multi_worker_mirrored x2 / PyTorch DDP x2:     $(ratio "$mwm" "$ddp")   (goal >= 1.8x)"
echo "mirrored x2 / PyTorch DDP x2:                  $(ratio "$mir" "$ddp")"
echo "multi_worker_mirrored scaling efficiency:      $(/usr/bin/python3 -c "print('%.0f%%' % (100 * $mwm / (2 * $one)))")  (2 ranks vs 2 x 1 rank)"
echo "mirrored scaling efficiency:                   $(/usr/bin/python3 -c "print('%.0f%%' % (100 * $mir / (2 * $one)))")"
echo "overlap on / off (multi_worker_mirrored x2):   $(ratio "$mwm" "$mwm_sync")"
echo "PyTorch DDP scaling efficiency:                $(/usr/bin/python3 -c "print('%.0f%%' % (100 * $ddp / (2 * $t1)))")"
