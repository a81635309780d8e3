#!/usr/bin/env bash
# Soak: a long multi_worker_mirrored run under `baton launch` with a rank
# SIGKILLed again and again, against the same run uninterrupted:
#   tests/bench/run_soak_bench.sh [BUILD_DIR] [MINUTES] [KILL_EVERY_S]
# (defaults: 30 minutes, a kill every 300 s). The bundled GPT (2 layers of
# 128, context 128), 2 ranks of one thread, a checkpoint every 100 steps;
# its length in steps is set from a short measured run so the uninterrupted
# run lasts about MINUTES. Reports the restarts, the time they cost (the
# killed run's wall time less the uninterrupted one's, in all and per
# restart) and whether the final parameters, buffers and optimizer state
# are bit-identical to the uninterrupted run's. Not in CI: it takes twice
# MINUTES. Prints figures and the CPU model; never fails on time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
minutes=${2:-30}
every=${3:-300}
baton=$build/bin/baton
compare=$build/bin/compare_checkpoints
for b in "$baton" "$compare"; do
  [ -x "$b" ] || { echo "build $(basename "$b") first: cmake --build $build"; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "CPU:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $("$baton" --version | head -1)"

job() {  # job RUN_ID STEPS [launch options...]
  local id=$1 steps=$2
  shift 2
  "$baton" launch "$src/resources/examples/gpt_text.json" --np 2 --runs-dir "$work/runs" \
    --db "$work/history.db" --run-id "$id" --events "$work/$id.jsonl" --max-restarts 1000 \
    --set strategy.type=multi_worker_mirrored --set threads=1 --set model.n_layer=2 \
    --set train.steps="$steps" --set train.sample_every_steps=0 --set train.log_every_steps=10 \
    --set checkpoint.every_steps=100 --set checkpoint.keep=2 -q "$@" > "$work/$id.out" 2>&1
}

# Steps per second, from a short run (its start included, as in the real ones).
t0=$(date +%s.%N)
job probe 200
rate=$(python3 -c "print(200 / ($(date +%s.%N) - $t0))")
steps=$(python3 -c "print(max(300, int($rate * $minutes * 60) // 100 * 100))")
echo "about $(printf %.1f "$rate") steps/s: $steps steps for about $minutes minutes; a rank killed every $every s"

t0=$(date +%s.%N)
job ref "$steps"
ref_s=$(python3 -c "print($(date +%s.%N) - $t0)")

t0=$(date +%s.%N)
job soak "$steps" &
launcher=$!
kills=0
while kill -0 "$launcher" 2>/dev/null; do
  # Wait `every` seconds (or the run's end), then kill one rank at random.
  for ((i = 0; i < every * 10; i++)); do
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$launcher" 2>/dev/null || break
  # The ranks (not mpirun, whose arguments name them too).
  mapfile -t ranks < <(pgrep -f -- "^[^ ]*/baton train - .*--run-id soak( |$)" || true)
  [ ${#ranks[@]} -gt 0 ] || continue
  victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
  kill -KILL "$victim" 2>/dev/null && kills=$((kills + 1)) &&
    echo "  $(date +%T): killed rank process $victim"
done
status=0
wait "$launcher" || status=$?
soak_s=$(python3 -c "print($(date +%s.%N) - $t0)")
restarts=$(grep -c '"type":"restart"' "$work/soak.jsonl" || true)

printf "%-44s %s\n" "uninterrupted run:" "$(printf %.1f "$ref_s") s"
printf "%-44s %s\n" "killed run (exit $status):" "$(printf %.1f "$soak_s") s, $kills kills, $restarts restarts"
python3 - "$ref_s" "$soak_s" "$restarts" <<'PY'
import sys
ref, soak, restarts = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
lost = soak - ref
per = "%.1f s per restart" % (lost / restarts) if restarts else "no restart"
print("%-44s %.1f s (%.1f%% of the run), %s" % ("time lost:", lost, 100 * lost / ref, per))
PY
printf "%-44s " "final state against the uninterrupted run:"
"$compare" "$work/runs/ref/checkpoints" "$work/runs/soak/checkpoints" || true
[ "$status" -eq 0 ] || { echo "the killed run did not complete:"; tail -5 "$work/soak.out"; }
