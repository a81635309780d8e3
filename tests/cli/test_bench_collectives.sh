#!/usr/bin/env bash
# baton bench reduce_scatter and allgather (nccl-tests' reduce_scatter_perf
# and all_gather_perf): on threads (local, native and ring), under mpirun
# (mpi), and on the GPU emulator's NCCL stand-in where the build has it;
# every value checked against its closed form, the sizes the whole buffers
# (every rank's piece), busbw = algbw (n-1)/n, in-place not run.
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
fail=0
pass=0
rm -rf "$WORK" && mkdir -p "$WORK"
source "$(dirname "$0")/check.sh"

json_ok() {  # json_ok COLLECTIVE RANKS ALGORITHM < json
  python3 -c '
import json, sys
collective, ranks, algorithm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = json.load(sys.stdin)
assert d["benchmark"] == collective and d["ranks"] == ranks and d["algorithm"] == algorithm, d
assert d["redop"] == ("none" if collective == "allgather" else "sum"), d["redop"]
assert d["busbw"] == "algbw * (n-1)/n", d["busbw"]
assert d["rows"], d
for r in d["rows"]:
    # The whole buffer: a whole number of floats for every rank.
    assert r["count"] * 4 == r["size"] and r["count"] % ranks == 0, r
    assert r["in_place"] is None, r
    m = r["out_of_place"]
    assert m["wrong"] == 0 and m["time_us"] > 0 and m["algbw"] > 0, r
    assert abs(m["busbw"] - m["algbw"] * (ranks - 1) / ranks) <= 1e-9 * (1 + m["busbw"]), m
assert d["wrong"] == 0
' "$@"
}

for collective in reduce_scatter allgather; do
  check "$collective-table" 0 "# Wrong values +: 0 OK" -- \
    "$BATON" bench $collective --ranks 3 --min-bytes 4 --max-bytes 4096 --step-factor 8 --iters 2 --warmup 1
  check "$collective-help" 0 "out-of-place only" -- "$BATON" bench $collective --help
  for spec in "2 native" "3 ring" "4 native"; do
    set -- $spec
    if "$BATON" bench $collective --backend local --ranks "$1" --algorithm "$2" --min-bytes 64 \
         --max-bytes 262144 --step-factor 8 --iters 2 --warmup 1 --json 2>"$WORK/err" |
       json_ok $collective "$1" "$2"
    then pass=$((pass + 1)); else echo "FAIL $collective-local-$1-$2"; head -5 "$WORK/err"; fail=$((fail + 1)); fi
  done
  check "$collective-bad-flag" 2 "--min-bytes" -- "$BATON" bench $collective --min-bytes 2
done
if command -v mpirun >/dev/null 2>&1; then
  for collective in reduce_scatter allgather; do
    if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OMPI_ALLOW_RUN_AS_ROOT=1 \
         OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun -n 2 --oversubscribe --bind-to none \
         "$BATON" bench $collective --min-bytes 64 --max-bytes 65536 --step-factor 16 --iters 2 \
         --warmup 1 --json 2>"$WORK/err" | json_ok $collective 2 native
    then pass=$((pass + 1)); else echo "FAIL $collective-mpi"; head -5 "$WORK/err"; fail=$((fail + 1)); fi
  done
fi
if [ -f "$(dirname "$BATON")/../lib/baton/baton_cuda_emu.so" ]; then
  for collective in reduce_scatter allgather; do
    if env BATON_CUDA_EMULATE=1 BATON_SIMT_DEVICES=3 "$BATON" bench $collective --backend nccl \
         --min-bytes 64 --max-bytes 65536 --step-factor 16 --iters 2 --warmup 1 --json 2>"$WORK/err" |
       json_ok $collective 3 native
    then pass=$((pass + 1)); else echo "FAIL $collective-nccl-emulated"; head -5 "$WORK/err"; fail=$((fail + 1)); fi
  done
fi
echo "bench collectives: $pass passed, $fail failed"
[ "$fail" = 0 ]
