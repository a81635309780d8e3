#!/usr/bin/env python3
"""The PyTorch side of the ResNet benchmark: the same net as Baton's
resnet plugin (3x3 stem, BatchNorm, stages of basic blocks whose first
block strides by 2 after the first stage, 1x1 projection shortcuts, global
average pooling, a linear classifier), batch, SGD with momentum and
thread count, on pre-generated 32x32x3 images. --channels-last runs it in
PyTorch's channels-last memory format (its oneDNN convolutions' layout).
Prints one JSON line: {"images_per_s": ..., "step_ms": ...}."""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet(nn.Module):
    def __init__(self, stem, stages, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem),
                                  nn.ReLU())
        blocks, c = [], stem
        for s, (width, depth) in enumerate(stages):
            for d in range(depth):
                blocks.append(Block(c, width, 2 if s > 0 and d == 0 else 1))
                c = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = ResNet(16, [(16, 2), (32, 2), (64, 2)], 10).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4,
                          foreach=True)
    xs = [torch.randn(a.batch, 3, 32, 32).contiguous(memory_format=fmt) for _ in range(4)]
    ys = [torch.randint(0, 10, (a.batch,)) for _ in range(4)]
    times = []
    for step in range(3 + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xs[step % 4]), ys[step % 4]).backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1000
    print(json.dumps({"images_per_s": a.batch / (ms / 1000), "step_ms": ms}))


if __name__ == "__main__":
    main()
