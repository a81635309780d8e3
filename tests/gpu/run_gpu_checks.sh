#!/usr/bin/env bash
# The GPU checks, in one command, for a machine with an NVIDIA GPU and the
# driver (the development machines have neither, so these tests skip there):
#
#   tests/gpu/run_gpu_checks.sh [BUILD_DIR]      (default: build-gpu)
#
# Configures and builds (Release, CUDA on, tests on, UI off, -j16) only what
# the checks need, then runs
#   1. ctest -R 'cuda|nccl': the CUDA kernel test, the nccl communicator on
#      1..4 GPUs of this process (sizes above the GPU count skip), the
#      ncclCommInitRank path over a thread bootstrap, timeouts and aborts;
#   2. the mpirun test (-n 2, ncclCommInitRank with the id sent over MPI). It
#      needs 2 GPUs: NCCL refuses two ranks of one communicator on one GPU, so
#      on a one-GPU machine it prints BATON_TEST_SKIP and ctest reports it
#      skipped;
#   2b. the CUDA backend's op tests and the trainer's (test_trainer_gpu on
#      gpu:0; test_trainer_gpus: mirrored and central_storage over the
#      GPUs, over one GPU equal to one_device, the cases needing more GPUs
#      left out) against the
#      real library; then GPT-2 124M trained 30 steps on
#      gpu:0 in bf16 at the largest batch that fits, and the same model in
#      PyTorch (tests/gpu/gpt2_benchmark.py): tokens/s, TFLOP/s, MFU and the
#      ratio in $OUT/gpt2_benchmark.{txt,json};
#   3. multi_worker_mirrored over 2 GPUs under mpirun -n 2 (skipped, saying
#      so, on a one-GPU machine); parameter_server with its worker on gpu:0
#      and its server in host memory (mpirun -n 2);
#   4. baton bench allreduce --backend nccl at 1, 16 and 256 MiB (native and
#      ring; every GPU of this process - with one GPU that is one rank, so
#      busbw is 0 and algbw is the GPU's copy speed), under mpirun -n 2 when
#      there are 2 GPUs, and --backend local (2 CPU threads) for comparison.
# Everything goes to $OUT/gpu_checks.log when OUT is set (else
# BUILD_DIR/gpu_checks.log) and to the terminal. Exit status: 0 when every
# step passed, 1 otherwise; the summary at the end lists each step.
# Takes a few minutes on 16 cores (the build is most of it).
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$SRC/build-gpu}
mkdir -p "$BUILD"
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  LOG=$OUT/gpu_checks.log
else
  LOG=$BUILD/gpu_checks.log
fi
exec > >(tee "$LOG") 2>&1

# nvcc is often installed but not on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The GPU machine has no Debian -dev packages: tests/gpu/bundle_deps.sh
# (run where they can be fetched) unpacks what the build needs into
# .gpu-deps, which travels with the tree (device run's carry).
DEPS=$SRC/.gpu-deps
if [[ -d "$DEPS/usr" ]]; then
  ARCH_LIB=$DEPS/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH="$DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PKG_CONFIG_PATH="$ARCH_LIB/pkgconfig:$DEPS/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # The multiarch header folder (openssl/opensslconf.h) is a default only
  # under /usr.
  export CPATH="$DEPS/usr/include/x86_64-linux-gnu:$DEPS/usr/include${CPATH:+:$CPATH}"
  export LD_LIBRARY_PATH="$ARCH_LIB:$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

declare -a SUMMARY=()
FAILED=0
step() {  # step NAME TIMEOUT_S COMMAND...: runs it, records pass/fail
  local name=$1 limit=$2
  shift 2
  echo
  # Within the whole run's deadline (BATON_GPU_DEADLINE_S, seconds from the
  # start; a lent GPU's time is short), so the summary is always written.
  if [[ -n "${BATON_GPU_DEADLINE_S:-}" ]]; then
    local left=$((BATON_GPU_DEADLINE_S - SECONDS - 10))
    if [[ $left -lt 15 ]]; then
      echo "=== $name: not run (the run's ${BATON_GPU_DEADLINE_S} s deadline)"
      SUMMARY+=("$(printf '%-40s %-28s %4ds' "$name" "not run (deadline)" 0)")
      FAILED=1
      return
    fi
    [[ $left -lt $limit ]] && limit=$left
  fi
  echo "=== $name: $*"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  local verdict=ok
  if [[ $rc -ne 0 ]]; then
    verdict="FAILED (exit $rc$([[ $rc -eq 124 ]] && echo ', timed out'))"
    FAILED=1
  fi
  SUMMARY+=("$(printf '%-40s %-28s %4ds' "$name" "$verdict" $((SECONDS - t0)))")
}

