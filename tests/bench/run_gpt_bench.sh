#!/usr/bin/env bash
# GPT training throughput, Baton vs PyTorch, side by side in one run:
#   tests/bench/run_gpt_bench.sh [BUILD_DIR]
# The same model (pre-norm GPT-2 blocks, tied head), context, batch, AdamW
# and thread count on both sides; Baton trains on the bundled text, PyTorch
# on pre-generated tokens. Also GPT-2 124M's step (context 1024, batch 1).
# Installs PyTorch (packaging/bench-deps.sh). Prints figures, the ratios,
# the CPU model and the model FLOP/s (counted, over the measured time);
# never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
src=$here/../..
bash "$src/packaging/bench-deps.sh"
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $("$build/bin/baton" --version | sed -n 2p)"

baton_gpt() {  # baton_gpt THREADS STEPS SETS... -> tokens/s and model FLOP/s
  local t=$1 steps=$2; shift 2
  "$build/bin/baton" train "$src/resources/examples/gpt_text.json" --no-db --runs-dir "$work/runs" -q \
    --set threads="$t" --set train.steps="$steps" --set data.validation_split=0 \
    --set checkpoint.every_epoch=false --set checkpoint.every_steps=0 \
    --set train.sample_every_steps=0 --set train.log_every_steps=100000 "$@" >/dev/null
  local s
  s=$(ls -t "$work"/runs/*/summary.json | head -1)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['tokens_per_s'], d['model_flops_per_s'])" "$s"
}

printf "%-34s %8s %14s %14s %8s %12s\n" model threads "baton tok/s" "torch tok/s" ratio "baton GFLOP/s"
small=(--set model.n_layer=4 --set model.n_head=4 --set model.d_model=256
       --set data.train.context=256 --set train.global_batch_size=16)
for t in 1 2; do
  read -r b f <<<"$(baton_gpt "$t" 12 "${small[@]}")"
  p=$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/python3 "$here/torch_gpt.py" \
        --threads "$t" --steps 10 | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
  printf "%-34s %8s %14.0f %14.0f %7.2fx %12.1f\n" "ctx 256, 4x256, 4 heads, batch 16" "$t" \
    "$b" "$p" "$(python3 -c "print($b / $p)")" "$(python3 -c "print($f / 1e9)")"
done
t=$(nproc)
read -r b f <<<"$(baton_gpt "$t" 2 --set 'model={"type":"gpt","preset":"gpt2-124m","vocab_size":50304}' \
  --set data.train.context=1024 --set train.global_batch_size=1)"
p=$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/python3 "$here/torch_gpt.py" --threads "$t" \
      --vocab 50304 --context 1024 --layers 12 --heads 12 --width 768 --batch 1 --steps 2 |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
printf "%-34s %8s %14.0f %14.0f %7.2fx %12.1f\n" "GPT-2 124M, ctx 1024, batch 1" "$t" "$b" "$p" \
  "$(python3 -c "print($b / $p)")" "$(python3 -c "print($f / 1e9)")"
echo "(Baton's tokens/s include its data pipeline and the first steps; model FLOP/s are counted"
echo " from the layer shapes: 3x the forward products, over the measured time.)"
