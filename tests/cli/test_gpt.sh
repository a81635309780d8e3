#!/usr/bin/env bash
# The language model from the command line: a small GPT trains on the
# bundled corpus and `baton sample` streams text from its run (seeded:
# the same seed gives the same text); malformed configs and sources exit 2
# naming the key or the run.
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
fail=0
pass=0
rm -rf "$WORK" && mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
EX="$SRC/resources/examples/gpt_text.json"
DB="$WORK/runs.db"
RUNS="$WORK/runs"

source "$(dirname "$0")/check.sh"

small=(--set model.n_layer=1 --set model.d_model=32 --set model.n_head=2
       --set data.train.context=32 --set train.steps=30 --set train.global_batch_size=8
       --set train.log_every_steps=10 --set data.validation_split=0.01)
check "train a small gpt" 0 "tokens/s" -- \
  "$BATON" train "$EX" --db "$DB" --runs-dir "$RUNS" "${small[@]}"
run=$(ls "$RUNS" | head -1)
check "its summary has the language-model figures" 0 '"tokens_per_s"' -- \
  cat "$RUNS/$run/summary.json"
check "and the counted model FLOPs" 0 '"model_flops_per_step"' -- cat "$RUNS/$run/summary.json"

a=$("$BATON" sample "$run" --db "$DB" --runs-dir "$RUNS" --prompt "And" --tokens 80 --seed 5 2>/dev/null | tr -d "\\000")
b=$("$BATON" sample 1 --db "$DB" --runs-dir "$RUNS" --prompt "And" --tokens 80 --seed 5 2>/dev/null | tr -d "\\000")
c=$("$BATON" sample "$RUNS/$run" --prompt "And" --tokens 80 --seed 6 2>/dev/null | tr -d "\\000")
if [ "${#a}" -ge 60 ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] && [ "${a:0:3}" = "And" ]; then
  pass=$((pass + 1))
else
  echo "FAIL sample: by run id and history id the same text for one seed, another for another"
  printf '    a=%q\n    b=%q\n    c=%q\n' "$a" "$b" "$c"; fail=$((fail + 1))
fi
check "samples during training" 0 "sample at step 10:" -- \
  "$BATON" train "$EX" --no-db --runs-dir "$WORK/sampled" "${small[@]}" \
  --set train.sample_every_steps=10 --set train.sample_tokens=40
check "sample_every_steps on an MLP" 2 "train.sample_every_steps" -- \
  "$BATON" train "$SRC/resources/examples/digits.json" --no-db --runs-dir "$WORK/x" \
  --set train.sample_every_steps=5
ckpt=$(ls "$RUNS/$run/checkpoints/"*.bin | head -1)
check "sample a checkpoint file" 0 "" -- "$BATON" sample "$ckpt" --tokens 20 --temperature 0

check "unknown run" 2 'no such run|no file, directory or run' -- \
  "$BATON" sample nosuch --db "$DB" --runs-dir "$RUNS"
check "bad temperature" 2 "temperature" -- "$BATON" sample "$ckpt" --temperature -1
check "unknown preset" 2 "model.preset" -- \
  "$BATON" train "$EX" --no-db --runs-dir "$RUNS" --set model.preset=gpt9
check "d_model not divisible by n_head" 2 "model.n_head: d_model 30 is not divisible" -- \
  "$BATON" train "$EX" --no-db --runs-dir "$RUNS" --set model.d_model=30 --set model.n_head=4
printf 'too short' > "$WORK/short.txt"
check "context longer than the data" 2 "data.train.context" -- \
  "$BATON" train "$EX" --no-db --runs-dir "$RUNS" --set "data.train.path=$WORK/short.txt"
check "standardize token ids" 2 "data.standardize" -- \
  "$BATON" train "$EX" --no-db --runs-dir "$RUNS" --set data.standardize=true

# A digits MLP's checkpoint is no language model.
"$BATON" train "$SRC/resources/examples/digits.json" --no-db --runs-dir "$WORK/mlp" \
  --set train.epochs=1 >/dev/null 2>&1
mlp=$(ls "$WORK/mlp" | head -1)
check "sample an MLP" 2 "sampling needs a GPT" -- "$BATON" sample "$WORK/mlp/$mlp"

echo "gpt cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
