#!/usr/bin/env bash
# Runs engine test binaries with the CPU kernels held below this CPU's ISA:
# oneDNN by ONEDNN_MAX_CPU_ISA, Baton's fused loops by BATON_MAX_CPU_ISA
# (both set by the caller, ctest's isa_avx2 and isa_generic). What an
# AVX2-only EPYC or an older CPU runs, on any machine of this one's ISA or
# better: every golden and equivalence tolerance must hold there too.
#   run_isa_variant.sh BIN_DIR EXPECT_ONEDNN EXPECT_LOOPS TEST[:FILTER]...
set -u
bin=$1 want_onednn=$2 want_loops=$3
shift 3
# The caps are in force (a CPU below the cap runs its own best: skipped).
kernels=$("$bin/baton" --version | grep '^kernels:')
case "$kernels" in
  *"sgemm ($want_onednn"*", elementwise $want_loops") ;;
  *) echo "SKIP: this CPU does not run $want_onednn / $want_loops: $kernels"; exit 77 ;;
esac
echo "$kernels"
fail=0
for t in "$@"; do
  name=${t%%:*}
  filter='*'
  [ "$name" != "$t" ] && filter=${t#*:}
  if ! out=$("$bin/$name" --gtest_filter="$filter" --gtest_brief=1 2>&1); then
    echo "FAIL: $name ($filter)"
    echo "$out" | tail -40 | sed 's/^/    /'
    fail=1
  else
    echo "ok: $name: $(echo "$out" | grep -E '^\[  PASSED  \]' | tail -1)"
  fi
done
exit $fail
