#!/usr/bin/env bash
# What a user cannot lose, on a disk that fails them:
#   1. a checkpoint directory that fills up mid-run (a 1 MiB tmpfs): the
#      error names the path, the checkpoints written before are whole and
#      a resume takes the newest, no torn file is left, the history records
#      the run as failed with the reason;
#   2. `baton history export` onto a full disk: the error names the file,
#      no file (nor a temporary one) is left;
#   3. a read-only runs directory, and a history database on a read-only
#      file system: a clear error naming it before anything is trained;
#   4. a history database owned by another user (the run is made as
#      nobody): a clear error naming it before anything is trained.
# Exit 77 (ctest: skipped) where a tmpfs cannot be mounted; part 4 is
# skipped, and says so, where this is not root.
# Needs: BATON, SRC, WORK.
set -u
# Mounts a run killed earlier left behind, then a fresh folder.
for m in ck full ro rodb; do umount "$WORK/$m" 2>/dev/null; done
rm -rf "$WORK" && mkdir -p "$WORK/ck" "$WORK/full" "$WORK/ro" "$WORK/rodb"
export XDG_DATA_HOME="$WORK/xdg"
mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m"; done; }
trap cleanup EXIT
mount_tmpfs() {  # DIR OPTIONS
  if ! mount -t tmpfs -o "$2" tmpfs "$1" 2>"$WORK/mount.err"; then
    echo "SKIP: cannot mount a tmpfs: $(cat "$WORK/mount.err")"
    exit 77
  fi
  mounted+=("$1")
}
# Every mount up front: a skip never hides a part that already failed.
mount_tmpfs "$WORK/ck" size=1m
mount_tmpfs "$WORK/full" size=64k
mount_tmpfs "$WORK/ro" ro,size=64k
mount_tmpfs "$WORK/rodb" size=4m
fail=0
bad() { echo "FAIL: $*"; fail=1; }
EX="$SRC/resources/examples/digits.json"
DB="$WORK/history.db"

# 1. Checkpoints of 313 KB each, 3 kept: the 4th write meets a full disk.
code=0
"$BATON" train "$EX" --runs-dir "$WORK/runs" --db "$DB" --run-id ckfull --checkpoint-dir "$WORK/ck" \
  --set checkpoint.every_steps=10 --set checkpoint.every_epoch=false --set checkpoint.keep=3 -q \
  >"$WORK/out1" 2>"$WORK/err1" || code=$?
[ "$code" = 1 ] || bad "checkpoint on a full disk: exit $code, expected 1"
grep -q "$WORK/ck.*No space left on device" "$WORK/err1" ||
  bad "checkpoint on a full disk: the error does not name the path and the reason: $(head -3 "$WORK/err1")"
ls -A "$WORK/ck" | grep -q "tmp" && bad "a temporary file was left: $(ls -A "$WORK/ck")"
n=$(ls "$WORK/ck" | grep -c '^ckpt-.*\.bin$')
[ "$n" = 3 ] || bad "expected the 3 checkpoints written before the disk filled, found $n: $(ls "$WORK/ck")"
newest=$(ls "$WORK/ck" | grep '^ckpt-' | sort | tail -1 | sed 's/ckpt-0*\([0-9]*\)\.bin/\1/')
"$BATON" history show ckfull --db "$DB" >"$WORK/show1" 2>&1 || bad "history show ckfull failed"
grep -qE "status +failed" "$WORK/show1" || bad "the run is not recorded as failed: $(grep -i status "$WORK/show1")"
grep -q "No space left on device" "$WORK/show1" || bad "the history does not give the reason"
# The checkpoints left are whole: a resume from a copy on a sound disk
# starts from the newest.
cp -r "$WORK/ck" "$WORK/ck_copy"
"$BATON" train "$EX" --runs-dir "$WORK/runs" --no-db --run-id ckfull --checkpoint-dir "$WORK/ck_copy" \
  --resume --set train.steps=$((newest + 1)) --events - -q >"$WORK/out1r" 2>"$WORK/err1r" ||
  bad "the resume from the checkpoints left failed: $(head -3 "$WORK/err1r")"
