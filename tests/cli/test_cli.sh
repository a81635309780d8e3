#!/usr/bin/env bash
# End-to-end checks of the `baton` CLI on real configs: exit codes (0 ok,
# 2 bad input, 1 runtime failure), messages that name the file/key/line,
# the run directory's files, and --resume.
# Needs: BATON (the binary), SRC (source dir), WORK (scratch dir).
set -u
fail=0
pass=0
rm -rf "$WORK" && mkdir -p "$WORK"
RUNS="$WORK/runs"
# `baton train` records every run in the history database under
# $XDG_DATA_HOME: never the real home's.
export XDG_DATA_HOME="$WORK/xdg"
# OpenMPI dlcloses its components at MPI_Finalize: in the sanitizer build
# their allocations show up as leaks in "unknown modules" that no
# suppression can name. So leak checks are off under mpirun (only there).
mpirun() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" command mpirun "$@"; }
MPI_NOLEAK="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
EX="$SRC/resources/examples/digits.json"
# mpirun is on every machine that runs these checks (packaging/deps.sh
# installs openmpi-bin): its sections run, and a missing mpirun is a
# failure, never a silent pass.
HAVE_MPIRUN=0
command -v mpirun >/dev/null 2>&1 && HAVE_MPIRUN=1

[ "$HAVE_MPIRUN" = 1 ] || { echo "FAIL mpirun: not on PATH (install openmpi-bin): the mpirun checks cannot run"; fail=$((fail + 1)); }

source "$(dirname "$0")/check.sh"

check version 0 "kernels: oneDNN" -- "$BATON" --version
check help 0 "train" -- "$BATON" --help
check train-help 0 "--resume" -- "$BATON" train --help
check no-command 2 "" -- "$BATON"
check unknown-flag 2 "unknown|--frobnicate" -- "$BATON" train "$EX" --frobnicate

# A real run: summary, run directory, event stream.
check train-digits 0 "val accuracy +9[5-9]\." -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --set train.epochs=12
run_dir=$(ls -d "$RUNS"/digits-mlp-* | head -1)
for f in events.jsonl config.json summary.json; do
  if [ -s "$run_dir/$f" ]; then pass=$((pass + 1)); else echo "FAIL run-files: $run_dir/$f missing"; fail=$((fail + 1)); fi
done
if python3 - "$run_dir/events.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert all(l["v"] == 1 and "type" in l and "run" in l for l in lines), "fields"
types = [l["type"] for l in lines]
assert types[0] == "run_start" and types[-1] == "run_end", types[:3]
assert types.count("epoch") == 12, types.count("epoch")
assert lines[-1]["status"] == "completed"
PY
then pass=$((pass + 1)); else echo "FAIL events: malformed event stream"; fail=$((fail + 1)); fi

# --events - puts JSON lines on stdout and the summary on stderr.
out=$("$BATON" train "$EX" --runs-dir "$RUNS" --set train.epochs=1 --events - 2>/dev/null)
code=$?
if [ "$code" = 0 ] && python3 -c '
import json, sys
events = [json.loads(l) for l in sys.stdin]
assert events and events[-1]["type"] == "run_end" and events[-1]["status"] == "completed"' <<<"$out"; then
  pass=$((pass + 1)); else echo "FAIL events-stdout: exit $code, or stdout is not pure JSON lines ending in run_end"; fail=$((fail + 1)); fi

# Resume: train 2 epochs, then resume to 4: it starts at the checkpoint.
check resume-first 0 "completed after 46 steps" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/resume" --set train.epochs=2
check resume-second 0 "resumed from step 46" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/resume" --set train.epochs=4 --resume
check resume-steps 0 "completed after 92 steps" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/resume" --set train.epochs=4 --resume

# Bad input: exit 2 and a message naming the place; earlier runs untouched.
before=$(ls "$RUNS" | wc -l)
bad="$WORK/bad"
mkdir -p "$bad"
python3 - "$EX" "$bad" <<'PY'
import json, sys, os
src, out = sys.argv[1], sys.argv[2]
cfg = json.load(open(src))
cfg["data"]["train"]["path"] = os.path.join(os.path.dirname(src), cfg["data"]["train"]["path"])
def write(name, c):
    json.dump(c, open(os.path.join(out, name), "w"), indent=1)
c = json.loads(json.dumps(cfg)); c["optimzer"] = {"lr": 0.1}; write("unknown_key.json", c)
c = json.loads(json.dumps(cfg)); c["data"]["train"]["path"] = "nope.csv"; write("missing_data.json", c)
c = json.loads(json.dumps(cfg)); c["data"]["train"]["path"] = os.path.join(out, "broken.csv"); write("broken_csv.json", c)
c = json.loads(json.dumps(cfg)); c["model"]["layers"] = [63, 10]; write("bad_width.json", c)
c = json.loads(json.dumps(cfg)); c["strategy"]["type"] = "mirored"; write("bad_strategy.json", c)
open(os.path.join(out, "broken.csv"), "w").write("1,2,3,0\n4,5,6,1\n7,x,9,2\n")
open(os.path.join(out, "syntax.json"), "w").write('{\n  "model": {"type": "mlp",}\n}\n')
PY
check unknown-key 2 "unknown_key.json: optimzer: unknown key" -- "$BATON" train "$bad/unknown_key.json" --runs-dir "$RUNS"
check missing-config 2 "no_such.json: cannot open" -- "$BATON" train "$bad/no_such.json" --runs-dir "$RUNS"
check json-syntax 2 "syntax.json:2: invalid JSON" -- "$BATON" train "$bad/syntax.json" --runs-dir "$RUNS"
check missing-data 2 "nope.csv" -- "$BATON" train "$bad/missing_data.json" --runs-dir "$RUNS"
check broken-csv 2 "broken.csv:3" -- "$BATON" train "$bad/broken_csv.json" --runs-dir "$RUNS"
check bad-width 2 "model.layers" -- "$BATON" train "$bad/bad_width.json" --runs-dir "$RUNS"
check bad-strategy 2 "strategy.type: \"mirored\" is not one of" -- "$BATON" train "$bad/bad_strategy.json" --runs-dir "$RUNS"
check wrong-type 2 "train.epochs: expected an integer" -- "$BATON" train "$EX" --runs-dir "$RUNS" --set 'train.epochs="ten"'
check out-of-range 2 "optimizer.lr: expected a number > 0" -- "$BATON" train "$EX" --runs-dir "$RUNS" --set optimizer.lr=-1
check bad-set 2 "expected key.path=value" -- "$BATON" train "$EX" --runs-dir "$RUNS" --set novalue
check negative-seed 2 "--seed: expected an integer from 0 to 9223372036854775807, got -5" -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --seed -5
check huge-seed 2 "--seed: expected an integer from 0 to 9223372036854775807, got 99999999999999999999999" -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --seed 99999999999999999999999
# Placement (strategy.devices): what was chosen and why; the emulated GPU
# (runs of their own folder: this part counts the bad inputs' runs); a GPU
# or a precision this machine cannot give is exit 2 naming the key.
check device-auto 0 "device +cpu:0: auto: " -- \
  "$BATON" train "$EX" --runs-dir "$WORK/device_runs" --set train.steps=2
