#!/usr/bin/env bash
# The example CNN (resources/examples/cnn_digits.json, as shipped) on the
# bundled digits reaches at least 98.5% validation accuracy (the example
# MLP reaches 97.5%). (Exact resume of a CNN: test_trainer.)
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
EX="$SRC/resources/examples/cnn_digits.json"
"$BATON" train "$EX" --no-db --runs-dir "$WORK/runs" || { echo "FAIL: the run failed"; exit 1; }
summary=$(ls "$WORK"/runs/*/summary.json | head -1)
acc=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['val_accuracy'])" "$summary")
echo "validation accuracy $acc on $(nproc) core(s):$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.985 else 1)" "$acc" || {
  echo "FAIL: validation accuracy $acc is below 0.985"; exit 1; }
echo "ok"
