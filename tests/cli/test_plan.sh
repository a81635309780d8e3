#!/usr/bin/env bash
# `baton plan`: a run's memory before Start, for every sharding mode the
# strategy runs, as a person would read it and as JSON; bad input exits 2
# naming what is wrong. Then the plan against the measure: a small GPT
# under mirrored (2 replicas, sharding none, optimizer, gradients and
# parameters, and none with its blocks recomputed, which must grow less than none) plans, in
# summary.json, what its process's resident set grows by (its peak less
# its resident set at start) within 15% (or 32 MiB, where that is more). That comparison is skipped (exit
# 77) under AddressSanitizer, whose shadow memory is in the resident set.
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
fail=0
pass=0
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
source "$(dirname "$0")/check.sh"
EX="$SRC/resources/examples"

check "plan a mirrored run" 0 "optimizer +[0-9.]+ +[0-9.]+ +[0-9.]+" -- \
  "$BATON" plan "$EX/mirrored.json"
check "it names the model and says the figures are modelled" 0 "modelled from the layer shapes" -- \
  "$BATON" plan "$EX/mirrored.json"
check "one mode for a strategy that shards nothing" 0 'runs "none" only' -- \
  "$BATON" plan "$EX/central_storage.json"
json=$("$BATON" plan "$EX/mirrored.json" --set strategy.replicas=4 --json 2>&1)
if python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert j["source"] == "modelled" and j["replicas"] == 4, j
none, zero1, zero2, zero3 = j["modes"]
assert none["sharding"] == "none" and zero1["sharding"] == "optimizer", j
assert zero2["sharding"] == "gradients" and zero3["sharding"] == "parameters", j
n, z = none["per_replica"], zero1["per_replica"]
# ZeRO-2: ZeRO-1's state and buffers, its gradients one window of at most
# the whole model's.
z2 = zero2["per_replica"]
assert z2["optimizer_state"] == z["optimizer_state"], (z2, z)
assert z2["communication"] == z["communication"], (z2, z)
assert 0 < z2["gradients"] <= n["gradients"], (z2, n)
# ZeRO-3: ZeRO-2's gradients and state, the values a window and a piece.
z3 = zero3["per_replica"]
assert z3["gradients"] == z2["gradients"] and z3["optimizer_state"] == z2["optimizer_state"], z3
assert z3["parameters"] == z2["gradients"] + z2["communication"] // 2, (z3, z2)
# (this small model is one group at the default 25 MiB buckets: no less)
assert z3["total"] <= z2["total"], (z3, z2)
# Adam's two moments, a quarter of them sharded over 4 replicas.
assert n["optimizer_state"] == 2 * n["parameters"], n
assert abs(z["optimizer_state"] - n["optimizer_state"] / 4) <= 8 * 4, (z, n)
assert n["communication"] == 0 and z["communication"] > 0, (n, z)
assert z["total"] < n["total"], (z, n)
assert none["per_process"] == 4 * n["total"] + none["data"] + none["cache"], none
PY
then pass=$((pass + 1)); else echo "FAIL plan --json: its figures"; echo "$json" | head -20; fail=$((fail + 1)); fi
check "a GPT's plan has each mode with recomputation" 0 "none +yes +[0-9.]+" -- \
  "$BATON" plan "$EX/gpt_text.json" --set strategy.type=mirrored
json=$("$BATON" plan "$EX/gpt_text.json" --set strategy.type=mirrored --json 2>&1)
if python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
modes = [(m["sharding"], m["activation_checkpointing"]) for m in j["modes"]]
assert modes == [("none", False), ("none", True), ("optimizer", False), ("optimizer", True),
                 ("gradients", False), ("gradients", True), ("parameters", False),
                 ("parameters", True)], modes
kept, again = j["modes"][0]["per_replica"], j["modes"][1]["per_replica"]
# One block's intermediates of four (and the others' inputs and outputs).
assert again["activations"] < 0.5 * kept["activations"], (again, kept)
assert again["parameters"] == kept["parameters"], (again, kept)
PY
then pass=$((pass + 1)); else echo "FAIL plan --json of a GPT: recomputation"; echo "$json" | head -30; fail=$((fail + 1)); fi
# ZeRO-2's window follows strategy.allreduce.bucket_mb: buckets of a
# quarter MiB make it about a block's gradients, not the model's.
json=$("$BATON" plan "$EX/gpt_text.json" --set strategy.type=mirrored \
         --set strategy.allreduce.bucket_mb=0.25 --json 2>&1)
if python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
none = [m for m in j["modes"] if m["sharding"] == "none"][0]["per_replica"]
zero2 = [m for m in j["modes"] if m["sharding"] == "gradients"][0]["per_replica"]
zero3 = [m for m in j["modes"] if m["sharding"] == "parameters"][0]["per_replica"]
assert zero2["gradients"] < 0.4 * none["gradients"], (zero2, none)
# Two replicas: the values' window and half of them.
assert zero3["parameters"] < 0.9 * none["parameters"], (zero3, none)
PY
then pass=$((pass + 1)); else echo "FAIL plan --json: ZeRO-2's window"; echo "$json" | head -30; fail=$((fail + 1)); fi
# --predict: each layout's step, modelled from one device's step measured
# here (2 steps) and the links' figures: ZeRO-3 gathers the values once
# more than ZeRO-2, recomputation adds a forward.
json=$("$BATON" plan "$EX/gpt_text.json" --set strategy.type=mirrored --set train.global_batch_size=4 \
         --set strategy.allreduce.bucket_mb=0.25 --predict --steps 2 --json 2>&1)
