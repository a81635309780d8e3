#!/usr/bin/env bash
# Where GPT-2 124M's step goes on a GPU: every kernel's time under Nsight
# Compute (ncu, one metric: gpu__time_duration.sum; kernels serialised, so
# the total is the GPU's busy time, not the overlapped step), summed by
# kernel name over 2 steps at batch 16, largest first. For the GPU machine,
# like run_gpu_checks.sh (the bundled .gpu-deps, carried):
#
#   OUT=/some/dir tests/gpu/profile_gpt2.sh [BUILD_DIR]   ($OUT/prof_summary.txt;
#                                                          ncu's own report in BUILD_DIR/ncu.txt)
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-/tmp/baton-prof}
OUT=${OUT:-$BUILD}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
DEPS=$SRC/.gpu-deps
if [[ -d "$DEPS/usr" ]]; then
  ARCH_LIB=$DEPS/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH="$DEPS/usr" PKG_CONFIG_PATH="$ARCH_LIB/pkgconfig:$DEPS/usr/share/pkgconfig"
  export CPATH="$DEPS/usr/include/x86_64-linux-gnu:$DEPS/usr/include"
  export LD_LIBRARY_PATH="$ARCH_LIB:$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBATON_WITH_CUDA=ON \
  -DBATON_BUILD_TESTS=OFF -DBATON_BUILD_UI=OFF >/dev/null || exit 1
cmake --build "$BUILD" -j16 --target baton baton_cuda baton_gpt baton_datasets | tail -2
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
G=$(mktemp -d)
python3 "$SRC/tests/gpu/gpt2_benchmark.py" config --source "$SRC" --batch 16 --steps 2 --out "$G/c.json"
echo "=== GPT-2 124M, batch 16, 2 steps, under $NCU"
"$NCU" --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
  --target-processes all "$BUILD/bin/baton" train "$G/c.json" --runs-dir "$G/runs" \
  --checkpoint-dir "$G/ckpt" --no-db --quiet > "$BUILD/ncu.txt" 2>&1 || { tail -20 "$BUILD/ncu.txt"; exit 1; }
python3 - "$BUILD/ncu.txt" <<'PY' | tee "$OUT/prof_summary.txt"
import collections, re, sys
rows = collections.defaultdict(lambda: [0.0, 0])
name = None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s{2}(\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Device \d+, CC [\d.]+, Invocations (\d+)", line)
    if m:
        name, inv = re.sub(r"\(.*", "", m.group(1)), int(m.group(2))
        continue
    t = re.match(r"\s*gpu__time_duration.sum\s+(\S+)\s+[\d.,]+\s+[\d.,]+\s+([\d.,]+)", line)
    if t and name:
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[t.group(1)]
        rows[name][0] += float(t.group(2).replace(",", "")) * scale * inv
        rows[name][1] += inv
        name = None
total = sum(v[0] for v in rows.values())
print("GPU busy %.1f ms over 2 steps, %d launches (measured, ncu, kernels serialised)"
      % (total, sum(v[1] for v in rows.values())))
for n, (ms, inv) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:30]:
    print("%9.2f ms %5.1f%% %6d  %s" % (ms, 100 * ms / total, inv, n[:110]))
PY
rm -rf "$G"