echo "# baton GPU checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), source $SRC, build $BUILD"
echo "# bundled packages: $([[ -d "$DEPS/usr" ]] && echo "$DEPS" || echo 'none (the system is used)')"
# The commit: BATON_GPU_COMMIT where the caller knows it (a copied working
# tree's .git, if any, may be older than its files), else the tree's own.
echo "# commit: ${BATON_GPU_COMMIT:-$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')}"
nvidia-smi -L 2>&1 || echo "# nvidia-smi not available"
nvcc --version 2>&1 | tail -1 || echo "# nvcc not found"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "# GPUs: ${GPUS:-0}"

# NCCL ships apart from the toolkit: where the toolkit has none, the copy
# inside Python's nvidia-nccl wheel (PyTorch's) serves (header and
# libnccl.so.2; baton_cuda.so dlopens it through its RPATH).
NCCL_ARGS=()
if [[ ! -f /usr/local/cuda/include/nccl.h && ! -f /usr/include/nccl.h ]]; then
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    hdr=$(find "$sp/nvidia" -name nccl.h -path '*include*' 2>/dev/null | head -1)
    lib=$(find "$sp/nvidia" -name 'libnccl.so*' 2>/dev/null | head -1)
    if [[ -n "$hdr" && -n "$lib" ]]; then
      NCCL_ARGS=(-DNCCL_INCLUDE_DIR="$(dirname "$hdr")" -DNCCL_LIB="$lib")
      export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "# NCCL from Python's wheel: $hdr, $lib"
      break
    fi
  done
fi

# cuDNN too (the convolutions' kAuto path; its header is needed to build):
# where the toolkit has none, the copy in Python's nvidia-cudnn wheel.
if [[ ! -f /usr/local/cuda/include/cudnn.h && ! -f /usr/include/cudnn.h ]]; then
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    hdr=$(find "$sp/nvidia" -name cudnn.h -path '*include*' 2>/dev/null | head -1)
    lib=$(find "$sp/nvidia" -name 'libcudnn.so.9' 2>/dev/null | head -1)
    if [[ -n "$hdr" && -n "$lib" ]]; then
      export CPATH="$(dirname "$hdr")${CPATH:+:$CPATH}"
      export BATON_CUDNN_LIBRARY="$lib"
      export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "# cuDNN from Python's wheel: $hdr, $lib"
      break
    fi
  done
fi

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
step configure 300 cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DBATON_WITH_CUDA=ON \
  -DBATON_BUILD_TESTS=ON -DBATON_BUILD_UI=OFF "${NCCL_ARGS[@]}"
TARGETS=(baton baton_cuda baton_cuda_emu test_cuda test_comm_nccl)
for t in test_gpu_elementwise test_gpu_norm_loss test_gpu_tokens_images test_gpu_matmul \
    test_gpu_attention test_gpu_conv test_gpu_backend test_gpu_training; do
  [[ -f "$SRC/tests/engine/cuda/$t.cpp" ]] && TARGETS+=("$t")
done
TARGETS+=(test_gpu_library test_trainer_gpu test_trainer_gpus baton_mlp baton_datasets baton_gpt
  baton_cnn)
if grep -q '^BATON_WITH_MPI:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  TARGETS+=(test_comm_nccl_mpi)
fi
step build 420 cmake --build "$BUILD" -j16 --target "${TARGETS[@]}"
BATON=$BUILD/bin/baton

# A skipped GPU test is a failure here: this machine has the GPU they need.
ctest_no_skips() {  # ctest_no_skips ARGS...: ctest, failing when any test skipped
  local out
  out=$(mktemp)
  ctest "$@" 2>&1 | tee "$out"
  local rc=${PIPESTATUS[0]}
  if grep -Eq '\*\*\*Skipped|Not Run' "$out"; then
    echo "skipped tests on a GPU machine:"
    grep -E '\*\*\*Skipped|Not Run' "$out"
    rc=1
  fi
  rm -f "$out"
  return "$rc"
}
export -f ctest_no_skips

