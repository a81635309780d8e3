#!/usr/bin/env python3
"""GPT-2 124M on one GPU: Baton's figures beside PyTorch's (the device check).

  gpt2_benchmark.py config --source SRC --batch B --steps N --out FILE
      writes Baton's run config: GPT-2 124M (vocabulary padded to 50,304),
      context 1024, bf16, AdamW with clipping, one_device on gpu:0.
  gpt2_benchmark.py torch --batch B --steps N --warmup W --out FILE
      trains the same model in PyTorch at its best on this GPU (bf16
      autocast, scaled_dot_product_attention, fused AdamW, torch.compile
      where it works) and writes its tokens/s as JSON.
  gpt2_benchmark.py report --events EVENTS --summary SUMMARY --warmup W
      [--torch FILE] --batch B --out-json FILE
      Baton's tokens/s from its step events (the wall time from the end of
      step W to the last, so start-up and the first steps' plans are left
      out), TFLOP/s and MFU, PyTorch's beside it, and the ratio.

FLOPs per token: 6N + 6*L*C*T (N parameters, L layers, C width, T
context), the count the issue names; MFU against the GPU's dense bf16 peak
from the table below, keyed by the device's name (printed). Nothing here
fails on a time: the figures are printed and written, never judged.
"""
import argparse
import json
import os
import statistics
import sys
import time

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), from the vendors'
# data sheets; matched in order against the device name.
PEAK_BF16_TFLOPS = [
    ("H200", 989.4),
    ("H100 PCIe", 756.0),
    ("H100", 989.4),
    ("GH200", 989.4),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("L40S", 362.05),
    ("L40", 181.05),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("RTX 6000 Ada", 364.25),
    ("RTX 4090", 165.2),
    ("RTX 3090", 71.0),
]

LAYERS, WIDTH, HEADS, CONTEXT, VOCAB = 12, 768, 12, 1024, 50304


def peak_for(name):
    for key, peak in PEAK_BF16_TFLOPS:
        if key in name:
            return key, peak
    return None, None


def flops_per_token(params):
    return 6 * params + 6 * LAYERS * WIDTH * CONTEXT


def write_config(args):
    cfg = {
        "name": "gpt2-124m-bench",
        "seed": 1,
        "model": {"type": "gpt", "preset": "gpt2-124m", "vocab_size": VOCAB, "dropout": 0.0},
        "data": {
            "train": {
                "type": "text",
                "path": os.path.join(args.source, "resources/datasets/kjv.txt.gz"),
                "context": CONTEXT,
            },
            "shuffle_buffer": 4096,
            "prefetch": 2,
        },
        "optimizer": {"type": "adamw", "lr": 6e-4, "weight_decay": 0.1, "clip_global_norm": 1.0},
        "train": {
            "steps": args.steps,
            "global_batch_size": args.batch,
            "log_every_steps": 1,
            "precision": "bf16",
        },
        "strategy": {"type": "one_device", "devices": "gpu:0"},
        "checkpoint": {"every_epoch": False},
    }
    with open(args.out, "w") as f:
        json.dump(cfg, f, indent=2)


