#!/usr/bin/env bash
# Allreduce bandwidth on 2 ranks, Baton vs PyTorch, side by side in one run.
#   tests/bench/run_allreduce_bench.sh [BUILD_DIR]
# Baton: `mpirun -n 2 baton bench allreduce` with the mpi backend, native
# (MPI_Allreduce) and ring algorithms. PyTorch: torch.distributed all_reduce
# with gloo on 2 processes (tests/bench/torch_allreduce.py; Debian's
# python3-torch, installed by packaging/bench-deps.sh). Same sizes (1, 16 and
# 64 MiB, float32 sum), same warm-up and iterations, time averaged over the
# iterations and then over the ranks; every result is checked. gloo's
# all_reduce is in place, so Baton's in-place figures are the ones compared.
# Prints figures; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
baton="$build/bin/baton"
sizes=(1048576 16777216 67108864)
iters=20
warmup=5
bash "$here/../../packaging/bench-deps.sh"
[ -x "$baton" ] || { echo "build baton first: cmake --build $build --target baton"; exit 2; }
command -v mpirun >/dev/null 2>&1 || { echo "mpirun not found: install openmpi-bin"; exit 2; }
# mpirun refuses root unless told.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# busbw (GB/s) of the in-place row of one Baton run; exits non-zero on a
# wrong value.
baton_busbw() {  # baton_busbw ALGORITHM BYTES
  mpirun -n 2 "$baton" bench allreduce --backend mpi --algorithm "$1" --min-bytes "$2" \
    --max-bytes "$2" --iters "$iters" --warmup "$warmup" --json |
    /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
(row,) = d["rows"]
assert d["wrong"] == 0, "baton: %d wrong values" % d["wrong"]
print(row["in_place"]["busbw"])'
}

declare -A native ring gloo
for s in "${sizes[@]}"; do
  native[$s]=$(baton_busbw native "$s")
  ring[$s]=$(baton_busbw ring "$s")
done
# Debian's python3 (not a pyenv one on PATH) has Debian's torch.
torch_json=$(/usr/bin/python3 "$here/torch_allreduce.py" --ranks 2 --iters "$iters" --warmup "$warmup" \
  --sizes "$(IFS=,; echo "${sizes[*]}")")
while read -r size bw; do gloo[$size]=$bw; done < <(/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
for r in d["rows"]:
    assert r["wrong"] == 0, "gloo: %d wrong values at %d bytes" % (r["wrong"], r["size"])
    print(r["size"], r["busbw"])' "$torch_json")

echo "allreduce, 2 ranks, float32 sum, in place; busbw in GB/s (mean over $iters iterations, then over ranks)"
printf "%8s  %12s  %12s  %10s  %13s  %11s  %s\n" size "mpi/native" "mpi/ring" gloo "native/gloo" "ring/gloo" goal
for s in "${sizes[@]}"; do
  printf "%5d MiB  %12.2f  %12.2f  %10.2f  %12.2fx  %10.2fx  >= 2x\n" $((s >> 20)) "${native[$s]}" "${ring[$s]}" \
    "${gloo[$s]}" "$(/usr/bin/python3 -c "print(${native[$s]} / ${gloo[$s]})")" \
    "$(/usr/bin/python3 -c "print(${ring[$s]} / ${gloo[$s]})")"
done