check device-emulated 0 "device +gpu_emulated:0 in fp32: strategy.devices: " -- \
  "$BATON" train "$EX" --runs-dir "$WORK/device_runs" --set train.steps=2 --set strategy.devices=gpu_emulated:0
check device-missing-gpu 2 'strategy.devices: "gpu:0" was asked for, but ' -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --set strategy.devices=gpu:0
check precision-on-cpu 2 'train.precision: "bf16" is a GPU' -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --set train.precision=bf16 --set strategy.devices=cpu
check unknown-command 2 'baton: unknown command "nosuch" \(expected one of: train, launch, probe, bench, history, sample, calibrate, predict, plan\)' -- "$BATON" nosuch
check config-folder 2 "$WORK: is a folder; expected a JSON file" -- "$BATON" train "$WORK"
# The flags' paths: exit 2 naming the flag, nothing trained.
touch "$WORK/a-file"
check events-missing-folder 2 "--events $WORK/nope/ev.jsonl: its folder $WORK/nope does not exist" -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --events "$WORK/nope/ev.jsonl"
check events-folder 2 "--events $WORK: is a folder" -- "$BATON" train "$EX" --runs-dir "$RUNS" --events "$WORK"
check plugin-dir-missing 2 "--plugin-dir $WORK/nope: does not exist" -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --plugin-dir "$WORK/nope"
check checkpoint-dir-file 2 "--checkpoint-dir $WORK/a-file: is a file; expected a folder" -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --checkpoint-dir "$WORK/a-file"
check runs-dir-under-file 2 "--runs-dir $WORK/a-file/runs: $WORK/a-file is a file" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/a-file/runs"
long=$(printf 'a%.0s' $(seq 1 300))
check runs-dir-long-name 2 "--runs-dir .*: a name in it is longer than 255 bytes" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/$long"
check db-folder 2 "--db $WORK: is a folder" -- "$BATON" train "$EX" --runs-dir "$RUNS" --db "$WORK"
# The documented largest batch: refused before any buffer exists (it was
# killed by the kernel at 24 GB), for the dataset's size and for memory.
check batch-over-dataset 2 "train.global_batch_size: 16777216 is larger than the training set \(1438 samples\)" -- \
  "$BATON" train "$EX" --runs-dir "$RUNS" --no-db --set train.global_batch_size=16777216
cat >"$WORK/wide.json" <<'JSON'
{"name": "wide", "model": {"type": "mlp", "layers": [16, 65536, 10]},
 "data": {"train": {"type": "synthetic_classification", "features": 16, "classes": 10, "samples": 300000},
          "cache": false},
 "train": {"epochs": 1, "global_batch_size": 300000}}
JSON
check batch-over-memory 2 "train.global_batch_size: 300000 needs about [0-9.]+ GiB of buffers .*an estimate.*available" -- \
  "$BATON" train "$WORK/wide.json" --runs-dir "$RUNS" --no-db
after=$(ls "$RUNS" | wc -l)
if [ "$before" = "$after" ] && [ -s "$run_dir/events.jsonl" ]; then pass=$((pass + 1))
else echo "FAIL bad-input-left-traces: runs before=$before after=$after"; fail=$((fail + 1)); fi

# baton probe: this machine, readable and as JSON; cluster hosts through mpirun.
check probe 0 "cores +[0-9]+ physical" -- "$BATON" probe
check probe-gpus-line 0 "^GPUs +" -- "$BATON" probe
if "$BATON" probe --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["v"] == 1 and d["cores"] >= 1 and d["threads"] >= d["cores"] and d["memory_bytes"] > 0, d
cpus = [x["name"] for x in d["devices"] if x["kind"] == "cpu"]
assert cpus == ["cpu:%d" % i for i in range(d["cores"])], cpus
assert any(x["kind"] == "cuda" for x in d["devices"]) or d["gpu_note"], "no GPU and no note"
'
then pass=$((pass + 1)); else echo "FAIL probe-json: not a valid probe document"; fail=$((fail + 1)); fi
check probe-missing-hostfile 2 "/nonexistent: cannot open the file" -- "$BATON" probe --hostfile /nonexistent
check probe-bad-hosts 2 "--hosts" -- "$BATON" probe --hosts "a,,b"
# Host names reach mpirun's argument vector only when they are names or
# addresses (RFC 1123, IPv4, IPv6): not shell or option text.
check probe-bad-host-name 2 'host "b\$c" is not a valid host name' -- "$BATON" probe --hosts 'a,b$c'
check probe-option-host 2 'host "-np" is not a valid host name' -- "$BATON" probe --hosts=-np
check probe-bad-timeout 2 "--timeout: expected a number of seconds > 0" -- \
  "$BATON" probe --hosts localhost --timeout 0
if [ "$HAVE_MPIRUN" = 1 ]; then
  if "$BATON" probe --hosts localhost,localhost --json 2>"$WORK/probe_hosts.err" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert len(d["hosts"]) == 2, len(d["hosts"])
assert all(h["cores"] >= 1 for h in d["hosts"])
'
  then pass=$((pass + 1)); else echo "FAIL probe-hosts: no merged document with 2 hosts"; sed 's/^/    /' "$WORK/probe_hosts.err" | head -5; fail=$((fail + 1)); fi
  # A probe that does not finish in time is stopped, with the reason: an
  # mpirun that hangs (as ssh to an unreachable host does) stands in first
  # on PATH.
  mkdir -p "$WORK/hang-bin"
  printf '#!/bin/sh\nexec sleep 60\n' >"$WORK/hang-bin/mpirun"
  chmod +x "$WORK/hang-bin/mpirun"
  t0=$(date +%s)
  check probe-timeout 1 "mpirun did not finish within 0.5 s and was stopped" -- \
    env PATH="$WORK/hang-bin:$PATH" "$BATON" probe --hosts localhost --timeout 0.5
  [ $(($(date +%s) - t0)) -lt 10 ] && pass=$((pass + 1)) ||
    { echo "FAIL probe-timeout-time: the hanging mpirun was not stopped in time"; fail=$((fail + 1)); }