# What skips by design here is left out: communicators of more GPUs than
# this machine has, the peer-timeout cases (two GPUs), a one-rank link
# figure (nothing moves), and the no-GPU message (a GPU is visible).
MORE_GPUS="|NoDriverOrGpu"
for n in 2 3 4; do [[ "${GPUS:-0}" -lt $n ]] && MORE_GPUS+="|${n}gpus"; done
[[ "${GPUS:-0}" -lt 2 ]] && MORE_GPUS+="|NcclGpuErrors.AMissingPeer|NcclGpuErrors.AbortWakes|LinkStatsAreRecorded/1gpus"
step "ctest cuda|nccl (in-process)" 300 \
  bash -c "ctest_no_skips --test-dir '$BUILD' -R 'cuda|nccl' -E 'nccl_mpi|nccl_emu$MORE_GPUS' --output-on-failure --timeout 120 -j4"
# The CUDA backend's op tests, which CI runs on the emulator, against this
# GPU: the same executables with the real library.
step "GPU op tests on the real GPU" 300 \
  env BATON_TEST_CUDA_LIBRARY="$BUILD/lib/baton/baton_cuda.so" \
  bash -c "ctest_no_skips --test-dir '$BUILD' -R '^test_gpu_' --output-on-failure --timeout 120 -j4"
# The trainer on gpu:0 (strategy.devices): the tiny GPT's and the MLP's
# losses within 1e-3 of the CPU's, checkpoints between GPU and CPU, bf16
# (less the case of a machine without a GPU, which skips here); and
# mirrored over this machine's GPUs (test_trainer_gpus: over one GPU it
# equals one_device and the CPU, the NCCL group of one; the cases needing
# more GPUs than there are are left out, as they skip here by design).
MORE_TRAINER_GPUS="WithoutAGpu"
for n in 2 4; do [[ "${GPUS:-0}" -lt $n ]] && MORE_TRAINER_GPUS+="|/${n}gpus"; done
[[ "${GPUS:-0}" -lt 2 ]] && MORE_TRAINER_GPUS+="|TwoGpus"
step "trainer on gpu:0, mirrored on the GPUs" 300 \
  env BATON_TEST_GPU_DEVICE=gpu:0 \
  bash -c "ctest_no_skips --test-dir '$BUILD' -R '^test_trainer_gpu' -E '$MORE_TRAINER_GPUS' --output-on-failure --timeout 120 -j4"
# GPT-2 124M on gpu:0 (bf16, context 1024, the largest micro-batch of 32,
# 16, 8, 4 whose memory plan fits), then the same model in PyTorch at the
# same batch, side by side: tokens/s, TFLOP/s, MFU and the ratio, printed
# and written to gpt2_benchmark.{json,txt} (never judged on a time).
BENCH="$SRC/tests/gpu/gpt2_benchmark.py"
GPT2=${OUT:-$BUILD}/gpt2
gpt2_baton() {
  rm -rf "$GPT2" && mkdir -p "$GPT2"
  local b
  for b in 32 16 8 4; do
    python3 "$BENCH" config --source "$SRC" --batch "$b" --steps 20 --out "$GPT2/gpt2.json" || return 1
    rm -rf "$GPT2/runs" "$GPT2/ckpt"
    "$BATON" train "$GPT2/gpt2.json" --runs-dir "$GPT2/runs" --checkpoint-dir "$GPT2/ckpt" --no-db \
      --quiet > "$GPT2/baton_b$b.log" 2>&1
    local rc=$?
    cat "$GPT2/baton_b$b.log"
    if [[ $rc -eq 0 ]]; then
      echo "$b" > "$GPT2/batch"
      rm -rf "$GPT2/ckpt"  # 1.5 GB of checkpoint, not needed
      return 0
    fi
    # The memory plan's refusal, or a device allocation that found no room.
    grep -Eqi "train.global_batch_size: $b needs about|out of memory|no room|MemoryAllocation" \
      "$GPT2/baton_b$b.log" || return 1
    echo "batch $b does not fit: trying $((b / 2))"
  done
  return 1
}
step "GPT-2 124M on gpu:0 (baton)" 180 bash -c "$(declare -f gpt2_baton); BENCH='$BENCH' GPT2='$GPT2' \
  SRC='$SRC' BATON='$BATON' gpt2_baton"
