#!/usr/bin/env bash
# Keys and figures that say what happens:
#   1. central_storage refuses strategy.allreduce.{algorithm, bucket_mb,
#      first_bucket_mb, overlap, timeout_s} and drift_check_steps (exit 2,
#      naming the config file and the key, saying why), and reports the
#      in-process sum it runs, never "local/<algorithm>";
#   2. `baton predict --json` says where every figure came from: with
#      device_samples_per_s in the topology the compute is the topology
#      file's (no "measured_on"); without it, measured here.
# Needs: BATON, SRC, WORK.
set -u
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
pass=0
fail=0
# shellcheck source=check.sh
. "$SRC/tests/cli/check.sh"
CS="$SRC/resources/examples/central_storage.json"

# 1. central_storage.
for kv in algorithm=ring bucket_mb=4 first_bucket_mb=0.5 overlap=false timeout_s=10; do
  key=${kv%%=*}
  check "central_storage refuses allreduce.$key" 2 \
    "^baton: error: $CS: strategy\.allreduce\.$key: does not apply to central_storage, which runs no allreduce" -- \
    "$BATON" train "$CS" --no-db --runs-dir "$WORK/runs" --set "strategy.allreduce.$kv" -q
done
check "central_storage refuses drift_check_steps" 2 \
  "^baton: error: $CS: strategy\.drift_check_steps: does not apply to central_storage" -- \
  "$BATON" train "$CS" --no-db --runs-dir "$WORK/runs" --set strategy.drift_check_steps=5 -q
check "central_storage reports the sum it runs" 0 \
  "^communication +in-process sum into the central copy$" -- \
  "$BATON" train "$CS" --no-db --runs-dir "$WORK/runs" --set train.steps=3 --events "$WORK/cs.jsonl"
if grep '"type":"run_start"' "$WORK/cs.jsonl" | grep -q '"communication":"in-process sum into the central copy"' &&
  ! grep -q '"communication":"local/' "$WORK/cs.jsonl"; then
  pass=$((pass + 1))
else
  echo "FAIL central_storage run_start: $(grep -o '"communication":"[^"]*"' "$WORK/cs.jsonl")"
  fail=$((fail + 1))
fi

# 2. predict: the compute's source.
EX="$SRC/resources/examples/digits.json"
cat >"$WORK/topo_rate.json" <<'EOF'
{"hosts": 2, "devices_per_host": 2, "device": "gpu",
 "links": {"intra_host": "nvlink", "inter_host": {"class": "network", "gbps": 100}},
 "device_samples_per_s": 2400}
EOF
cat >"$WORK/topo_here.json" <<'EOF'
{"hosts": 1, "devices_per_host": 2, "device": "cpu", "links": {"intra_host": "shm"}}
EOF
for t in rate here; do
  code=0
  "$BATON" predict "$EX" --topology "$WORK/topo_$t.json" --devices 1,2 --steps 3 --json \
    >"$WORK/p_$t.json" 2>"$WORK/p_$t.err" || code=$?
  [ "$code" = 0 ] || { echo "FAIL predict ($t): exit $code: $(tail -3 "$WORK/p_$t.err")"; fail=$((fail + 1)); }
done
if python3 - "$WORK/p_rate.json" "$WORK/p_here.json" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
import json, sys
rate, here = (json.load(open(p)) for p in sys.argv[1:3])
c = rate["compute"]
ok = True
def want(cond, what):
    global ok
    if not cond:
        print("FAIL predict sources:", what)
        ok = False
# From the topology file: said so, not "measured", its step time the file's.
want(c["source"] == "topology_file", f"compute.source {c.get('source')}")
want("measured_on" not in c, "compute.measured_on with device_samples_per_s in the topology")
want(c["sources"]["step_ms"] == "topology_file", f"step_ms from {c['sources']}")
want(all(v != "measured_here" for v in c["sources"].values()), f"a figure said measured: {c['sources']}")
want(abs(c["step_ms"] - rate["per_device_batch"] / 2400 * 1e3) < 1e-6, f"step_ms {c['step_ms']}, expected batch/2400 s")
want(c["sources"]["data_ms"] == "modelled" and c["data_ms"] == 0, "data_ms")
want(rate["links"]["network"]["gbps_source"] == "topology_file", f"network rate: {rate['links']['network']}")
want(rate["links"]["nvlink"]["gbps_source"] == "modelled", f"nvlink: {rate['links']['nvlink']}")
want(all(p["source"] == "modelled" for p in rate["predictions"]), "predictions not labelled modelled")
# Measured here: said so, with the CPU.
h = here["compute"]
want(h["source"] == "measured_here", f"compute.source {h.get('source')}")
want(h["sources"]["step_ms"] == "measured_here" and h["sources"]["data_ms"] == "measured_here", f"{h['sources']}")
want(h["sources"]["forward_ms"] == "modelled", "the forward:backward split is modelled")
want(isinstance(h.get("measured_on"), str) and h["measured_on"], "no measured_on")
sys.exit(0 if ok else 1)
PY
check "predict text: topology compute" 0 "^compute +from the topology file: 2400 samples/s per device.*not measured here" -- \
  "$BATON" predict "$EX" --topology "$WORK/topo_rate.json" --devices 1,2 --steps 3
check "predict text: measured compute" 0 "^compute +measured here: " -- \
  "$BATON" predict "$EX" --topology "$WORK/topo_here.json" --devices 1,2 --steps 3

echo "says what ran: $pass passed, $fail failed"
[ "$fail" = 0 ]