fi

# baton bench allreduce: the local backend (threads), every result checked.
check bench-help 0 "mean over the iterations, then the mean over the" -- "$BATON" bench allreduce --help
check bench-table 0 "# Wrong values +: 0 OK" -- \
  "$BATON" bench allreduce --backend local --min-bytes 4 --max-bytes 4096 --step-factor 8 --iters 3 --warmup 1
bench_json_ok() {  # bench_json_ok RANKS ALGORITHM SIZES < json
  python3 -c '
import json, sys
ranks, algorithm, sizes = int(sys.argv[1]), sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
d = json.load(sys.stdin)
assert d["ranks"] == ranks and d["algorithm"] == algorithm, (d["ranks"], d["algorithm"])
assert [r["size"] for r in d["rows"]] == sizes, [r["size"] for r in d["rows"]]
for r in d["rows"]:
    assert r["count"] * 4 == r["size"] and r["type"] == "float" and r["redop"] == "sum", r
    for mode in ("out_of_place", "in_place"):
        m = r[mode]
        assert m["wrong"] == 0, (r["size"], mode, m)
        assert m["time_us"] > 0 and m["algbw"] > 0, (r["size"], mode, m)
        assert abs(m["busbw"] - m["algbw"] * 2 * (ranks - 1) / ranks) <= 1e-9 * (1 + m["busbw"]), m
assert d["wrong"] == 0
' "$@"
}
for spec in "2 native" "3 ring" "4 hierarchical" "1 native"; do
  set -- $spec
  if "$BATON" bench allreduce --backend local --ranks "$1" --algorithm "$2" --min-bytes 4 \
       --max-bytes 65536 --step-factor 4 --iters 3 --warmup 1 --json 2>"$WORK/bench.err" |
     bench_json_ok "$1" "$2" 4,16,64,256,1024,4096,16384,65536
  then pass=$((pass + 1)); else echo "FAIL bench-local-$1-$2: bad document or #wrong != 0"; sed 's/^/    /' "$WORK/bench.err" | head -5; fail=$((fail + 1)); fi
done
# Sizes that are not whole floats are rounded down; a step factor that is
# not an integer still advances.
if "$BATON" bench allreduce --backend local --min-bytes 10 --max-bytes 40 --step-factor 1.5 \
     --iters 2 --warmup 0 --json 2>"$WORK/bench.err" | bench_json_ok 2 native 8,12,20,32
then pass=$((pass + 1)); else echo "FAIL bench-local-odd-sizes"; sed 's/^/    /' "$WORK/bench.err" | head -5; fail=$((fail + 1)); fi
check bench-size-suffixes 0 "^ +2048 +512 +float +sum" -- \
  "$BATON" bench allreduce --backend local --min-bytes 1K --max-bytes 2KiB --iters 2 --warmup 0
# Bad flags: exit 2, naming the flag.
check bench-min-gt-max 2 "--min-bytes 4096 is larger than --max-bytes 1024" -- \
  "$BATON" bench allreduce --min-bytes 4096 --max-bytes 1024
check bench-bad-backend 2 "--backend: backend \"gloo\"" -- "$BATON" bench allreduce --backend gloo
check bench-bad-algorithm 2 "--algorithm: algorithm \"tree\"" -- "$BATON" bench allreduce --algorithm tree
check bench-zero-ranks 2 "--ranks: expected an integer >= 1" -- "$BATON" bench allreduce --backend local --ranks 0
check bench-bad-step 2 "--step-factor" -- "$BATON" bench allreduce --step-factor 1
check bench-bad-iters 2 "--iters" -- "$BATON" bench allreduce --iters 0
check bench-not-a-number 2 "--max-bytes" -- "$BATON" bench allreduce --max-bytes lots
# nccl: what must happen is known from the build (baton --version) and the
# machine (baton probe): exit 2 in a build without CUDA/NCCL, exit 1 naming
# the missing driver/GPU, or a checked run on the GPUs.
gpus=$("$BATON" probe --json | python3 -c 'import json,sys; print(sum(d["kind"] == "cuda" for d in json.load(sys.stdin)["devices"]))')
if "$BATON" --version | grep -q "^nccl: built"; then
  if [ "$gpus" -gt 0 ]; then
    nccl_want=0 nccl_pattern="Wrong values +: 0 OK"
  else
    nccl_want=1 nccl_pattern="nccl: no NVIDIA GPU/driver found \\("
  fi
else
  nccl_want=2 nccl_pattern="backend nccl: this build (has no CUDA|'s CUDA backend has no NCCL)"
fi
check bench-nccl "$nccl_want" "$nccl_pattern" -- \
  "$BATON" bench allreduce --backend nccl --min-bytes 4 --max-bytes 4096 --step-factor 32 \
  --iters 2 --warmup 1
# Without libnccl.so.2 (pointed elsewhere) the NCCL backend names what it
# could not load, and discovery still sees every GPU it saw before.
if "$BATON" --version | grep -q "^nccl: built"; then
  check bench-nccl-no-libnccl 1 "nccl: cannot load /nonexistent/libnccl.so.2: .*BATON_NCCL_LIBRARY" -- \
    env BATON_NCCL_LIBRARY=/nonexistent/libnccl.so.2 "$BATON" bench allreduce --backend nccl \
    --min-bytes 4 --max-bytes 4096 --step-factor 32 --iters 2 --warmup 1
  gpus_without=$(BATON_NCCL_LIBRARY=/nonexistent/libnccl.so.2 "$BATON" probe --json |
    python3 -c 'import json,sys; print(sum(d["kind"] == "cuda" for d in json.load(sys.stdin)["devices"]))')
  if [ "$gpus_without" != "$gpus" ]; then
    echo "FAIL probe-no-libnccl: $gpus_without GPUs without libnccl, $gpus with it"; fail=$((fail + 1))
  else
    echo "ok   probe-no-libnccl ($gpus GPUs either way)"; pass=$((pass + 1))
  fi