if [[ -s "$GPT2/batch" ]]; then
  B=$(cat "$GPT2/batch")
  step "GPT-2 124M in PyTorch (batch $B)" 150 python3 "$BENCH" torch --batch "$B" --steps 10 --warmup 5 \
    --out "$GPT2/pytorch.json"
  RUN_DIR=$(ls -d "$GPT2"/runs/*/ | head -1)
  step "GPT-2 124M report" 30 bash -c "python3 '$BENCH' report --events '$RUN_DIR/events.jsonl' \
    --summary '$RUN_DIR/summary.json' --warmup 5 --batch '$B' --torch '$GPT2/pytorch.json' \
    --device-name \"\$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)\" \
    --out-json '${OUT:-$BUILD}/gpt2_benchmark.json' | tee '${OUT:-$BUILD}/gpt2_benchmark.txt'"
fi
if [[ " ${TARGETS[*]} " == *" test_comm_nccl_mpi "* ]]; then
  step "ctest mpirun -n 2 nccl" 200 \
    ctest --test-dir "$BUILD" -R 'nccl_mpi' --output-on-failure -V --timeout 150
fi

# baton_cuda.so loads libnccl.so.2 itself: without it, every GPU is still found.
step "probe without libnccl.so.2" 60 bash -c "test \"\$(BATON_NCCL_LIBRARY=/nonexistent/libnccl.so.2 \
  '$BATON' probe --json | python3 -c 'import json,sys; print(sum(d[\"kind\"] == \"cuda\" for d in json.load(sys.stdin)[\"devices\"]))')\" = '${GPUS:-0}'"
for size in 1M 16M 256M; do
  step "bench nccl/native $size" 120 "$BATON" bench allreduce --backend nccl \
    --min-bytes "$size" --max-bytes "$size" --iters 20 --warmup 5
done
step "bench nccl/ring 1M..64M" 120 "$BATON" bench allreduce --backend nccl --algorithm ring \
  --min-bytes 1M --max-bytes 64M --step-factor 4 --iters 10 --warmup 2
if [[ "${GPUS:-0}" -ge 2 ]] && command -v mpirun >/dev/null 2>&1; then
  step "bench mpirun -n 2 nccl" 180 mpirun -n 2 --oversubscribe "$BATON" bench allreduce \
    --backend nccl --min-bytes 1M --max-bytes 64M --step-factor 4
else
  echo
  echo "=== bench mpirun -n 2 nccl: skipped (needs 2 GPUs; NCCL refuses two ranks on one GPU)"
fi
# multi_worker_mirrored on the GPUs, one rank per GPU (NCCL's id over MPI):
# 30 steps of the digits MLP, which must say it ran nccl/native on gpu:0.
if [[ "${GPUS:-0}" -ge 2 ]] && command -v mpirun >/dev/null 2>&1; then
  step "multi_worker_mirrored on 2 GPUs (mpirun -n 2)" 180 bash -c "mpirun -n 2 --oversubscribe \
    '$BATON' train '$SRC/resources/examples/digits.json' --set strategy.type=multi_worker_mirrored \
    --set strategy.devices=gpu --set train.steps=30 --runs-dir '$BUILD/mwm_runs' --db '$BUILD/mwm.db' \
    | tee /dev/stderr | grep -q 'communication   nccl/native'"
else
  echo
  echo "=== multi_worker_mirrored on 2 GPUs: skipped (needs 2 GPUs: one rank per GPU)"
fi
# parameter_server with its worker on gpu:0 and its server in host memory
# (mpirun -n 2: one worker, one server; no NCCL, so one GPU is enough):
# 30 synchronous steps of the digits MLP, the worker saying it ran on gpu:0.
if command -v mpirun >/dev/null 2>&1; then
  step "parameter_server: a worker on gpu:0, a host server (mpirun -n 2)" 180 bash -c "mpirun -n 2 \
    --oversubscribe '$BATON' train '$SRC/resources/examples/digits.json' \
    --set strategy.type=parameter_server --set strategy.mode=sync --set strategy.devices=gpu \
    --set train.steps=30 --runs-dir '$BUILD/ps_runs' --db '$BUILD/ps.db' \
    | tee /dev/stderr | grep -q 'device          gpu:0'"
fi
for size in 1M 16M 256M; do
  step "bench local (2 threads) $size" 120 "$BATON" bench allreduce --backend local --ranks 2 \
    --min-bytes "$size" --max-bytes "$size" --iters 20 --warmup 5
done

echo
echo "=== summary"
printf '%s\n' "${SUMMARY[@]}"
echo "log: $LOG"
exit $FAILED
