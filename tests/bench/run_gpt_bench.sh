#!/usr/bin/env bash
# GPT training throughput, Baton vs PyTorch, side by side in one run:
#   tests/bench/run_gpt_bench.sh [BUILD_DIR]
# The same model (pre-norm GPT-2 blocks, tied head), context, batch, AdamW
# and thread count on both sides; Baton trains on the bundled text
# (bench_train: the full trainer, median step after warm-up, next to the
# sgemm peak measured in the same process), PyTorch on pre-generated
# tokens at its best: for T threads it runs with OpenBLAS and its own
# intra-op pool at every split of T, and as DDP over T processes; each
# side's fastest way makes the headline ratio (see below). Also GPT-2
# 124M's step (context 1024, batch 1). Installs PyTorch
# (packaging/bench-deps.sh). Prints figures, ratios, goals and the CPU
# model; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
src=$here/../..
bash "$src/packaging/bench-deps.sh"
[ -x "$build/bin/bench_train" ] || { echo "build bench_train first: cmake --build $build --target bench_train"; exit 2; }
# Debian's OpenBLAS 0.3.21 otherwise picks its Prescott kernels on AVX-512.
if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $("$build/bin/baton" --version | sed -n 2p)"

field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

# Each measurement of the small model (Baton's, and each PyTorch setting's)
# is the best of REPEATS runs (default 3): on a shared machine one run can
# lose a good part of its speed to a neighbour. GPT-2 124M's step: one run.
repeats=${REPEATS:-3}
torch_best() {  # torch_best REPEATS THREADS ARGS... -> "tokens/s openblas-threads intra-op-threads"
  local n=$1 t=$2 best=0 how="" b i v r
  shift 2
  for ((b = 1; b <= t; b++)); do
    for i in 1 "$t"; do
      for ((r = 0; r < n; r++)); do
        v=$(OPENBLAS_NUM_THREADS=$b OMP_NUM_THREADS=$i /usr/bin/python3 "$here/torch_gpt.py" \
              --threads "$i" "$@" | field tokens_per_s)
        if python3 -c "import sys; sys.exit(0 if $v > $best else 1)"; then best=$v; how="$b $i"; fi
      done
      [ "$i" = "$t" ] && break
    done
  done
  echo "$best $how"
}

torch_ddp_best() {  # torch_ddp_best REPEATS RANKS ARGS... -> tokens/s (DDP, 1 thread a rank)
  local n=$1 t=$2 best=0 v r
  shift 2
  for ((r = 0; r < n; r++)); do
    v=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$here/torch_gpt.py" \
          --threads 1 --ranks "$t" "$@" | field tokens_per_s)
    if python3 -c "import sys; sys.exit(0 if $v > $best else 1)"; then best=$v; fi
  done
  echo "$best"
}
small=(--set model.n_layer=4 --set model.n_head=4 --set model.d_model=256
       --set data.train.context=256 --set train.global_batch_size=16)
baton_best() {  # baton_best REPEATS THREADS STRATEGY -> bench_train's JSON of the fastest run
  local n=$1 t=$2 s=$3 r extra=(--set "strategy.type=$3")
  [ "$s" = mirrored ] && extra+=(--set "strategy.replicas=$t")
  for ((r = 0; r < n; r++)); do
    "$build/bin/bench_train" --config "$src/resources/examples/gpt_text.json" "${small[@]}" \
      "${extra[@]}" --threads "$t" --steps 10 --json
  done | python3 -c "import json,sys; print(json.dumps(max((json.loads(l) for l in sys.stdin if l.strip()), key=lambda d: d['tokens_per_s'])))"
}
share() {  # share JSON -> "G GFLOP/s = P% of PEAK"
  python3 -c "import json,sys; d=json.loads(sys.argv[1]); print('%.0f GFLOP/s = %.0f%% of %.0f' % (d['gflops'], 100*d['gflops']/d['sgemm_peak_gflops'], d['sgemm_peak_gflops']))" "$1"
}
row() {  # row LABEL THREADS BATON TORCH GOAL NOTE
  printf "%-36s %7s %11.0f %11.0f %6.2fx %6s %s\n" "$1" "$2" "$3" "$4" \
    "$(python3 -c "print($3 / $4)")" "$5" "$6"
}

# The small model: ctx 256, 4 layers x 256 wide, 4 heads, batch 16. At T
# threads each side runs it two ways, and the fastest of each side makes
# the headline ratio:
# - in one process, T threads inside each product (Baton one_device;
#   PyTorch at its best split of OpenBLAS and intra-op threads);
# - data-parallel, T single-threaded replicas on 1/T of the batch each,
#   gradients summed every step (Baton mirrored: threads in one process;
#   PyTorch DistributedDataParallel: T processes over gloo).
printf "%-36s %7s %11s %11s %7s %6s %s\n" "ctx 256, 4x256, batch 16" threads "baton tok/s" \
  "torch tok/s" ratio goal "baton step vs sgemm peak (same process)"
for spec in "1 1.2" "2 1.8"; do
  read -r t goal <<<"$spec"
  jo=$(baton_best "$repeats" "$t" one_device)
  read -r po pb pi <<<"$(torch_best "$repeats" "$t" --steps 10)"
  row "  one process" "$t" "$(field tokens_per_s <<<"$jo")" "$po" "" "$(share "$jo")"
  echo "    (PyTorch: OpenBLAS $pb threads, intra-op $pi)"
  jb=$jo pbest=$po bhow="one_device" phow="one process"
  if [ "$t" -gt 1 ]; then
    jm=$(baton_best "$repeats" "$t" mirrored)
    pm=$(torch_ddp_best "$repeats" "$t" --steps 10)
    row "  data-parallel: $t replicas / ranks" "$t" "$(field tokens_per_s <<<"$jm")" "$pm" "" \
      "$(share "$jm")"
    echo "    (Baton mirrored, $t replicas; PyTorch DDP over gloo, $t ranks x 1 thread)"
    if python3 -c "import sys; sys.exit(0 if $(field tokens_per_s <<<"$jm") > $(field tokens_per_s <<<"$jo") else 1)"; then
      jb=$jm bhow="mirrored"
    fi
    if python3 -c "import sys; sys.exit(0 if $pm > $po else 1)"; then pbest=$pm phow="DDP"; fi
  fi
  row "  best against best" "$t" "$(field tokens_per_s <<<"$jb")" "$pbest" "${goal}x" \
    "$(share "$jb")"
  echo "    (Baton: $bhow; PyTorch: $phow)"
done
t=$(nproc)
j=$("$build/bin/bench_train" --config "$src/resources/examples/gpt_text.json" \
      --set 'model={"type":"gpt","preset":"gpt2-124m","vocab_size":50304}' \
      --set data.train.context=1024 --set train.global_batch_size=1 \
      --threads "$t" --steps 2 --window 1 --json)
b=$(field tokens_per_s <<<"$j")
read -r p pb pi <<<"$(torch_best 1 "$t" --vocab 50304 --context 1024 --layers 12 --heads 12 \
                        --width 768 --batch 1 --steps 2)"
row "GPT-2 124M, ctx 1024, batch 1" "$t" "$b" "$p" "-" "$(share "$j")"
echo "    (PyTorch: OpenBLAS $pb threads, intra-op $pi)"
echo "(Baton's GFLOP/s are model FLOPs counted from the layer shapes, 3x the forward products,"
echo " over the measured median step; the sgemm peak is a 1024^3 product at the same threads.)"