fi
# On the emulator's 3 devices and its NCCL stand-in (where the build has
# them): a run whose values are all checked right (exit 0; a wrong one
# exits 1), said to be emulated.
if [ -f "$(dirname "$BATON")/../lib/baton/baton_cuda_emu.so" ]; then
  check bench-nccl-emulated 0 "# note: emulated GPUs \(BATON_CUDA_EMULATE=1\)" -- \
    env BATON_CUDA_EMULATE=1 BATON_SIMT_DEVICES=3 "$BATON" bench allreduce --backend nccl \
    --min-bytes 4 --max-bytes 65536 --step-factor 16 --iters 2 --warmup 1 --algorithm native,ring
fi
check bench-nccl-hierarchical 2 "this build has no CUDA|--algorithm hierarchical: not available with --backend nccl" -- \
  "$BATON" bench allreduce --backend nccl --algorithm hierarchical
check bench-no-subcommand 2 "" -- "$BATON" bench
# The MPI backend under mpirun (the default backend inside an MPI job).
if [ "$HAVE_MPIRUN" = 1 ]; then
  for algorithm in native ring; do
    if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
         mpirun -n 2 --oversubscribe --bind-to none "$BATON" bench allreduce --algorithm "$algorithm" \
         --min-bytes 4 --max-bytes 262144 --step-factor 16 --iters 3 --warmup 1 --json 2>"$WORK/bench_mpi.err" |
       bench_json_ok 2 "$algorithm" 4,64,1024,16384,262144
    then pass=$((pass + 1)); else echo "FAIL bench-mpi-$algorithm: bad document or #wrong != 0"; sed 's/^/    /' "$WORK/bench_mpi.err" | head -5; fail=$((fail + 1)); fi
  done
  check bench-mpi-ranks-flag 2 "--ranks: applies to the local backend only" -- \
    env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun -n 2 --oversubscribe --bind-to none "$BATON" bench allreduce --ranks 4
  # parameter_server: 2 workers + 1 ps; the summary reports the staleness.
  PS="$SRC/resources/examples/parameter_server.json"
  check train-ps 0 "staleness +mean [0-9.]+, max [0-9]+" -- \
    env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun -n 3 --oversubscribe --bind-to none "$BATON" train "$PS" --runs-dir "$RUNS" \
    --set train.epochs=3
  # num_ps defaults to TF_CONFIG's ps count: ps 1 (rank 3) serves.
  check train-ps-tf-config 0 "serving ps:1/cpu:0" -- \
    env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    TF_CONFIG='{"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1", "d:1"]}}' \
    timeout 120 mpirun -n 4 --oversubscribe --bind-to none -x TF_CONFIG "$BATON" train "$PS" \
    --runs-dir "$RUNS" --set strategy.num_ps=null --set train.epochs=1 --events -
  check train-ps-no-worker 2 "strategy.num_ps: 2 parameter server" -- \
    env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun -n 2 --oversubscribe --bind-to none "$BATON" train "$PS" --runs-dir "$RUNS" \
    --set strategy.num_ps=2
fi
# A worker that joins its servers over TCP (what baton launch starts):
# its options checked before anything is built.
PSW=("$BATON" train "$SRC/resources/examples/parameter_server.json" --runs-dir "$RUNS" --no-db -q)
check ps-worker-alone 2 "--ps-worker and --ps-servers need --ps-workers" -- "${PSW[@]}" --ps-worker 1
check ps-servers-garbage 2 '--ps-servers: "nope" is not an address; expected HOST:PORT' -- \
  "${PSW[@]}" --ps-workers 3 --ps-worker 1 --ps-servers nope
check ps-worker-past-slots 2 "--ps-worker 5: the job has 3 worker slots" -- \
  "${PSW[@]}" --ps-workers 3 --ps-worker 5 --ps-servers 127.0.0.1:9
check ps-workers-sync 2 "strategy.mode: sync; workers that join their servers over TCP" -- \
  "${PSW[@]}" --ps-workers 3 --ps-worker 1 --ps-servers 127.0.0.1:9 --set strategy.mode=sync
check ps-servers-count 2 "--ps-servers: 2 address\(es\), but strategy.num_ps is 1" -- \
  "${PSW[@]}" --ps-workers 3 --ps-worker 1 --ps-servers 127.0.0.1:9,127.0.0.1:10
check ps-workers-not-ps 2 "strategy.type: mirrored; --ps-workers is for a parameter_server job" -- \
  "$BATON" train "$SRC/resources/examples/mirrored.json" --runs-dir "$RUNS" --no-db --ps-workers 2

# Distribution: mirrored on threads, multi_worker_mirrored under mpirun, and
# TF_CONFIG checked against the job (exit 2 when malformed or inconsistent).
check mirrored 0 "val accuracy +9[5-9]\." -- \
  "$BATON" train "$SRC/resources/examples/mirrored.json" --runs-dir "$RUNS" --set train.epochs=10 -q
# shard_policy file: the digits data in 4 files (a glob); each of the
# replicas reads whole files (tf.data's FILE policy).
python3 - "$SRC/resources/datasets/digits.csv.gz" "$WORK/parts" <<'PY'
import gzip, os, sys
rows = gzip.open(sys.argv[1], "rt").read().splitlines()
os.makedirs(sys.argv[2], exist_ok=True)
for k in range(4):
    with open(os.path.join(sys.argv[2], "digits-%d.csv" % k), "w") as f:
        f.write("\n".join(rows[k::4]) + "\n")
PY
check mirrored-file-shards 0 "val accuracy +9[0-9]\." -- \
  "$BATON" train "$SRC/resources/examples/mirrored.json" --runs-dir "$RUNS" --set train.epochs=10 \
  --set strategy.replicas=2 --set "data.train.path=$WORK/parts/digits-*.csv" --set data.shard_policy=file -q
check file-shards-too-few 2 "mirrored.json: data.shard_policy: file needs at least as many files as replicas" -- \
  "$BATON" train "$SRC/resources/examples/mirrored.json" --runs-dir "$RUNS" --set strategy.replicas=2 \
  --set data.shard_policy=file -q
