#!/usr/bin/env bash
# Events that could not be written are a failure, said when it happens:
#   train  1. `baton train --events /dev/full`: exit 1, the error names the
#             file and the reason, the history keeps the whole run (completed,
#             its steps) and an error log saying which file lost its events;
#          2. `--events` on a 64 KiB tmpfs that fills mid-run: the same, and
#             the lines written before the disk filled are in the file;
#          3. the run directory's own events.jsonl on a full device: exit 1
#             naming it, the history and the other run files intact.
#   launch 4. `baton launch --events /dev/full`: exit 1, the error names the
#             file, the history keeps the run and the error;
#          5. `baton launch --events FILE` appends, as `train --events` does.
# PART=train (exit 77, ctest: skipped, where a tmpfs cannot be mounted) or
# PART=launch (needs mpirun). Needs: BATON, SRC, WORK, PART.
set -u
umount "$WORK/small" 2>/dev/null
rm -rf "$WORK" && mkdir -p "$WORK/small"
export XDG_DATA_HOME="$WORK/xdg"
EX="$SRC/resources/examples/digits.json"
DB="$WORK/history.db"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The run NAME is in the history, completed after STEPS steps, with an error
# log naming FILE.
history_kept() {  # NAME STEPS FILE
  "$BATON" history show "$1" --db "$DB" >"$WORK/show_$1" 2>&1 || { bad "$1: history show failed"; return; }
  grep -qE "^status +completed" "$WORK/show_$1" || bad "$1: not recorded as completed: $(grep status "$WORK/show_$1")"
  grep -qE "^loss +[0-9]+ +[0-9]+ +[^ ]+ +$2 " "$WORK/show_$1" ||
    bad "$1: the history lacks the loss up to step $2: $(grep -i loss "$WORK/show_$1" | head -2)"
  "$BATON" history export "$1" --db "$DB" --format json >"$WORK/export_$1" 2>&1 || { bad "$1: export failed"; return; }
  python3 - "$WORK/export_$1" "$3" <<'PY' || bad "$1: the history has no error naming $3"
import json, sys
doc = json.load(open(sys.argv[1]))
msgs = [e.get("message", "") for e in doc.get("events", [])]
sys.exit(0 if any(sys.argv[2] in m and "No space left on device" in m for m in msgs) else 1)
PY
}

