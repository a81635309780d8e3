#!/usr/bin/env bash
# A history on a network file system - here a FUSE mount (bindfs), one of
# the kinds statfs tells: WAL's shared-memory index does not work across
# hosts there, so `baton train` records with a rollback journal, and the run
# reads back. Exit 77 (ctest: skipped) where FUSE cannot be mounted.
# Needs: BATON, SRC, WORK.
set -u
rm -rf "$WORK" && mkdir -p "$WORK/disk" "$WORK/net"
export XDG_DATA_HOME="$WORK/xdg"
if ! command -v bindfs >/dev/null 2>&1; then
  echo "SKIP: bindfs is not installed (packaging/deps.sh test installs it)"
  exit 77
fi
if ! bindfs "$WORK/disk" "$WORK/net" 2>"$WORK/mount.err"; then
  echo "SKIP: cannot mount FUSE: $(cat "$WORK/mount.err")"
  exit 77
fi
trap 'fusermount -u "$WORK/net" 2>/dev/null || umount "$WORK/net"' EXIT
[ "$(stat -f -c %t "$WORK/net")" = 65735546 ] || { echo "FAIL: the mount is not FUSE"; exit 1; }
fail=0
code=0
"$BATON" train "$SRC/resources/examples/digits.json" --runs-dir "$WORK/runs" --db "$WORK/net/runs.db" \
  --set train.epochs=1 -q >"$WORK/out" 2>"$WORK/err" || code=$?
[ "$code" = 0 ] || { echo "FAIL: train exit $code"; sed 's/^/    /' "$WORK/err" | head -5; fail=1; }
mode=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode").fetchone()[0])' "$WORK/disk/runs.db")
[ "$mode" = delete ] || { echo "FAIL: journal mode on FUSE is $mode, expected delete"; fail=1; }
[ ! -e "$WORK/disk/runs.db-wal" ] || { echo "FAIL: a WAL file on the network file system"; fail=1; }
"$BATON" history list --db "$WORK/net/runs.db" | grep -q "completed" ||
  { echo "FAIL: the run does not read back"; fail=1; }
[ "$fail" = 0 ] || exit 1
echo "network file system: rollback journal, run recorded"