if [ "$HAVE_MPIRUN" = 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
  MWM="$SRC/resources/examples/multi_worker_mirrored.json"
  check mwm-2-ranks 0 "val accuracy +9[5-9]\." -- \
    mpirun -n 2 --oversubscribe "$BATON" train "$MWM" --runs-dir "$RUNS" --set train.epochs=10 -q
  check mwm-tf-config 0 "completed" -- env "$MPI_NOLEAK" \
    TF_CONFIG='{"cluster":{"worker":["localhost:2222"]},"task":{"type":"worker","index":0}}' \
    mpirun -n 1 "$BATON" train "$MWM" --runs-dir "$RUNS" --set train.epochs=1 -q
  check mwm-tf-config-bad 2 "TF_CONFIG: cluster.workr: unknown key" -- env "$MPI_NOLEAK" \
    TF_CONFIG='{"cluster":{"workr":["a:1"]}}' \
    mpirun -n 2 --oversubscribe "$BATON" train "$MWM" --runs-dir "$RUNS" -q
  check mwm-tf-config-size 2 "lists 1 tasks, but the job has 2" -- env "$MPI_NOLEAK" \
    TF_CONFIG='{"cluster":{"worker":["a:1"]}}' \
    mpirun -n 2 --oversubscribe "$BATON" train "$MWM" --runs-dir "$RUNS" -q
fi
check mwm-without-mpirun 2 "start it with mpirun" -- \
  "$BATON" train "$SRC/resources/examples/multi_worker_mirrored.json" --runs-dir "$RUNS"

# Run history: train records into the database; list/show/export/diff/
# tag/note/delete; --no-db; bad input is exit 2 and leaves files alone.
H="$WORK/history.db"
check hist-train-1 0 "history +run 1 in $H" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/hruns" --db "$H" --set train.epochs=2 -q
check hist-train-2 0 "history +run 2 in $H" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/hruns" --db "$H" --set train.epochs=3 --set optimizer.lr=0.01 -q
count_runs() { "$BATON" history list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
default_before=$(count_runs)
check hist-no-db 0 "history +off" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/hruns" --no-db --set train.epochs=1 -q
[ "$default_before" -gt 0 ] && [ "$(count_runs)" = "$default_before" ] && pass=$((pass + 1)) \
  || { echo "FAIL hist-no-db-recorded: $default_before -> $(count_runs)"; fail=$((fail + 1)); }
check hist-no-db-flags 2 "excludes" -- "$BATON" train "$EX" --no-db --db "$H"
check hist-list 0 "^ +2 +digits-mlp-.* completed +one_device" -- "$BATON" history list --db "$H"
if "$BATON" history list --db "$H" --json | python3 -c '
import json, sys
runs = json.load(sys.stdin)
assert [r["id"] for r in runs] == [2, 1], [r["id"] for r in runs]   # newest first; --no-db added none
assert all(r["status"] == "completed" and r["strategy"] == "one_device" for r in runs)
assert runs[1]["final_metrics"]["step"] == 46 and runs[0]["final_metrics"]["step"] == 69
'
then pass=$((pass + 1)); else echo "FAIL hist-list-json"; fail=$((fail + 1)); fi
check hist-limit 0 "" -- "$BATON" history list --db "$H" --limit 1
[ "$("$BATON" history list --db "$H" --limit 1 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] \
  && pass=$((pass + 1)) || { echo "FAIL hist-limit-count"; fail=$((fail + 1)); }
check hist-show 0 "val_accuracy +0 +2 " -- "$BATON" history show 1 --db "$H"
check hist-show-config 0 '"lr": 0.01' -- "$BATON" history show 2 --db "$H"
check hist-diff 0 "~ optimizer.lr: 0.002 -> 0.01" -- "$BATON" history diff 1 2 --db "$H"
check hist-diff-epochs 0 "~ train.epochs: 2 -> 3" -- "$BATON" history diff 1 2 --db "$H"
check hist-tag 0 "tagged baseline" -- "$BATON" history tag 1 baseline --db "$H"
check hist-note 0 "note set" -- "$BATON" history note 1 "first try" --db "$H"
check hist-filter-tag 0 "baseline" -- "$BATON" history list --db "$H" --filter tag=baseline
[ "$("$BATON" history list --db "$H" --filter tag=baseline --filter status=completed --json | python3 -c 'import json,sys; print([r["id"] for r in json.load(sys.stdin)])')" = "[1]" ] \
  && pass=$((pass + 1)) || { echo "FAIL hist-filter-count"; fail=$((fail + 1)); }
check hist-show-note 0 "notes +first try" -- "$BATON" history show 1 --db "$H"
# CSV export: one line per sample; its loss values are the event stream's.
check hist-export-csv-out 0 "" -- "$BATON" history export 1 --db "$H" --format csv --out "$WORK/run1.csv"
[ -f "$WORK/run1.csv" ] && [ ! -e "$WORK/run1.csv.part" ] && pass=$((pass + 1)) ||
  { echo "FAIL hist-export-csv-file: run1.csv missing or its .part left behind"; fail=$((fail + 1)); }
# Run 1's directory, by its run id (two runs of one second sort by their random suffix).
run1_uid=$("$BATON" history list --db "$H" --json | python3 -c 'import json,sys; print([r["uid"] for r in json.load(sys.stdin) if r["id"] == 1][0])')
run1_dir="$WORK/hruns/$run1_uid"
if python3 - "$WORK/run1.csv" "$run1_dir/events.jsonl" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows and list(rows[0].keys()) == ["step", "wall_time_s", "rank", "metric", "value"], rows[:1]
csv_loss = {int(r["step"]): float(r["value"]) for r in rows if r["metric"] == "loss"}
ev = [json.loads(l) for l in open(sys.argv[2])]
ev_loss = {e["step"]: e["loss"] for e in ev if e["type"] == "step"}
assert csv_loss == ev_loss, (sorted(csv_loss.items())[:3], sorted(ev_loss.items())[:3])
epochs = [e for e in ev if e["type"] == "epoch"]
assert [float(r["value"]) for r in rows if r["metric"] == "val_loss"] == [e["val_loss"] for e in epochs]
assert len(rows) == 11 * len(ev_loss) + 6 * len(epochs), len(rows)
PY
then pass=$((pass + 1)); else echo "FAIL hist-export-csv: differs from the event stream"; fail=$((fail + 1)); fi
if "$BATON" history export 2 --db "$H" --format json >"$WORK/run2.json" && python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["run"]["id"] == 2 and d["run"]["config"]["optimizer"]["lr"] == 0.01
assert len(d["metrics"]) > 0 and any(e["kind"] == "checkpoint" for e in d["events"])
' <"$WORK/run2.json"
then pass=$((pass + 1)); else echo "FAIL hist-export-json"; fail=$((fail + 1)); fi
# Default location: $XDG_DATA_HOME/baton/runs.db (earlier trains recorded there).
check hist-default-db 0 "digits-mlp" -- "$BATON" history list
[ -s "$XDG_DATA_HOME/baton/runs.db" ] && pass=$((pass + 1)) || { echo "FAIL hist-default-path"; fail=$((fail + 1)); }
# Bad input: exit 2, naming the problem.
check hist-unknown-id 2 "run \"99\": no such run" -- "$BATON" history show 99 --db "$H"
check hist-bad-filter 2 "unknown key \"colour\"" -- "$BATON" history list --db "$H" --filter colour=red
check hist-bad-status 2 "status=done: expected one of" -- "$BATON" history list --db "$H" --filter status=done
check hist-bad-format 2 "xml" -- "$BATON" history export 1 --db "$H" --format xml
check hist-bad-tag 2 "without spaces or commas" -- "$BATON" history tag 1 "two words" --db "$H"
check hist-missing-db 2 "no such history database" -- "$BATON" history show 1 --db "$WORK/none.db"
echo "plain text, not a database" > "$WORK/notes.txt"
before=$(sha256sum "$WORK/notes.txt")
check hist-not-a-db 2 "not a Baton history database" -- "$BATON" history list --db "$WORK/notes.txt"
check hist-train-not-a-db 2 "not a Baton history database" -- \
  "$BATON" train "$EX" --runs-dir "$WORK/hruns2" --db "$WORK/notes.txt" --set train.epochs=1 -q
[ "$before" = "$(sha256sum "$WORK/notes.txt")" ] && [ ! -e "$WORK/hruns2" ] && [ ! -e "$WORK/notes.txt-wal" ] \
  && pass=$((pass + 1)) || { echo "FAIL hist-not-a-db-untouched"; fail=$((fail + 1)); }
check hist-delete 0 "deleted run 1" -- "$BATON" history delete 1 --db "$H"
check hist-deleted 2 "no such run" -- "$BATON" history show 1 --db "$H"
check hist-help 0 "export" -- "$BATON" history --help

# --out: a device is written in place, never replaced by a file (as root the
# rename used to turn /dev/full into a regular file); a link is written
# through; - is stdout; a folder is bad input. Write errors are exit 1.
if [ -c /dev/full ]; then
  check hist-out-dev-full 1 "--out /dev/full: write failed" -- \
    "$BATON" history export 2 --db "$H" --format csv --out /dev/full
  [ -c /dev/full ] && pass=$((pass + 1)) || { echo "FAIL hist-out-dev-full-kept: /dev/full is no longer a device"; fail=$((fail + 1)); }
  check hist-list-full 1 "writing standard output failed" -- sh -c "\"$BATON\" history list --db \"$H\" >/dev/full"
  check hist-export-stdout-full 1 "standard output" -- \
    sh -c "\"$BATON\" history export 2 --db \"$H\" --format csv >/dev/full"
fi
ln -sf out-target.csv "$WORK/out-link.csv"
check hist-out-link 0 "" -- "$BATON" history export 2 --db "$H" --format csv --out "$WORK/out-link.csv"
[ -L "$WORK/out-link.csv" ] && [ -s "$WORK/out-target.csv" ] && pass=$((pass + 1)) ||
  { echo "FAIL hist-out-link-kept: the link was replaced or its file not written"; fail=$((fail + 1)); }
[ "$("$BATON" history export 2 --db "$H" --format csv --out - | head -1)" = "step,wall_time_s,rank,metric,value" ] &&
  pass=$((pass + 1)) || { echo "FAIL hist-out-dash: --out - is not stdout"; fail=$((fail + 1)); }
check hist-out-folder 2 "--out $WORK: is a folder" -- "$BATON" history export 2 --db "$H" --format csv --out "$WORK"
check hist-out-missing-folder 2 "its folder $WORK/nope does not exist" -- \
  "$BATON" history export 2 --db "$H" --format csv --out "$WORK/nope/x.csv"
check hist-limit-negative 2 "--limit: expected an integer from 0 to 9223372036854775807, got -3" -- \
  "$BATON" history list --db "$H" --limit -3
check hist-unknown-sub 2 'baton history: unknown command "lst"' -- "$BATON" history lst
# Ids are never reused: a run recorded after deleting the newest gets a new one.
check hist-reuse-train 0 "" -- "$BATON" train "$EX" --runs-dir "$WORK/hruns" --db "$H" --set train.epochs=1 -q
newest=$("$BATON" history list --db "$H" --json | python3 -c 'import json,sys; print(max(r["id"] for r in json.load(sys.stdin)))')
check hist-reuse-delete 0 "deleted run $newest" -- "$BATON" history delete "$newest" --db "$H"
check hist-reuse-again 0 "" -- "$BATON" train "$EX" --runs-dir "$WORK/hruns" --db "$H" --set train.epochs=1 -q
[ "$("$BATON" history list --db "$H" --json | python3 -c 'import json,sys; print(max(r["id"] for r in json.load(sys.stdin)))')" -gt "$newest" ] &&
  pass=$((pass + 1)) || { echo "FAIL hist-ids-not-reused: run $newest handed out again"; fail=$((fail + 1)); }
# history list pads by display width: a name of wide characters keeps the
# columns under each other.
check hist-wide-train 0 "" -- "$BATON" train "$EX" --runs-dir "$WORK/hruns" --db "$WORK/wide.db" --set 'name="训练-ü"' --set train.epochs=1 -q
check hist-narrow-train 0 "" -- "$BATON" train "$EX" --runs-dir "$WORK/hruns" --db "$WORK/wide.db" --set train.epochs=1 -q
if "$BATON" history list --db "$WORK/wide.db" | python3 -c '
import sys, unicodedata
def width(s):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in s)
cols = {width(l[:l.index("completed")]) for l in sys.stdin.read().splitlines()[1:]}
assert len(cols) == 1, cols'
then pass=$((pass + 1)); else echo "FAIL hist-list-wide: columns misaligned by a wide name"; fail=$((fail + 1)); fi
# The config on standard input ('-'); under mpirun the chief reads it (mpirun
# gives rank 0 alone the stdin) and every rank gets its text. Its relative
# paths are the working folder's.
check train-stdin 0 "completed after 23 steps" -- sh -c "cd \"$SRC/resources/examples\" && \"$BATON\" train - --runs-dir \"$RUNS\" --no-db --set train.epochs=1 <\"$EX\""
if [ "$HAVE_MPIRUN" = 1 ]; then
  check train-stdin-mpirun 0 "completed after 23 steps" -- env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    sh -c "cd \"$SRC/resources/examples\" && timeout 120 mpirun -n 2 --oversubscribe \"$BATON\" train - --runs-dir \"$RUNS\" --no-db --set train.epochs=1 --set 'strategy={\"type\": \"multi_worker_mirrored\"}' <\"$EX\""
  check train-stdin-mpirun-bad 2 "\\(standard input\\):1: invalid JSON" -- env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    sh -c "echo '{oops' | timeout 120 mpirun -n 2 --oversubscribe \"$BATON\" train - --runs-dir \"$RUNS\" --no-db"
fi
# Under mpirun only the chief records: one run, not one per rank.
if [ "$HAVE_MPIRUN" = 1 ]; then
  check hist-mwm 0 "completed" -- env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 120 mpirun -n 2 --oversubscribe "$BATON" train "$SRC/resources/examples/multi_worker_mirrored.json" \
    --runs-dir "$WORK/hruns" --db "$WORK/mwm.db" --set train.epochs=1 -q
  [ "$("$BATON" history list --db "$WORK/mwm.db" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(len(r), r[0]["strategy"], r[0]["topology"] if "topology" in r[0] else "")')" = "1 multi_worker_mirrored " ] \
    && pass=$((pass + 1)) || { echo "FAIL hist-mwm-one-run"; fail=$((fail + 1)); }
fi

# A stop request ends the run at the next step with a checkpoint, status
# "interrupted" and exit code 130: SIGTERM to one process; SIGUSR1 to mpirun,
# which passes it to every rank, and the ranks stop at the same step.
wait_for_step() {  # until a step event is in $1 (30 s at most)
  for _ in $(seq 1 300); do
    grep -q '"type":"step"' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
expect_stop() {  # expect_stop NAME CODE EVENTS_FILE DB RANKS
  local name=$1 code=$2 events=$3 db=$4 ranks=$5
  local ends
  ends=$(python3 -c '
import json, sys
ends = [e for e in map(json.loads, open(sys.argv[1])) if e.get("type") == "run_end"]
print(len(ends), len({e["step"] for e in ends}), *sorted({e["status"] for e in ends}))' "$events")
  if [ "$code" = 130 ] && [ "$ends" = "$ranks 1 interrupted" ] &&
    "$BATON" history list --db "$db" | grep -q interrupted; then
    pass=$((pass + 1))
  else
    echo "FAIL $name: exit $code, run_end: $ends"
    fail=$((fail + 1))
  fi
}
# stop_when_stepping NAME SIGNAL PID EVENTS: sends SIGNAL once a step is in
# EVENTS and waits for PID; without a step in 30 s the run is killed (no
# hang) and the check fails. Sets $code to the exit code.
stop_when_stepping() {
  local name=$1 sig=$2 p=$3 events=$4
  code=0
  if wait_for_step "$events"; then
    kill "-$sig" "$p"
  else
    echo "FAIL $name: no step event in $events within 30 s"; fail=$((fail + 1))
    kill -KILL "$p" 2>/dev/null
  fi
  wait "$p" || code=$?
}
"$BATON" train "$EX" --set train.epochs=100000 --events "$WORK/stop.jsonl" --runs-dir "$WORK/sruns" \
  --db "$WORK/stop.db" -q >/dev/null &
stop_when_stepping stop-sigterm TERM $! "$WORK/stop.jsonl"
expect_stop stop-sigterm "$code" "$WORK/stop.jsonl" "$WORK/stop.db" 1
ls "$WORK"/sruns/*/checkpoints/ckpt-* >/dev/null 2>&1 && pass=$((pass + 1)) || { echo "FAIL stop-checkpoint"; fail=$((fail + 1)); }
if [ "$HAVE_MPIRUN" = 1 ]; then
  env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -n 2 --oversubscribe "$BATON" train "$SRC/resources/examples/multi_worker_mirrored.json" \
    --set train.epochs=100000 --events - --runs-dir "$WORK/sruns2" --db "$WORK/stop2.db" -q \
    >"$WORK/stop2.jsonl" 2>/dev/null &
  stop_when_stepping stop-mpirun-sigusr1 USR1 $! "$WORK/stop2.jsonl"
  expect_stop stop-mpirun-sigusr1 "$code" "$WORK/stop2.jsonl" "$WORK/stop2.db" 2
fi

# Convolutional nets on the digits as 8x8 images.
CNN="$SRC/resources/examples/cnn_digits.json"
check "resnet on digits" 0 "ResidualBlock" -- "$BATON" train "$CNN" --no-db --runs-dir "$WORK/cnn" \
  --set 'model={"type":"resnet","stem":8,"stages":[[8,1],[16,1]]}' --set train.epochs=1
check "cnn with augmentation" 0 "val accuracy" -- "$BATON" train "$CNN" --no-db --runs-dir "$WORK/cnn" \
  --set train.epochs=1 --set 'data.augment={"crop_padding":1,"horizontal_flip":true}'
check "image shape that does not fit" 2 "data.train.image_shape" -- \
  "$BATON" train "$CNN" --no-db --runs-dir "$WORK/cnn" --set 'data.train.image_shape=[1,8,9]'
check "cnn without image data" 2 "needs image data" -- \
  "$BATON" train "$CNN" --no-db --runs-dir "$WORK/cnn" --set 'data.train={"type":"csv","path":"../datasets/digits.csv.gz"}'
check "unknown block key" 2 "model.blocks\[0\].pooling: unknown key" -- \
  "$BATON" train "$CNN" --no-db --runs-dir "$WORK/cnn" --set 'model.blocks=[{"conv":8,"pooling":"max"}]'

# Timelines: a Chrome trace of every process's spans, kept in the history.
TL="$WORK/tl"
mkdir -p "$TL"
check "timeline: mirrored" 0 "timeline +$TL/mirrored.json" -- "$BATON" train "$EX" --runs-dir "$TL/runs" \
  --db "$TL/h.db" --set train.epochs=1 --set 'strategy={"type":"mirrored","replicas":2}' \
  --timeline "$TL/mirrored.json"
check "timeline: trace format" 0 "trace ok" -- python3 "$SRC/tests/cli/check_trace.py" "$TL/mirrored.json" 1 10
tl_run=$("$BATON" history list --db "$TL/h.db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
check "timeline: from the history" 0 "" -- "$BATON" history timeline "$tl_run" --db "$TL/h.db" -o "$TL/again.json"
if cmp -s "$TL/mirrored.json" "$TL/again.json"; then pass=$((pass + 1)); else echo "FAIL timeline: the history's trace differs from the run's"; fail=$((fail + 1)); fi
check "timeline: no such attempt" 2 "--attempt 2: run $tl_run recorded 1 timeline" -- \
  "$BATON" history timeline "$tl_run" --db "$TL/h.db" --attempt 2
"$BATON" train "$EX" --runs-dir "$TL/runs" --db "$TL/h.db" --set train.epochs=1 -q >/dev/null 2>&1
check "timeline: a run without one" 2 "has no timeline: record one with baton train --timeline" -- \
  "$BATON" history timeline "$("$BATON" history list --db "$TL/h.db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" --db "$TL/h.db"
check "timeline: unwritable path" 2 "--timeline" -- "$BATON" train "$EX" --no-db --runs-dir "$TL/runs" \
  --timeline "$TL/no/such/dir/t.json"
if [ "$HAVE_MPIRUN" = 1 ]; then
  check "timeline: two ranks" 0 "" -- env "$MPI_NOLEAK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 180 mpirun -n 2 --oversubscribe "$BATON" train "$SRC/resources/examples/multi_worker_mirrored.json" \
    --no-db --runs-dir "$TL/runs" --set train.epochs=1 -q --timeline "$TL/mwm.json"
  check "timeline: two ranks' trace" 0 "trace ok: .* 2 processes" -- python3 "$SRC/tests/cli/check_trace.py" "$TL/mwm.json" 2 5
fi

# Found by fuzzing: a number past a double's range is bad JSON (exit 2, the
# file named), and a host name that is not UTF-8 is named, not a crash.
printf '{"name": "x", "seed": 1e999}' >"$WORK/huge.json"
check "fuzz: a number out of range" 2 "huge.json: invalid JSON" -- \
  "$BATON" train "$WORK/huge.json" --no-db --runs-dir "$WORK/runs"
check "fuzz: an integer key given 2e101" 2 "train.epochs: expected an integer" -- \
  "$BATON" train "$EX" --no-db --runs-dir "$WORK/runs" --set train.epochs=2e101
printf 'node\377 slots=2\n' >"$WORK/hosts_bad_utf8"
check "fuzz: a host name that is not UTF-8" 2 "hosts_bad_utf8" -- \
  "$BATON" launch "$EX" --hostfile "$WORK/hosts_bad_utf8"

# The scaling predictor: its inputs' errors, and a prediction's shape.
PR="$WORK/predict"
mkdir -p "$PR"
echo '{"hosts": 2, "devices_per_host": 4, "gpus": 1}' >"$PR/bad_key.json"
echo '{"hosts": 2, "devices_per_host": 4, "links": {"intra_host": "wifi"}}' >"$PR/bad_link.json"
check "predict: unknown topology key" 2 "bad_key.json: .*gpus" -- \
  "$BATON" predict "$EX" --topology "$PR/bad_key.json"
check "predict: unknown link class" 2 "links.intra_host.*wifi.*shm, pcie, nvlink, network" -- \
  "$BATON" predict "$EX" --topology "$PR/bad_link.json"
check "predict: device counts" 2 "--devices 8,4: the counts must increase" -- \
  "$BATON" predict "$EX" --topology "$SRC/resources/topologies/8x8_gpu.json" --devices 8,4
check "predict: missing calibration" 2 "--calibration $PR/none.json: no such file" -- \
  "$BATON" predict "$EX" --topology "$SRC/resources/topologies/8x8_gpu.json" --calibration "$PR/none.json"
check "calibrate: threads" 0 "shm: alpha .* GB/s" -- "$BATON" calibrate --out "$PR/cal.json" --max-bytes 4194304
# The default file's folder is made (a fresh machine has none).
check "calibrate: the default file" 0 "written to $PR/xdg_fresh/baton/calibration.json" -- \
  env XDG_DATA_HOME="$PR/xdg_fresh" "$BATON" calibrate --max-bytes 4194304
# Calibration from recorded runs: $H holds one_device runs only (no link).
check "calibrate: history without links" 2 "--from-history: no measured link .* in any run of $H" -- \
  "$BATON" calibrate --from-history --db "$H" --out "$PR/cal_h.json"
check "calibrate: a run of threads" 2 "--run 2: not a run of MPI processes" -- \
  "$BATON" calibrate --from-history --db "$H" --run 2 --out "$PR/cal_h.json"
check "calibrate: no such run" 2 'run "77": no such run' -- \
  "$BATON" calibrate --from-history --db "$H" --run 77 --out "$PR/cal_h.json"
check "calibrate: no history file" 2 "--db $PR/none.db: no such file" -- \
  "$BATON" calibrate --from-history --db "$PR/none.db" --out "$PR/cal_h.json"
check "calibrate: --run alone" 2 "--run requires --from-history" -- "$BATON" calibrate --run 1
check "predict: 8 hosts x 8 GPUs" 0 "512 +64 .*(compute|link|latency)" -- \
  "$BATON" predict "$EX" --topology "$SRC/resources/topologies/8x8_gpu.json" --devices 8,16,...,512 \
  --calibration "$PR/cal.json" --steps 3
"$BATON" predict "$EX" --topology "$SRC/resources/topologies/8x8_gpu.json" --devices 1,64 --steps 3 --json \
  >"$PR/p.json" 2>/dev/null
if python3 - "$PR/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["modelled"] is True
p = {r["devices"]: r for r in d["predictions"]}
assert set(p) == {1, 64}, p.keys()
assert p[1]["efficiency"] == 1.0 and p[1]["bound"] == "compute"
assert p[64]["hosts"] == 8 and 0 < p[64]["efficiency"] <= 1.0
assert p[64]["samples_per_s"] > p[1]["samples_per_s"]
PY
then pass=$((pass + 1)); else echo "FAIL predict --json"; fail=$((fail + 1)); fi

echo "cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
