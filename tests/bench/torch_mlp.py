#!/usr/bin/env python3
"""The PyTorch side of the training benchmark: the same MLP, batch, Adam and
thread count as bench_train, at PyTorch's best (data pre-generated, no
DataLoader). Prints one JSON line: {"samples_per_s": ..., "step_ms": ...}."""
import argparse
import json
import statistics
import time

import torch

from torch_common import build_mlp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="784,1024,1024,10")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    # Baton flushes denormals to zero in its training threads; so does this.
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    widths = [int(w) for w in args.layers.split(",")]
    model = build_mlp(widths)
    loss_fn = torch.nn.CrossEntropyLoss()
    xs = [torch.randn(args.batch, widths[0]) for _ in range(8)]
    ys = [torch.randint(0, widths[-1], (args.batch,)) for _ in range(8)]

    def median_step_ms(foreach):
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=foreach)
        times = []
        for step in range(5 + args.steps):
            x, y = xs[step % 8], ys[step % 8]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            if step >= 5:
                times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    # PyTorch at its best: whichever Adam implementation is faster here.
    results = {foreach: median_step_ms(foreach) for foreach in (False, True)}
    foreach = min(results, key=results.get)
    ms = results[foreach]
    print(json.dumps({"samples_per_s": args.batch / (ms / 1e3), "step_ms": ms,
                      "adam_foreach": foreach, "torch": torch.__version__,
                      "blas": torch.__config__.show().split("BLAS_INFO=")[-1].split(",")[0]}))


if __name__ == "__main__":
    main()
