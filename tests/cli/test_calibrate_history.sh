#!/usr/bin/env bash
# `baton calibrate --from-history` leaves out link samples marked eager
# (messages under MPI's eager limit: a copy out of MPI's buffer, whose
# "bandwidth" is latency-bound, not the link's). A recorded run is made
# into a 4-rank MPI run on two hosts (a, a, b, b) whose measured samples
# give shm 1 GB/s and network 0.1 GB/s, beside eager samples at 40 and
# 25 GB/s; the calibration must hold the measured figures exactly.
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
fail=0
pass=0
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
source "$(dirname "$0")/check.sh"
H="$WORK/history.db"

check "a run recorded" 0 "history +run 1 in $H" -- \
  "$BATON" train "$SRC/resources/examples/digits.json" --runs-dir "$WORK/runs" --db "$H" \
  --set train.epochs=1 -q
# The run becomes an MPI run with its hosts; its own samples (none for
# one device) are replaced by these: (src, dst, bytes, seconds, eager).
mpi_run() {  # mpi_run SAMPLES...: the run's link samples, each "src dst bytes seconds eager"
  python3 - "$H" "$@" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE runs SET topology = ? WHERE id = 1",
           (json.dumps({"communication": "mpi/ring", "rank_hosts": ["a", "a", "b", "b"]}),))
db.execute("DELETE FROM link_samples WHERE run = 1")
for seq, s in enumerate(sys.argv[2:]):
    src, dst, nbytes, seconds, eager = s.split()
    db.execute("INSERT INTO link_samples (run, step, seq, src, dst, wall_time_s, num_bytes, "
               "seconds, estimated, wait_s, eager) VALUES (1, ?, ?, ?, ?, 0, ?, ?, 0, 0, ?)",
               (seq, 1000000 + seq, int(src), int(dst), int(nbytes), float(seconds), int(eager)))
db.commit()
PY
}
gbps() {  # gbps FILE CLASS: the class's bandwidth in the calibration file
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["links"][sys.argv[2]]["gbps"])' "$1" "$2"
}

if mpi_run "0 1 100000000 0.1 0" "2 3 100000000 0.1 0" "1 2 10000000 0.1 0" \
  "0 1 4000000 0.0001 1" "3 2 4000 0.0000001 1" "3 0 4000000 0.00016 1" "1 2 60000 0.0000024 1"; then
  pass=$((pass + 1))
else
  echo "FAIL the history has no eager column for link samples"; fail=$((fail + 1))
fi
check "calibrate: eager samples left out" 0 "network +10000000 .* 1  1" -- \
  "$BATON" calibrate --from-history --db "$H" --run 1 --out "$WORK/cal.json"
shm=$(gbps "$WORK/cal.json" shm) net=$(gbps "$WORK/cal.json" network)
if python3 -c 'import sys; s, n = map(float, sys.argv[1:]); sys.exit(not (abs(s - 1) < 1e-9 and abs(n - 0.1) < 1e-9))' "$shm" "$net"; then
  pass=$((pass + 1))
else
  echo "FAIL calibrate: shm $shm GB/s (want 1), network $net GB/s (want 0.1): eager samples taken"
  fail=$((fail + 1))
fi
# A run with eager samples alone gives no bandwidth at all.
mpi_run "0 1 4000000 0.0001 1" "1 2 60000 0.0000024 1" || { echo "FAIL mpi_run"; fail=$((fail + 1)); }
check "calibrate: eager samples alone" 2 "--from-history: no measured link" -- \
  "$BATON" calibrate --from-history --db "$H" --run 1 --out "$WORK/cal2.json"

echo "calibrate_history: $pass passed, $fail failed"
[ "$fail" = 0 ]
