#!/usr/bin/env bash
# baton predict against measured 2-rank runs on this machine: calibrate
# the MPI link between two local ranks, predict the step of a
# multi_worker_mirrored config on a 1-host x 2-device topology, run it with
# mpirun -n 2, and compare the chief's median step period with the
# prediction: within 0.55-1.45 (see the bounds below), both printed. Two cases:
#  - compute: compute-heavy (two 1024-wide layers, 128 samples a rank);
#  - comm: a wide model (two 2048-wide layers, 17 MB of gradients) with 4
#    samples a rank, where communication is at least a third of the step.
#    The test checks that share from the run's own step-time parts
#    (comm_ms over step_time_ms, the chief's median), so the case cannot
#    drift into a compute-bound one and pass without testing the
#    communication model; there the predicted communication is held to
#    0.4-1.5 of the measured (the chief's comm_ms) as well.
#    Before the model read shared memory's rate at the gradients' size
#    and counted the host's pack/reduce/unpack passes, it predicted 1.5 ms
#    of communication here against ~10 ms measured.
#
# The allreduce does not overlap backward: with overlap each rank runs a
# communication thread that polls MPI, and with two ranks on a two-core
# machine that thread takes a core from the other rank's compute - an
# oversubscription the model does not describe (said in the README).
# Needs: BATON, SRC, WORK.
set -u
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CFG="$SRC/resources/examples/multi_worker_mirrored.json"
mpirun -n 2 --oversubscribe "$BATON" calibrate --out "$WORK/cal.json" >"$WORK/cal.txt" 2>&1 ||
  { echo "FAIL calibrate"; cat "$WORK/cal.txt"; exit 1; }
grep -q '"shm"' "$WORK/cal.json" || { echo "FAIL calibrate: no shm figures in $WORK/cal.json"; exit 1; }
grep -q '"host"' "$WORK/cal.json" || { echo "FAIL calibrate: no host passes in $WORK/cal.json"; exit 1; }

# check_case NAME PER_DEVICE_BATCH MIN_COMM_SHARE TRAIN_SETS -- SETS...: a
# prediction and the run it predicts, back to back; up to three such
# pairs, every one printed: a neighbour's load on this (shared, 2-core)
# machine during one run is noise, a model that is off is off every time.
check_case() {
  local name=$1 batch=$2 min_share=$3 train_sets=$4
  shift 5
  local attempt code
  for attempt in 1 2 3; do
    "$BATON" predict "$CFG" --topology "$SRC/resources/topologies/this_host_2.json" \
      --calibration "$WORK/cal.json" --per-device-batch "$batch" --devices 1,2 "$@" --json \
      >"$WORK/predict_$name.json" 2>"$WORK/predict.err" ||
      { echo "FAIL $name: predict"; cat "$WORK/predict.err"; return 1; }
    # shellcheck disable=SC2086
    mpirun -n 2 --oversubscribe "$BATON" train "$CFG" --no-db --runs-dir "$WORK/runs" --events - -q \
      --set train.log_every_steps=2 $train_sets "$@" >"$WORK/events_$name.jsonl" 2>"$WORK/train.err" ||
      { echo "FAIL $name: train"; tail "$WORK/train.err"; return 1; }
    if python3 - "$WORK/predict_$name.json" "$WORK/events_$name.jsonl" "$name" "$attempt" "$min_share" <<'PY'
import json, statistics, sys
pred = json.load(open(sys.argv[1]))
name, attempt, min_share = sys.argv[3], sys.argv[4], float(sys.argv[5])
assert pred["modelled"] is True
two = [p for p in pred["predictions"] if p["devices"] == 2][0]["configured"]
assert two["algorithm"] == "ring", two  # the config's, as configured
# Both ranks write their events to mpirun's standard output, which can
# cut a long line (run_start's config) into another rank's: such lines are
# left out (counted), the step events the check needs are short.
steps, cut = [], 0
for line in open(sys.argv[2]):
    if line.startswith("{"):
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError:
            cut += 1
if cut:
    print(f"{name}: {cut} event line(s) cut by the other rank's output, left out")
steps = [e for e in steps if e["type"] == "step" and e["rank"] == 0][1:]
# The step's period: the chief's wall clock between step events over the
# steps between them (step_time_ms leaves out the loss's small collective).
periods = [1e3 * (b["wall_time_s"] - a["wall_time_s"]) / (b["step"] - a["step"])
           for a, b in zip(steps, steps[1:])]
assert len(periods) >= 5, f"{len(periods)} step windows"
measured = statistics.median(periods)
# The measured communication (the chief's gradient allreduce, pack to
# unpack) and its share of the step.
comm = statistics.median(e["comm_ms"] for e in steps)
share = statistics.median(e["comm_ms"] / e["step_time_ms"] for e in steps if e["step_time_ms"] > 0)
predicted = two["step_ms"]
ratio = predicted / measured
comm_ratio = two["comm_ms"] / comm if comm > 0 else float("inf")
print(f"{name} attempt {attempt}: 2 ranks here: predicted {predicted:.3f} ms a step, measured "
      f"{measured:.3f} ms (ratio {ratio:.2f}); compute predicted "
      f"{pred['compute']['step_ms']:.3f} ms (measured by predict's probe); communication "
      f"predicted {two['comm_ms']:.3f} ms, measured {comm:.3f} ms (ratio {comm_ratio:.2f}), "
      f"{share:.2f} of the measured step")
if share < min_share:
    print(f"{name}: communication is {share:.2f} of the measured step, under the {min_share:.2f} "
          "this case needs")
    sys.exit(4)
# The bounds hold on both CPUs these machines have. On the AMD EPYC
# machines: compute-bound step 0.85-1.01, communication-bound step
# 0.89-1.12 and communication 0.68-0.89. On the Intel Xeon VMs the
# communication-bound case runs under the model (step 0.62-0.73,
# communication 0.45-0.61 over 12 pairs, 2026-12-06): the trainer's 16.6 MB
# allreduce takes ~10 ms there against 3.4-4.9 ms in `baton bench
# allreduce` at 16 MB and the calibration's 5.3 ms, a gap the model does
# not describe yet (README). So: the step within 0.55-1.45; where
# communication is a real part of the step, the communication within
# 0.4-1.5 as well - a step that fits could otherwise hide a communication
# model that is off, and the model before the by-size shm points and the
# host's passes (0.14) still fails.
ok = 0.55 <= ratio <= 1.45
if min_share > 0:
    ok = ok and 0.4 <= comm_ratio <= 1.5
sys.exit(0 if ok else 3)
PY
    then return 0
    else
      code=$?
      [ "$code" = 3 ] || [ "$code" = 4 ] || { echo "FAIL $name: the check itself failed (exit $code)"; return 1; }
    fi
  done
  echo "FAIL $name: no attempt had the prediction within 0.55-1.45 of the measured step" \
    "(with communication at least $min_share of it)"
  return 1
}

fail=0
check_case compute 128 0 "--set train.epochs=4" -- --set 'model.layers=[64,1024,1024,10]' \
  --set train.global_batch_size=256 --set strategy.allreduce.overlap=false || fail=1
check_case comm 4 0.3333 "--set train.steps=40" -- --set 'model.layers=[64,2048,2048,10]' \
  --set train.global_batch_size=8 --set strategy.allreduce.overlap=false || fail=1
exit $fail
