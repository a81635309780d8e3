#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD_DIR for SECONDS each on its seed
# corpus (tests/fuzz/corpus/<target>/, copied: what the run finds stays in
# WORK), JOBS at a time, and prints a line per target: executions, corpus
# size, and the outcome. Exit 1 when any target crashed, leaked, hung or
# failed to run (its artifact is kept in WORK/artifacts).
#   run_fuzzers.sh BUILD_DIR SECONDS [JOBS] [WORK]
set -u
build=$1
secs=$2
jobs=${3:-2}
work=${4:-$build/fuzz_work}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/artifacts"
targets=()
for seeds in "$here"/corpus/*/; do
  t=$(basename "$seeds")
  bin=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "FAIL $t: not built in $build"; exit 1; }
  targets+=("$t:$bin")
done
run_one() {
  local t=${1%%:*} bin=${1#*:}
  mkdir -p "$work/corpus/$t" "$work/tmp/$t"
  # The files a target writes its input to stay in WORK.
  TMPDIR="$work/tmp/$t" "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" "$work/corpus/$t" "$here/corpus/$t" \
    >"$work/$t.log" 2>&1
  echo $? >"$work/$t.rc"
}
export -f run_one
export work secs here
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {}
fail=0
printf '%-22s %12s %8s  %s\n' target executions corpus outcome
for entry in "${targets[@]}"; do
  t=${entry%%:*}
  rc=$(cat "$work/$t.rc" 2>/dev/null || echo 99)
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/$t.log" | awk '{print $2}')
  corpus=$(ls "$work/corpus/$t" | wc -l)
  if [ "$rc" = 0 ]; then
    outcome="ok"
  else
    outcome="FAILED (exit $rc): $(grep -m1 -E 'ERROR|Assertion|SUMMARY' "$work/$t.log" | cut -c1-160)"
    fail=1
  fi
  printf '%-22s %12s %8s  %s\n' "$t" "${runs:-?}" "$corpus" "$outcome"
done
if [ "$fail" != 0 ]; then
  echo "artifacts (inputs that fail): $work/artifacts"; ls "$work/artifacts"
  for entry in "${targets[@]}"; do
    t=${entry%%:*}
    [ "$(cat "$work/$t.rc")" = 0 ] || { echo "== $t"; tail -30 "$work/$t.log"; }
  done
fi
exit $fail
