#!/usr/bin/env bash
# The example GPT (resources/examples/gpt_text.json, as shipped) on the
# bundled corpus reaches a validation loss below 1.6 nats per byte within
# 700 steps (the unigram entropy of the text is 3.05). Prints the time it
# took: a figure to read, never a condition.
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
start=$(date +%s)
"$BATON" train "$SRC/resources/examples/gpt_text.json" --no-db --runs-dir "$WORK/runs" \
  --set train.steps=700 --set train.log_every_steps=100 || { echo "FAIL: the run failed"; exit 1; }
took=$(( $(date +%s) - start ))
summary=$(ls "$WORK"/runs/*/summary.json | head -1)
val=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['val_loss'])" "$summary")
echo "validation loss $val nats/byte after 700 steps, in ${took} s on $(nproc) core(s): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1.6 else 1)" "$val" || {
  echo "FAIL: validation loss $val is not below 1.6"; exit 1; }
echo "ok"
