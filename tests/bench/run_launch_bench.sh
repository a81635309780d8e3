#!/usr/bin/env bash
# baton launch's recovery and its heartbeat's cost, measured:
#   tests/bench/run_launch_bench.sh [BUILD_DIR]
#  1. The time from a rank's death (SIGKILL, rank 1 of 2,
#     multi_worker_mirrored) to the next training step of the restarted
#     job, for the digits MLP and the bundled GPT (2 layers of 128, context
#     128); goal under 5 s. Three kills each; every figure is printed.
#  2. The heartbeat's cost per step: `baton train` on the digits MLP (one
#     thread, 2000 steps) with a heartbeat every 0.1 s against none,
#     alternating, median of 5 each; goal under 1%.
# Prints figures and the CPU model; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
baton=$build/bin/baton
[ -x "$baton" ] || { echo "build baton first: cmake --build $build --target baton"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $("$baton" --version | head -1)"

cat > "$work/fault.sh" <<'EOF'
#!/bin/bash
if [ "$OMPI_COMM_WORLD_RANK" = 1 ] && mkdir "$FAULT_MARK" 2>/dev/null; then
  me=$$
  ( sleep "$FAULT_DELAY"; date +%s.%N > "$FAULT_MARK.time"; kill -KILL "$me" ) &
fi
exec "$@"
EOF
chmod +x "$work/fault.sh"

# recovery NAME SLUG CONFIG DELAY SET...: three kills; prints death -> next step.
recovery() {
  local name=$1 slug=$2 config=$3 delay=$4
  shift 4
  local figures=()
  for trial in 1 2 3; do
    local id="$slug-$trial" events="$work/$slug-$trial.jsonl"
    FAULT_MARK="$work/$id.mark" FAULT_DELAY=$delay "$baton" launch "$config" --np 2 \
      --runs-dir "$work/runs" --db "$work/history.db" --run-id "$id" --events "$events" \
      --rank-wrapper "$work/fault.sh" --set strategy.type=multi_worker_mirrored \
      --set train.log_every_steps=1 "$@" -q > "$work/$id.out" 2>&1 || {
        echo "$name trial $trial: baton launch failed:"; tail -5 "$work/$id.out"; continue; }
    figures+=("$(python3 - "$events" "$work/$id.mark.time" <<'EOF'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
death = float(open(sys.argv[2]).read())
restart = next((i for i, e in enumerate(events) if e.get("type") == "restart"), None)
if restart is None:
    print("no restart (the kill came after the end)")
else:
    step = next(e for e in events[restart:] if e.get("type") == "step")
    print("%.2f s" % (step["time"] - death))
EOF
)")
  done
  printf "%-40s %s\n" "$name: death -> next step" "${figures[*]}"
}

digits=$src/resources/examples/digits.json
recovery "digits MLP, 2 ranks" digits "$digits" 1.0 --set train.epochs=400 \
  --set checkpoint.every_steps=50
recovery "GPT 2x128, context 128, 2 ranks" gpt "$src/resources/examples/gpt_text.json" 4.0 \
  --set model.n_layer=2 --set train.steps=200 --set checkpoint.every_steps=10 \
  --set train.sample_every_steps=0 --set threads=1
echo "(goal: under 5 s; the restart includes mpirun's start, loading the data and the checkpoint)"

# Heartbeat cost: samples/s from summary.json, with and without.
rate() {  # rate RUN_ID [--heartbeat S]
  local id=$1
  shift
  "$baton" train "$digits" --set train.epochs=90 --set threads=1 \
    --set checkpoint.every_epoch=false --runs-dir "$work/hb" --no-db --run-id "$id" -q "$@" \
    > /dev/null
  python3 -c "import json; print(json.load(open('$work/hb/$id/summary.json'))['samples_per_s'])"
}
without=() with=()
for i in 1 2 3 4 5; do
  without+=("$(rate "off-$i")")
  with+=("$(rate "on-$i" --heartbeat 0.1)")
done
python3 - "${without[*]}" "${with[*]}" <<'EOF'
import statistics, sys
off = statistics.median(map(float, sys.argv[1].split()))
on = statistics.median(map(float, sys.argv[2].split()))
spread = lambda xs: "%.0f-%.0f" % (min(xs), max(xs))
print("heartbeat every 0.1 s: median %.0f samples/s (%s) against %.0f (%s) without: cost %+.2f%%"
      " per step (goal under 1%%; a negative cost is noise)"
      % (on, spread(list(map(float, sys.argv[2].split()))), off,
         spread(list(map(float, sys.argv[1].split()))), 100.0 * (off - on) / off))
EOF
