#!/usr/bin/env python3
"""The PyTorch side of the scaling benchmark: the MLP of run_scaling_bench.sh
(Linear+ReLU, softmax cross-entropy, Adam) trained on N local processes with
DistributedDataParallel over gloo (N = 1: plain PyTorch, no DDP), each
process taking global_batch / N rows a step with `--threads` intra-op
threads. At its best: data pre-generated (no DataLoader), denormals
flushed, the faster of Adam's two implementations, DDP's default 25 MB
buckets. Median step over the ranks' slowest; prints one JSON line:
{"samples_per_s": ..., "step_ms": ..., "ranks": N}."""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_common import build_mlp, free_port


def worker(rank, world, port, args, queue):
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    widths = [int(w) for w in args.layers.split(",")]
    model = build_mlp(widths)
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    rows = args.batch // world + (1 if rank < args.batch % world else 0)
    gen = torch.Generator().manual_seed(rank)
    xs = [torch.randn(rows, widths[0], generator=gen) for _ in range(8)]
    ys = [torch.randint(0, widths[-1], (rows,), generator=gen) for _ in range(8)]
    loss_fn = torch.nn.CrossEntropyLoss()

    def median_step_ms(foreach):
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=foreach)
        times = []
        for step in range(5 + args.steps):
            x, y = xs[step % 8], ys[step % 8]
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            if step >= 5:
                times.append(time.perf_counter() - t0)
        ms = torch.tensor([statistics.median(times) * 1e3], dtype=torch.float64)
        if world > 1:  # the job runs at its slowest rank's pace
            dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        return ms.item()

    results = {foreach: median_step_ms(foreach) for foreach in (False, True)}
    if rank == 0:
        foreach = min(results, key=results.get)
        ms = results[foreach]
        queue.put({"samples_per_s": args.batch / (ms / 1e3), "step_ms": ms, "ranks": world,
                   "adam_foreach": foreach, "torch": torch.__version__})
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="784,1024,1024,10")
    ap.add_argument("--batch", type=int, default=256, help="global batch")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(args.ranks, free_port(), args, queue), nprocs=args.ranks, join=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