if [ "$PART" = train ]; then
  cleanup() { umount "$WORK/small" 2>/dev/null; }
  trap cleanup EXIT
  if ! mount -t tmpfs -o size=64k tmpfs "$WORK/small" 2>"$WORK/mount.err"; then
    echo "SKIP: cannot mount a tmpfs: $(cat "$WORK/mount.err")"
    exit 77
  fi

  # 1. /dev/full: the very first write fails.
  code=0
  "$BATON" train "$EX" --runs-dir "$WORK/runs" --db "$DB" --run-id devfull --events /dev/full \
    --set train.steps=30 --set train.log_every_steps=5 -q >"$WORK/out1" 2>"$WORK/err1" || code=$?
  [ "$code" = 1 ] || bad "--events /dev/full: exit $code, expected 1"
  grep -q "^baton: events file /dev/full: write failed (No space left on device)" "$WORK/err1" ||
    bad "--events /dev/full: the error was not said when it happened: $(head -3 "$WORK/err1")"
  grep -q "^baton: failed: output was lost: events file /dev/full" "$WORK/err1" ||
    bad "--events /dev/full: no failure at the end: $(tail -2 "$WORK/err1")"
  grep -q "completed after 30 steps" "$WORK/out1" || bad "--events /dev/full: the run did not finish"
  history_kept devfull 30 /dev/full

  # 2. A disk that fills mid-run: 400 step events of ~400 bytes each
  # against 64 KiB.
  EV="$WORK/small/events.jsonl"
  code=0
  "$BATON" train "$EX" --runs-dir "$WORK/runs" --db "$DB" --run-id midrun --events "$EV" \
    --set train.steps=400 --set train.log_every_steps=1 -q >"$WORK/out2" 2>"$WORK/err2" || code=$?
  [ "$code" = 1 ] || bad "--events on a disk that fills: exit $code, expected 1"
  grep -q "^baton: events file $EV: write failed (No space left on device)" "$WORK/err2" ||
    bad "--events on a disk that fills: no error naming the file: $(head -3 "$WORK/err2")"
  grep -q "completed after 400 steps" "$WORK/out2" || bad "--events on a disk that fills: the run did not finish"
  head -1 "$EV" | grep -q '"type":"run_start"' || bad "the lines before the disk filled are not in $EV"
  n=$(grep -c '"type":"step"' "$EV")
  { [ "$n" -gt 10 ] && [ "$n" -lt 400 ]; } || bad "expected the disk to fill mid-run, $n step lines in $EV"
  history_kept midrun 400 "$EV"

  # 3. The run directory's own events.jsonl on a full device (a link to
  # /dev/full where the run will write it): the other files are whole.
  mkdir -p "$WORK/runs/rundir" && ln -s /dev/full "$WORK/runs/rundir/events.jsonl"
  code=0
  "$BATON" train "$EX" --runs-dir "$WORK/runs" --db "$DB" --run-id rundir \
    --set train.steps=30 --set train.log_every_steps=5 -q >"$WORK/out3" 2>"$WORK/err3" || code=$?
  [ "$code" = 1 ] || bad "events.jsonl on a full device: exit $code, expected 1"
  grep -q "^baton: events file $WORK/runs/rundir/events.jsonl: write failed (No space left on device)" "$WORK/err3" ||
    bad "events.jsonl on a full device: no error naming it: $(head -3 "$WORK/err3")"
  [ -s "$WORK/runs/rundir/summary.json" ] || bad "events.jsonl on a full device: no summary.json"
  history_kept rundir 30 "$WORK/runs/rundir/events.jsonl"
elif [ "$PART" = launch ]; then
  # 4. launch --events /dev/full.
  code=0
  "$BATON" launch "$EX" --np 1 --runs-dir "$WORK/runs" --db "$DB" --run-id ldevfull --events /dev/full \
    --set train.steps=30 --set train.log_every_steps=5 -q >"$WORK/out4" 2>"$WORK/err4" || code=$?
  [ "$code" = 1 ] || bad "launch --events /dev/full: exit $code, expected 1: $(tail -3 "$WORK/err4")"
  grep -q "^baton launch: error: --events /dev/full: write failed (No space left on device)" "$WORK/err4" ||
    bad "launch --events /dev/full: the error was not said when it happened: $(head -3 "$WORK/err4")"
  grep -q "^baton launch: failed: output was lost: --events /dev/full" "$WORK/err4" ||
    bad "launch --events /dev/full: no failure at the end: $(tail -2 "$WORK/err4")"
  grep -q "ldevfull: completed after 1 attempt" "$WORK/out4" || bad "launch: the run did not complete: $(tail -3 "$WORK/out4")"
  history_kept ldevfull 30 /dev/full

  # 5. Appending: what the file held stays, the launch's lines follow.
  echo '{"type":"earlier"}' >"$WORK/launch.jsonl"
  code=0
  "$BATON" launch "$EX" --np 1 --runs-dir "$WORK/runs" --db "$DB" --run-id lappend --events "$WORK/launch.jsonl" \
    --set train.steps=10 -q >"$WORK/out5" 2>"$WORK/err5" || code=$?
  [ "$code" = 0 ] || bad "launch --events FILE: exit $code: $(tail -3 "$WORK/err5")"
  head -1 "$WORK/launch.jsonl" | grep -q '"earlier"' || bad "launch --events truncated the file"
  grep -q '"type":"launch_end"' "$WORK/launch.jsonl" || bad "launch --events: no launch_end line"
else
  echo "PART must be train or launch"; exit 2
fi
[ "$fail" = 0 ] || exit 1
echo "events lost ($PART): ok"
