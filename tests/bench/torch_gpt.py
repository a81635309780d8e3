#!/usr/bin/env python3
"""The PyTorch side of the GPT benchmark: the same model as Baton's gpt
plugin (pre-norm GPT-2 blocks, tanh GELU, tied head), batch, context,
AdamW and thread count, at PyTorch's best here: data pre-generated, no
DataLoader, foreach AdamW. torch 1.13 (Debian's) has no fused
scaled_dot_product_attention (2.0+), so attention is the explicit
masked-softmax form nanoGPT falls back to. With --ranks N > 1 the step
runs data-parallel as DistributedDataParallel over gloo on N local
processes, each taking batch / N sequences with --threads intra-op
threads (DDP's default buckets); the step is the slowest rank's median.
With --fsdp the ranks run FullyShardedDataParallel instead (full
sharding, each block its own unit, as FSDP's transformer wrapping; the
next unit's gather prefetched in backward). Prints one JSON line:
{"tokens_per_s": ..., "step_ms": ..., "grew_bytes": ...}, grew_bytes the
most any rank's resident set grew from before the model to its peak."""
import argparse
import functools
import json
import math
import resource
import statistics
import time

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

from torch_common import free_port


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = [z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.h))
        att = att.masked_fill(mask[:t, :t] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, d):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.lnf(x) @ self.wte.weight.T


def resident_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def import_fsdp():
    """torch 1.13's sharded-tensor metadata (which FSDP imports) gives a
    dataclass field a dataclass instance as its default, which Python
    3.11 refuses as mutable (Debian 12 pairs the two): its dataclasses are
    made hashable while it is imported, which the check accepts."""
    import dataclasses
    plain = dataclasses.dataclass

    def hashable(cls=None, /, **kw):
        def wrap(c):
            own = dict(kw)
            if not own.get("frozen") and own.get("eq", True) and "__hash__" not in c.__dict__:
                own.setdefault("unsafe_hash", True)
            return plain(c, **own)
        return wrap(cls) if cls is not None else wrap

    dataclasses.dataclass = hashable
    try:
        import torch.distributed.fsdp  # noqa: F401
    finally:
        dataclasses.dataclass = plain


def wrapped(model, a):
    if not a.fsdp:
        return nn.parallel.DistributedDataParallel(model)
    import_fsdp()
    from torch.distributed.fsdp import BackwardPrefetch, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    return FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                auto_wrap_policy=policy, backward_prefetch=BackwardPrefetch.BACKWARD_PRE)


def median_step_ms(a, rank=0, world=1, port=0):
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    at_start = resident_bytes()
    model = Gpt(a.vocab, a.context, a.layers, a.heads, a.width)
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = wrapped(model, a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, foreach=True)
    rows = a.batch // world + (1 if rank < a.batch % world else 0)
    xs = [torch.randint(0, a.vocab, (rows, a.context)) for _ in range(4)]
    ys = [torch.randint(0, a.vocab, (rows * a.context,)) for _ in range(4)]
    times = []
    for step in range(2 + a.steps):
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs[step % 4]).view(-1, a.vocab), ys[step % 4])
        loss.backward()
        opt.step()
        if step >= 2:
            times.append(time.perf_counter() - t0)
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - at_start
    out = torch.tensor([statistics.median(times) * 1000, grew], dtype=torch.float64)
    if world > 1:  # the job runs at its slowest rank's pace; the most grown rank
        dist.all_reduce(out, op=dist.ReduceOp.MAX)
        dist.destroy_process_group()
    return out[0].item(), int(out[1].item())


def ddp_worker(rank, world, port, a, queue):
    result = median_step_ms(a, rank, world, port)
    if rank == 0:
        queue.put(result)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--fsdp", action="store_true")
    a = ap.parse_args()
    if a.fsdp and not torch.cuda.is_available() and torch.__version__ < "2":
        # 1.13's FSDP computes on "the current CUDA device" and keeps CUDA
        # streams: no CPU ranks (2.x runs them).
        print(json.dumps({"error": "torch %s's FullyShardedDataParallel needs CUDA, and this "
                                   "machine has none" % torch.__version__}))
        return
    if a.ranks > 1:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        mp.spawn(ddp_worker, args=(a.ranks, free_port(), a, queue), nprocs=a.ranks, join=True)
        ms, grew = queue.get()
    else:
        ms, grew = median_step_ms(a)
    print(json.dumps({"tokens_per_s": a.batch * a.context / (ms / 1000), "step_ms": ms,
                      "grew_bytes": grew}))


if __name__ == "__main__":
    main()
