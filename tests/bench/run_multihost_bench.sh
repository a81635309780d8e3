#!/usr/bin/env bash
# The multi-host test bed's links, measured (needs root and iproute2):
#   tests/bench/run_multihost_bench.sh [BUILD_DIR] [RATE]
# Two hosts of two ranks each (tests/multihost/testbed.sh), the link of
# host 2 shaped to RATE (default 200mbit) both ways. Prints, side by side:
#   - raw TCP between the hosts, one way and both ways at once (the anchor:
#     what the shaped link carries);
#   - `baton bench allreduce` of 4 MiB over the two hosts, 1 rank each
#     (native, ring), and over 2 ranks each (native, ring, hierarchical);
#   - the per-link figures a 2-rank ring training run reports for the
#     inter-host links, against RATE.
# Never fails on time; the test bed is removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
rate=${2:-200mbit}
baton=$build/bin/baton
bed=$src/tests/multihost/testbed.sh
[ -x "$baton" ] || { echo "build baton first: cmake --build $build --target baton"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "the test bed needs root"; exit 2; }
work=$(mktemp -d)
cleanup() { "$bed" down bt-b >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
"$bed" down bt-b >/dev/null 2>&1 || true
"$bed" up 2 bt-b > "$work/hosts2"
printf 'bt-b1 slots=1\nbt-b2 slots=1\n' > "$work/hosts1"
"$bed" shape bt-b2 "$rate" -
printf '#!/bin/sh\nexec %s agent "$@"\n' "$bed" > "$work/agent.sh"
chmod +x "$work/agent.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$work/agent.sh OMPI_MCA_oob_tcp_if_include=10.77.0.0/24
export OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 OMPI_MCA_mpi_yield_when_idle=1
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; link of bt-b2 shaped to $rate"

cat > "$work/tput.py" <<'PY'
import socket, sys, time
port = int(sys.argv[2])
if sys.argv[1] == "srv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1); c, _ = s.accept(); n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
else:
    c = socket.create_connection((sys.argv[3], port)); buf = b"x" * (1 << 20); t0 = time.time()
    for _ in range(40): c.sendall(buf)
    c.close(); print("%.1f" % (40 * (1 << 20) / (time.time() - t0) / 1e6))
PY
tcp() {  # FROM TO_ADDR PORT: MB/s one way
  ip netns exec "$2" python3 "$work/tput.py" srv "$4" & local srv=$!
  sleep 0.5
  ip netns exec "$1" python3 "$work/tput.py" cli "$4" "$3"
  wait "$srv"
}
one=$(tcp bt-b1 bt-b2 10.77.0.12 5601)
echo "raw TCP bt-b1 -> bt-b2, alone:        $one MB/s"
tcp bt-b1 bt-b2 10.77.0.12 5602 > "$work/ab" & ab=$!
tcp bt-b2 bt-b1 10.77.0.11 5603 > "$work/ba"
wait "$ab"
echo "raw TCP both ways at once:            $(cat "$work/ab") and $(cat "$work/ba") MB/s"

bench() {  # HOSTFILE NP ALGORITHM
  timeout 300 mpirun --hostfile "$1" -n "$2" "$baton" bench allreduce --algorithm "$3" \
    --min-bytes 4M --max-bytes 4M 2>/dev/null | awk '$1 == 4194304 {printf "%.0f ms, busbw %s GB/s\n", $5 / 1000, $7}'
}
echo
echo "allreduce of 4 MiB (mean of the iterations)"
for alg in native ring; do echo "  1 rank per host, $alg: $(bench "$work/hosts1" 2 $alg)"; done
for alg in native ring hierarchical; do echo "  2 ranks per host, $alg: $(bench "$work/hosts2" 4 $alg)"; done

cat > "$work/cfg.json" <<EOF2
{"name": "bench-links", "seed": 1, "threads": 1,
 "model": {"type": "mlp", "layers": [64, 1024, 1024, 10], "activation": "relu"},
 "data": {"train": {"type": "csv", "path": "$src/resources/datasets/digits.csv.gz", "label": -1},
          "standardize": true},
 "loss": "softmax_cross_entropy", "optimizer": {"type": "adam", "lr": 0.001},
 "train": {"steps": 40, "global_batch_size": 64, "log_every_steps": 10},
 "strategy": {"type": "multi_worker_mirrored", "allreduce": {"algorithm": "ring"}},
 "checkpoint": {"every_steps": 0, "every_epoch": false}}
EOF2
timeout 300 mpirun --hostfile "$work/hosts1" -n 2 "$baton" train "$work/cfg.json" --no-db \
  --runs-dir "$work/runs" --events "$work/ev.jsonl" -q >/dev/null 2>&1 || true
echo
echo "per-link figures of a 2-rank ring run (4.3 MB of gradients a step), against $rate:"
python3 - "$work/ev.jsonl" "$rate" <<'PY'
import json, re, sys
rate = sys.argv[2]; m = re.match(r"([\d.]+)(k|m|g)bit", rate)
r = float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8 / 1e9
last = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("type") == "link": last[(e["src"], e["dst"])] = e
for (s, d), e in sorted(last.items()):
    print("  %d -> %d: %.4f GB/s (%s), %.0f%% of the shaped %.4f GB/s" % (
        s, d, e["bandwidth_gbps"], "modelled" if e.get("estimated") else "measured",
        100 * e["bandwidth_gbps"] / r, r))
PY
