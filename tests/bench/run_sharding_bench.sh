#!/usr/bin/env bash
# Sharded data parallelism, Baton vs PyTorch, side by side in one run:
#   tests/bench/run_sharding_bench.sh [BUILD_DIR]
# A GPT of 8 blocks x 512 wide (8 heads, context 64, the bundled text's 256
# byte values, tied head, AdamW), global batch 8, on 2 MPI ranks of one
# thread each: Baton's multi_worker_mirrored in every strategy.sharding
# mode (groups of 4 MiB: a block each, as FSDP's transformer wrapping),
# and PyTorch's DistributedDataParallel and FullyShardedDataParallel
# (FULL_SHARD, a unit per block, backward prefetch) over gloo on the same
# model and ranks (Debian's python3-torch: packaging/bench-deps.sh).
# Each line: tokens/s (the median step after the first, each side), the step time against
# Baton's "none", and the memory per rank - planned (modelled) and the
# measured growth of the resident set to its peak (Baton: the chief's;
# PyTorch: the most grown rank's). Each Baton mode and each PyTorch
# setting is the best of REPEATS runs (default 2). Prints the goals beside
# the figures; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
src=$here/../..
bash "$src/packaging/bench-deps.sh"
baton=$build/bin/baton
[ -x "$baton" ] || { echo "build baton first: cmake --build $build --target baton"; exit 2; }
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $("$baton" --version | sed -n 2p)"
repeats=${REPEATS:-2}
steps=${STEPS:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE

model=(--set model.n_layer=8 --set model.n_head=8 --set model.d_model=512
       --set data.train.context=64 --set train.global_batch_size=8 --set "train.steps=$steps"
       --set train.log_every_steps=1 --set threads=1 --set data.validation_split=0
       --set strategy.type=multi_worker_mirrored)

baton_run() {  # baton_run MODE -> the best run's "tokens/s planned_bytes grew_bytes state_bytes activations"
  local mode=$1 r best="" dir
  for ((r = 0; r < repeats; r++)); do
    dir="$work/$mode.$r"
    groups=()  # the sharded modes' groups of layers
    [ "$mode" = none ] || groups=(--set strategy.allreduce.bucket_mb=4)
    mpirun -n 2 --oversubscribe "$baton" train "$src/resources/examples/gpt_text.json" --no-db \
      --runs-dir "$dir" -q "${model[@]}" "${groups[@]}" --set "strategy.sharding=$mode" \
      >"$work/out" 2>&1 ||
      { echo "baton ($mode) failed:"; tail -5 "$work/out"; exit 1; }
    python3 - "$dir"/*/summary.json "$dir"/*/events.jsonl <<'PY' >>"$work/$mode.lines"
import json, statistics, sys
s = json.load(open(sys.argv[1]))
m = s["memory"]
plan = m["planned_modelled"]["per_replica"]
# The median step after the first (its allocations and first touches
# are the warm-up), as PyTorch's side takes it.
steps = [e for e in map(json.loads, open(sys.argv[2])) if e.get("type") == "step"]
ms = statistics.median(e["step_time_ms"] for e in steps if e["step"] > 1)
tps = s["tokens_per_sample"] * 8 / (ms / 1000)
grew = m["measured"]["peak_resident"] - m["measured"]["resident_at_start"]
state = plan["parameters"] + plan["gradients"] + plan["optimizer_state"]
print(tps, m["planned_modelled"]["per_process"], grew, state, plan["activations"])
PY
  done
  sort -g -r "$work/$mode.lines" | head -1
}

torch_run() {  # torch_run [--fsdp] -> the best run's "tokens/s grew_bytes", or "- reason"
  local r
  for ((r = 0; r < repeats; r++)); do
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$here/torch_gpt.py" --ranks 2 \
      --threads 1 --layers 8 --width 512 --heads 8 --context 64 --batch 8 --vocab 256 \
      --steps "$steps" "$@"
  done | python3 -c "
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
done = [d for d in runs if 'error' not in d]
if not done:
    print('-', runs[0]['error'])
else:
    best = max(done, key=lambda d: d['tokens_per_s'])
    print(best['tokens_per_s'], best['grew_bytes'])"
}

mib() { python3 -c "print('%.0f' % ($1 / 2**20))"; }
printf "%-30s %9s %9s %12s %12s  %s\n" "GPT 8x512, 2 ranks x 1 thread" "tok/s" "step" \
  "planned MiB" "grew MiB" "goal"
read -r none_tps none_plan none_grew none_state none_act <<<"$(baton_run none)"
for mode in none optimizer gradients parameters; do
  if [ "$mode" = none ]; then
    read -r tps plan grew state act <<<"$none_tps $none_plan $none_grew $none_state $none_act"
  else
    read -r tps plan grew state act <<<"$(baton_run "$mode")"
  fi
  eval "tps_$mode=$tps grew_$mode=$grew"
  goal=""
  if [ "$mode" = parameters ]; then
    # Goals: within 15% of none's step time; per replica at most (1/N +
    # 10%) of the model state unsharded, plus the activations.
    bound=$(python3 -c "print(($none_state) * (0.5 + 0.1) + $act)")
    goal="step <= 1.15x none's; memory <= $(mib "$bound") MiB (1/2 + 10% of the state + activations)"
  fi
  printf "%-30s %9.0f %8.2fx %12s %12s  %s\n" "  baton $mode" "$tps" \
    "$(python3 -c "print($none_tps / $tps)")" "$(mib "$plan")" "$(mib "$grew")" "$goal"
done
read -r ddp_tps ddp_grew <<<"$(torch_run)"
printf "%-30s %9.0f %8.2fx %12s %12s\n" "  torch DDP" "$ddp_tps" \
  "$(python3 -c "print($none_tps / $ddp_tps)")" "-" "$(mib "$ddp_grew")"
printf "baton none / torch DDP: %.2fx the tokens/s\n" "$(python3 -c "print($tps_none / $ddp_tps)")"
read -r fsdp_tps fsdp_grew <<<"$(torch_run --fsdp)"
if [ "$fsdp_tps" = - ]; then
  echo "  torch FSDP: not run: $fsdp_grew"
else
  printf "%-30s %9.0f %8.2fx %12s %12s\n" "  torch FSDP (FULL_SHARD)" "$fsdp_tps" \
    "$(python3 -c "print($none_tps / $fsdp_tps)")" "-" "$(mib "$fsdp_grew")"
  printf "baton parameters / torch FSDP: %.2fx the tokens/s (goal >= 1.3x), %.2fx the memory\n" \
    "$(python3 -c "print($tps_parameters / $fsdp_tps)")" \
    "$(python3 -c "print($grew_parameters / $fsdp_grew)")"
fi
echo "(step: the time of a step against Baton's none; planned: modelled from the layer shapes;"
echo " grew: measured, the resident set's peak less where it started)"