def run_torch(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(WIDTH)
            self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
            self.proj = nn.Linear(WIDTH, WIDTH)
            self.ln2 = nn.LayerNorm(WIDTH)
            self.fc1 = nn.Linear(WIDTH, 4 * WIDTH)
            self.fc2 = nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, WIDTH)
            self.wpe = nn.Embedding(CONTEXT, WIDTH)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(WIDTH)
            self.head = nn.Linear(WIDTH, VOCAB, bias=False)
            self.head.weight = self.wte.weight  # tied, as GPT-2 and Baton

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, VOCAB).float(), targets.view(-1))

    torch.manual_seed(1)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda")
    model = Gpt().to(dev)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=6e-4, betas=(0.9, 0.95), fused=True)
    compiled = "no"
    step_model = model
    if not args.no_compile:
        try:
            step_model = torch.compile(model)
            compiled = "yes"
        except Exception as e:  # an older or broken inductor: eager, and said so
            compiled = "failed: %s" % e
    x = torch.randint(0, 256, (args.batch, CONTEXT), device=dev)
    y = torch.randint(0, 256, (args.batch, CONTEXT), device=dev)

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    try:
        for _ in range(args.warmup):
            step()
    except Exception as e:
        if compiled != "yes":
            raise
        compiled = "failed at run: %s" % str(e).splitlines()[0]
        step_model = model
        for _ in range(args.warmup):
            step()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    total = sum(times)
    out = {
        "framework": "pytorch " + torch.__version__,
        "device_name": torch.cuda.get_device_name(0),
        "compiled": compiled,
        "batch": args.batch,
        "context": CONTEXT,
        "parameters": params,
        "steps_timed": args.steps,
        "step_ms_median": 1e3 * statistics.median(times),
        "tokens_per_s": args.batch * CONTEXT * args.steps / total,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


def figures(tokens_per_s, params, device_name):
    key, peak = peak_for(device_name)
    tflops = tokens_per_s * flops_per_token(params) / 1e12
    return {
        "tokens_per_s": tokens_per_s,
        "tflops": tflops,
        "peak_bf16_tflops": peak,
        "peak_key": key,
        "mfu": tflops / peak if peak else None,
    }


def report(args):
    steps = []
    with open(args.events) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "step":
                steps.append(e)
    with open(args.summary) as f:
        summary = json.load(f)
    params = summary["parameters"]
    steps.sort(key=lambda e: e["step"])
    timed = [e for e in steps if e["step"] >= args.warmup]
    if len(timed) < 2:
        sys.exit("report: fewer than 2 step events after step %d in %s" % (args.warmup, args.events))
    span = timed[-1]["time"] - timed[0]["time"]
    n = timed[-1]["step"] - timed[0]["step"]
    baton_tps = args.batch * CONTEXT * n / span
    device_name = args.device_name
    torch_out = None
    if args.torch and os.path.exists(args.torch):
        with open(args.torch) as f:
            torch_out = json.load(f)
        device_name = device_name or torch_out["device_name"]
    result = {
        "model": "GPT-2 124M (vocabulary 50304), context 1024, bf16, AdamW, clip 1.0",
        "device_name": device_name,
        "batch": args.batch,
        "flops_per_token": flops_per_token(params),
        "baton": dict(figures(baton_tps, params, device_name or ""),
                      parameters=params, steps_timed=n,
                      step_ms_median=statistics.median(e["step_time_ms"] for e in timed),
                      device_note=summary.get("device_note")),
    }
    if torch_out:
        result["pytorch"] = dict(figures(torch_out["tokens_per_s"], torch_out["parameters"],
                                         device_name or ""), **torch_out)
        result["baton_over_pytorch"] = baton_tps / torch_out["tokens_per_s"]
    with open(args.out_json, "w") as f:
        json.dump(result, f, indent=2)
    b = result["baton"]
    print("GPT-2 124M on %s (peak bf16 dense %s TFLOP/s, table key %s), batch %d x %d tokens"
          % (device_name, b["peak_bf16_tflops"], b["peak_key"], args.batch, CONTEXT))
    print("FLOPs per token 6N + 6LCT = %.3g (N = %d)" % (result["flops_per_token"], params))
    print("%-10s %14s %10s %8s %12s" % ("", "tokens/s", "TFLOP/s", "MFU", "step ms"))

    def row(name, fig, step_ms):
        mfu = "%.1f%%" % (100 * fig["mfu"]) if fig["mfu"] is not None else "n/a"
        print("%-10s %14.0f %10.1f %8s %12.1f" % (name, fig["tokens_per_s"], fig["tflops"], mfu,
                                                   step_ms))

    row("baton", b, b["step_ms_median"])
    if torch_out:
        p = result["pytorch"]
        row("pytorch", p, p["step_ms_median"])
        print("baton / pytorch tokens/s: %.2fx (%s, torch.compile: %s)"
              % (result["baton_over_pytorch"], p["framework"], p["compiled"]))
    print("(measured; goal: MFU >= 50% and >= 1.0x PyTorch - printed, never judged)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("config")
    c.add_argument("--source", required=True)
    c.add_argument("--batch", type=int, required=True)
    c.add_argument("--steps", type=int, required=True)
    c.add_argument("--out", required=True)
    t = sub.add_parser("torch")
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--warmup", type=int, default=10)
    t.add_argument("--no-compile", action="store_true")
    t.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--events", required=True)
    r.add_argument("--summary", required=True)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--batch", type=int, required=True)
    r.add_argument("--torch")
    r.add_argument("--device-name", default="")
    r.add_argument("--out-json", required=True)
    args = ap.parse_args()
    {"config": write_config, "torch": run_torch, "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
