# Shared by the CLI tests (source it): check NAME EXPECTED_CODE PATTERN --
# cmd... runs cmd, and counts a pass when it exits with EXPECTED_CODE and
# its output (stdout and stderr) matches the extended regex PATTERN (""
# matches anything); otherwise prints why and counts a failure. Uses and
# updates $pass and $fail.
check() {  # check NAME EXPECTED_CODE PATTERN -- cmd...
  local name=$1 want=$2 pattern=$3
  shift 4
  local out code
  out=$("$@" 2>&1)
  code=$?
  if [ "$code" != "$want" ]; then
    echo "FAIL $name: exit $code, expected $want"; echo "$out" | tail -5 | sed 's/^/    /'
    fail=$((fail + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | tail -5 | sed 's/^/    /'
    fail=$((fail + 1)); return
  fi
  pass=$((pass + 1))
}
