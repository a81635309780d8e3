#!/usr/bin/env python3
"""The PyTorch side of the allreduce benchmark: torch.distributed all_reduce
(float32 sum, gloo) on N local processes, timed like `baton bench allreduce`:
warm-up calls, then the mean over the timed calls, then the mean over the
ranks; busbw = algbw * 2(n-1)/n. gloo's all_reduce is in place, so it
compares with Baton's in-place column. Each result is checked (the same
inputs as Baton: rank + i % 31). Prints one JSON document:
{"backend": "gloo", "ranks": N, "rows": [{"size", "count", "time_us",
"algbw", "busbw", "wrong"}, ...]}."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_common import free_port


def worker(rank, world, port, sizes, iters, warmup, threads):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = []
    for size in sizes:
        count = size // 4
        pattern = (torch.arange(count, dtype=torch.int64) % 31).to(torch.float32)
        data = pattern + rank
        buf = data.clone()
        for _ in range(warmup):
            dist.all_reduce(buf)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        us = (time.perf_counter() - t0) / iters * 1e6
        # The timed calls reduce their own results: check one more on fresh input.
        buf.copy_(data)
        dist.all_reduce(buf)
        expected = pattern * world + world * (world - 1) / 2
        wrong = int((buf != expected).sum())
        stats = torch.tensor([us, float(wrong)], dtype=torch.float64)
        dist.all_reduce(stats)
        time_us = stats[0].item() / world
        algbw = size / (time_us * 1e-6) / 1e9
        rows.append({"size": count * 4, "count": count, "time_us": time_us, "algbw": algbw,
                     "busbw": algbw * 2 * (world - 1) / world, "wrong": int(stats[1].item())})
    if rank == 0:
        print(json.dumps({"backend": "gloo", "ranks": world, "torch": torch.__version__,
                          "rows": rows}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="1048576,16777216,67108864", help="bytes, comma-separated")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    mp.spawn(worker, args=(args.ranks, free_port(), sizes, args.iters, args.warmup, args.threads),
             nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