if python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
step = {(m["sharding"], m["activation_checkpointing"]): m["predicted_step_ms"] for m in j["modes"]}
assert all(m["predicted_source"] == "modelled" for m in j["modes"]), j
assert "measured here" in j["predicted_from"], j
assert all(v > 0 for v in step.values()), step
assert step[("parameters", False)] > step[("gradients", False)], step
for mode in ("none", "optimizer", "gradients", "parameters"):
    assert step[(mode, True)] > step[(mode, False)], (mode, step)
PY
then pass=$((pass + 1)); else echo "FAIL plan --predict: each layout's step"; echo "$json" | tail -30; fail=$((fail + 1)); fi
check "the predicted step is labelled so" 0 "step ms \(predicted\)" -- \
  "$BATON" plan "$EX/mirrored.json" --predict --steps 1
check "recomputation is the GPT's" 2 "model.activation_checkpointing: expected false" -- \
  "$BATON" plan "$EX/cnn_digits.json" --set model.activation_checkpointing=true
check "a missing config" 2 "nope.json" -- "$BATON" plan "$WORK/nope.json"
check "no processes" 2 "processes" -- "$BATON" plan "$EX/mirrored.json" --processes 0
check "a sharding a strategy does not run" 2 "strategy.sharding" -- \
  "$BATON" plan "$EX/central_storage.json" --set strategy.sharding=parameters
check "an allreduce setting a sharded run does not use" 2 \
  "strategy.allreduce.algorithm: \"ring\" does not apply to strategy.sharding" -- \
  "$BATON" plan "$EX/multi_worker_mirrored.json" --set strategy.sharding=parameters
check "a bad key" 2 "strategy.shardin" -- \
  "$BATON" plan "$EX/mirrored.json" --set strategy.shardin=optimizer

echo "plan cli: $pass passed, $fail failed"
[ "$fail" = 0 ] || exit 1

if ldd "$BATON" 2>/dev/null | grep -q libasan; then
  echo "SKIP planned against measured memory: under AddressSanitizer its shadow memory is in the resident set"
  exit 77
fi
# A process's own cap (a Slurm job's or a container's; here RLIMIT_AS, 4 GB,
# which AddressSanitizer's shadow would not fit): the plan is held against
# it, not the machine, and says so; a run that needs more is refused
# before any buffer is made, naming it.
capped() { bash -c 'ulimit -v 4000000; exec "$@"' capped "$@"; }
big=(--set strategy.type=mirrored --set train.global_batch_size=1024)
check "the plan is held against the process's address-space limit" 0 \
  "against the [0-9.]+ MiB the address-space limit \(RLIMIT_AS\) leaves" -- \
  capped "$BATON" plan "$EX/gpt_text.json" "${big[@]}"
check "a run the limit cannot hold is refused, naming it" 2 \
  "the address-space limit \(RLIMIT_AS\) has [0-9.]+ GiB available" -- \
  capped "$BATON" train "$EX/gpt_text.json" --no-db --runs-dir "$WORK/capped" -q "${big[@]}"
small=(--set strategy.type=mirrored --set strategy.replicas=2 --set train.steps=3
       --set train.log_every_steps=1 --set data.validation_split=0.01)
# none, optimizer (ZeRO-1), gradients (ZeRO-2) and parameters (ZeRO-3),
# in buckets of a quarter MiB, and none with the blocks recomputed.
for variant in none optimizer gradients parameters recompute; do
  runs="$WORK/runs_$variant"
  sharding=$variant recompute=false
  [ "$variant" = recompute ] && sharding=none recompute=true
  groups=()
  [ "$sharding" = none ] || groups=(--set strategy.allreduce.bucket_mb=0.25)
  if ! out=$("$BATON" train "$EX/gpt_text.json" --no-db --runs-dir "$runs" -q "${small[@]}" \
             --set strategy.sharding=$sharding --set model.activation_checkpointing=$recompute \
             "${groups[@]}" 2>&1); then
    echo "FAIL train the GPT ($variant)"; echo "$out" | tail -5; fail=$((fail + 1)); continue
  fi
  run=$(ls "$runs" | head -1)
  if python3 - "$runs/$run/summary.json" "$variant" "$sharding" "$recompute" "$WORK/grew_none" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
variant, sharding, recompute, kept_file = sys.argv[2], sys.argv[3], sys.argv[4] == "true", sys.argv[5]
planned = m["planned_modelled"]["per_process"]
grew = m["measured"]["peak_resident"] - m["measured"]["resident_at_start"]
print(f"  {variant}: planned {planned / 2**20:.1f} MiB, the process grew {grew / 2**20:.1f} MiB "
      f"({grew / planned - 1:+.1%})")
assert m["planned_modelled"]["sharding"] == sharding, m
assert m["planned_modelled"]["activation_checkpointing"] == recompute, m
# 15%, or 32 MiB where that is more: what the plan leaves out (thread
# stacks, the allocator's arenas, libraries' buffers: 17 MiB here in the
# none run) is the most of a recomputed run's small plan.
assert abs(grew - planned) <= max(0.15 * planned, 32 * 2**20), (planned, grew)
if variant == "none":
    open(kept_file, "w").write(str(grew))
elif variant == "recompute":
    kept = int(open(kept_file).read())
    print(f"  recomputation saved {(kept - grew) / 2**20:.1f} MiB of {kept / 2**20:.1f} (measured)")
    assert grew < kept, (grew, kept)
PY
  then pass=$((pass + 1)); else echo "FAIL planned against measured ($variant)"; fail=$((fail + 1)); fi
done
echo "plan against measure: $pass passed, $fail failed"
[ "$fail" = 0 ]
