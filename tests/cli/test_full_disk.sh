#!/usr/bin/env bash
# `baton train` recording into a history on a full disk (a 1 MiB tmpfs): the
# database error is printed while the run goes on, the run's own files are
# complete, and the exit code is 1 with how many events were not recorded.
# Under `baton launch` the same: the training completed, so the run is
# completed, not restarted as a crash; exit 1 and the reason say that its
# record failed (issue 29, item 6).
# Exit 77 (ctest: skipped) where a tmpfs cannot be mounted.
# Needs: BATON, SRC, WORK.
set -u
rm -rf "$WORK" && mkdir -p "$WORK/full" "$WORK/full2"
export XDG_DATA_HOME="$WORK/xdg"
if ! mount -t tmpfs -o size=1m tmpfs "$WORK/full" 2>"$WORK/mount.err"; then
  echo "SKIP: cannot mount a tmpfs: $(cat "$WORK/mount.err")"
  exit 77
fi
mount -t tmpfs -o size=1m tmpfs "$WORK/full2" || { umount "$WORK/full"; exit 1; }
trap 'umount "$WORK/full" "$WORK/full2"' EXIT
code=0
"$BATON" train "$SRC/resources/examples/digits.json" --runs-dir "$WORK/runs" --db "$WORK/full/runs.db" \
  --set train.epochs=300 --set train.log_every_steps=1 -q >"$WORK/out" 2>"$WORK/err" || code=$?
fail=0
[ "$code" = 1 ] || { echo "FAIL: exit $code, expected 1"; fail=1; }
grep -q "^baton: history database: .*(training goes on, unrecorded)" "$WORK/err" ||
  { echo "FAIL: the error was not printed when it happened"; fail=1; }
grep -qE "^baton: failed: the run was not fully recorded: .*[0-9]+ of [0-9]+ events were not recorded" "$WORK/err" ||
  { echo "FAIL: no count of the events not recorded"; fail=1; }
grep -q "completed after 6900 steps" "$WORK/out" || { echo "FAIL: the run did not finish"; fail=1; }
ls "$WORK"/runs/*/summary.json >/dev/null 2>&1 || { echo "FAIL: no summary.json"; fail=1; }
[ "$fail" = 0 ] || { sed 's/^/    /' "$WORK/err" | head -5; exit 1; }

code=0
"$BATON" launch "$SRC/resources/examples/digits.json" --np 1 --max-restarts 2 --runs-dir "$WORK/runs2" \
  --db "$WORK/full2/runs.db" --set train.epochs=20 --set train.log_every_steps=1 -q \
  >"$WORK/launch.out" 2>"$WORK/launch.err" || code=$?
[ "$code" = 1 ] || { echo "FAIL: launch: exit $code, expected 1"; fail=1; }
grep -q "completed after 1 attempt (0 restarts)" "$WORK/launch.out" ||
  { echo "FAIL: launch: not completed in one attempt (a record failure restarted as a crash?)"; fail=1; }
grep -qE "^reason +the training completed, but the run was not fully recorded: " "$WORK/launch.out" ||
  { echo "FAIL: launch: the reason does not name the record failure"; fail=1; }
[ "$fail" = 0 ] || { sed 's/^/    /' "$WORK/launch.out" "$WORK/launch.err" | tail -15; exit 1; }
echo "full disk: ok"