python3 - "$WORK/out1r" "$newest" <<'EOF' || fail=1
import json, sys
starts = [e for e in map(json.loads, filter(str.strip, open(sys.argv[1]))) if e.get("type") == "run_start"]
if not starts or starts[0].get("start_step") != int(sys.argv[2]):
    print(f"FAIL: the resume did not start at step {sys.argv[2]}: {starts[:1]}")
    sys.exit(1)
EOF

# 2. An export onto a full disk (filled first).
dd if=/dev/zero of="$WORK/full/filler" bs=4k count=64 2>/dev/null
code=0
"$BATON" history export ckfull --db "$DB" --format csv --out "$WORK/full/samples.csv" \
  >"$WORK/out2" 2>"$WORK/err2" || code=$?
[ "$code" = 1 ] || bad "export on a full disk: exit $code, expected 1"
grep -q "$WORK/full/samples.csv.*No space left on device" "$WORK/err2" ||
  bad "export on a full disk: the error does not name the file and the reason: $(head -3 "$WORK/err2")"
[ "$(ls -A "$WORK/full")" = filler ] || bad "export on a full disk left files: $(ls -A "$WORK/full")"

# 3. A read-only runs directory.
code=0
"$BATON" train "$EX" --runs-dir "$WORK/ro/runs" --no-db --events - -q >"$WORK/out3" 2>"$WORK/err3" || code=$?
[ "$code" = 2 ] || bad "read-only runs directory: exit $code, expected 2"
grep -q "$WORK/ro/runs.*Read-only file system" "$WORK/err3" ||
  bad "read-only runs directory: the error does not name it: $(head -3 "$WORK/err3")"
grep -q '"type": *"step"' "$WORK/out3" && bad "read-only runs directory: training started"

# 3b. A history database on a read-only file system.
cp "$DB" "$WORK/rodb/history.db"
mount -o remount,ro "$WORK/rodb" || bad "cannot remount $WORK/rodb read-only"
code=0
"$BATON" train "$EX" --runs-dir "$WORK/runs" --db "$WORK/rodb/history.db" --events - -q \
  >"$WORK/out3b" 2>"$WORK/err3b" || code=$?
[ "$code" = 2 ] || bad "a history on a read-only file system: exit $code, expected 2"
grep -q "$WORK/rodb/history.db: cannot record in this history database: the file is on a read-only file system" "$WORK/err3b" ||
  bad "a history on a read-only file system: $(head -3 "$WORK/err3b")"
grep -q '"type": *"step"' "$WORK/out3b" && bad "a history on a read-only file system: training started"

# 4. A history database owned by another user.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
  as_nobody test -r "$EX" -a -x "$BATON" 2>/dev/null; then
  mkdir -p "$WORK/nobody"
  chmod 777 "$WORK/nobody"
  chmod 755 "$WORK"
  code=0
  as_nobody env HOME="$WORK/nobody" XDG_DATA_HOME="$WORK/nobody" \
    "$BATON" train "$EX" --runs-dir "$WORK/nobody/runs" --db "$DB" --events - -q \
    >"$WORK/out4" 2>"$WORK/err4" || code=$?
  [ "$code" = 2 ] || bad "another user's history: exit $code, expected 2"
  grep -q "$DB: cannot record in this history database: .*belongs to root" "$WORK/err4" ||
    bad "another user's history: the error does not name it and its owner: $(head -3 "$WORK/err4")"
  grep -q '"type": *"step"' "$WORK/out4" && bad "another user's history: training started"
else
  echo "skipped: another user's history (needs root, setpriv, and the build readable by nobody)"
fi

[ "$fail" = 0 ] || { for f in err1 err2 err3 err3b err4; do [ -s "$WORK/$f" ] && sed "s/^/    $f: /" "$WORK/$f" | head -5; done; exit 1; }
echo "disk faults: ok"
