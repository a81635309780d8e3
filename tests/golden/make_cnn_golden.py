#!/usr/bin/env python3
"""Writes the golden files the C++ test tests/engine/nn/test_golden_cnn.cpp
compares Baton's convolutional nets against, from PyTorch with random
weights, for two tiny models on one batch of 4 3x8x8 images, 5 classes:

  cnn_tiny:    the `cnn` plugin: conv 3->4 (3x3, pad 1), BatchNorm2d, ReLU,
               2x2 max pool; conv 4->6 (3x3, pad 1, 2 groups), BatchNorm2d,
               ReLU, 2x2 average pool; flatten; Linear 24->16, ReLU;
               Linear 16->5.
  resnet_tiny: the `resnet` plugin: a 3x3 stem (4), BatchNorm2d, ReLU; a
               basic block 4->4; a strided basic block 4->8 with a 1x1
               projection shortcut; global average pooling; Linear 8->5.

For each: the logits, the mean cross-entropy, every parameter's gradient,
and the losses of 10 AdamW steps on that batch (batch norm in training
mode: batch statistics).

Baton is channels last: a convolution's weight is (out, kh, kw, in/groups)
and a flatten is (h, w, c) per image; the script stores every parameter
and gradient in Baton's layout, so the test copies them in order.

Run by hand (Debian's python3-torch; packaging/bench-deps.sh installs it):
    python3 tests/golden/make_cnn_golden.py tests/golden/
It writes <name>.json (the index and the figures) and <name>.bin
(float32, little-endian, the tensors one after another). They are
committed: the C++ test needs no Python.
"""
import os
import sys

import torch
import torch.nn.functional as F

from golden_common import adamw_losses, write_golden

N, C, H, W, K = 4, 3, 8, 8, 5
LR, WD, STEPS = 1e-2, 0.1, 10


def conv(name, cin, cout, k, groups=1):
    return {name + ".weight": (cout, cin // groups, k, k)}


def bn(name, c):
    return {name + ".gain": (c,), name + ".bias": (c,)}


def linear(name, cin, cout):
    return {name + ".weight": (cout, cin), name + ".bias": (cout,)}


def cnn_params():
    # Baton's parameter order (Sequential::params()).
    p = {}
    p.update(conv("conv1", 3, 4, 3))
    p.update(bn("bn1", 4))
    p.update(conv("conv2", 4, 6, 3, groups=2))
    p.update(bn("bn2", 6))
    p.update(linear("fc1", 24, 16))
    p.update(linear("fc2", 16, K))
    return p


def cnn_forward(p, x):
    def norm(h, n):
        return F.batch_norm(h, None, None, p[n + ".gain"], p[n + ".bias"], training=True, eps=1e-5)

    h = F.conv2d(x, p["conv1.weight"], padding=1)
    h = F.max_pool2d(F.relu(norm(h, "bn1")), 2)
    h = F.conv2d(h, p["conv2.weight"], padding=1, groups=2)
    h = F.avg_pool2d(F.relu(norm(h, "bn2")), 2)
    h = h.flatten(1)
    h = F.relu(F.linear(h, p["fc1.weight"], p["fc1.bias"]))
    return F.linear(h, p["fc2.weight"], p["fc2.bias"])


def resnet_params():
    p = {}
    p.update(conv("stem", 3, 4, 3))
    p.update(bn("stem_bn", 4))
    for b, (cin, cout) in enumerate([(4, 4), (4, 8)]):
        p.update(conv(f"b{b}.conv1", cin, cout, 3))
        p.update(bn(f"b{b}.bn1", cout))
        p.update(conv(f"b{b}.conv2", cout, cout, 3))
        p.update(bn(f"b{b}.bn2", cout))
        if cin != cout:
            p.update(conv(f"b{b}.short", cin, cout, 1))
            p.update(bn(f"b{b}.short_bn", cout))
    p.update(linear("fc", 8, K))
    return p


def resnet_forward(p, x):
    def norm(h, n):
        return F.batch_norm(h, None, None, p[n + ".gain"], p[n + ".bias"], training=True, eps=1e-5)

    h = F.relu(norm(F.conv2d(x, p["stem.weight"], padding=1), "stem_bn"))
    for b, stride in enumerate([1, 2]):
        y = F.conv2d(h, p[f"b{b}.conv1.weight"], stride=stride, padding=1)
        y = F.relu(norm(y, f"b{b}.bn1"))
        y = norm(F.conv2d(y, p[f"b{b}.conv2.weight"], padding=1), f"b{b}.bn2")
        if f"b{b}.short.weight" in p:
            s = norm(F.conv2d(h, p[f"b{b}.short.weight"], stride=stride), f"b{b}.short_bn")
        else:
            s = h
        h = F.relu(y + s)
    h = F.adaptive_avg_pool2d(h, 1).flatten(1)
    return F.linear(h, p["fc.weight"], p["fc.bias"])


def to_baton(name, t, flatten_hwc):
    """PyTorch's layout -> Baton's (channels last)."""
    if t.dim() == 4:  # (out, in/g, kh, kw) -> (out, kh, kw, in/g)
        return t.permute(0, 2, 3, 1)
    if name in flatten_hwc:  # a Linear after a flatten of (c, h, w): columns (h, w, c)
        c, h, w = flatten_hwc[name]
        return t.reshape(t.shape[0], c, h, w).permute(0, 2, 3, 1)
    return t


def make(name, shapes, forward, model_config, flatten_hwc, out_dir, seed):
    torch.manual_seed(seed)
    p = {}
    for n, shape in shapes.items():
        if n.endswith("gain"):
            t = 1.0 + 0.2 * torch.randn(shape)
        elif n.endswith("bias"):
            t = 0.1 * torch.randn(shape)
        else:
            t = 0.3 * torch.randn(shape)
        p[n] = t.float().requires_grad_(True)
    x = torch.randn(N, C, H, W)
    targets = torch.randint(0, K, (N,))
    initial = {n: t.detach().clone() for n, t in p.items()}

    logits = forward(p, x)
    loss = F.cross_entropy(logits, targets)
    loss.backward()
    grads = {n: p[n].grad.detach().clone() for n in shapes}

    # AdamW: decay on convolution and linear weights, not biases or norms.
    losses = adamw_losses(p, {n for n in shapes if n.endswith("weight")}, lambda: forward(p, x),
                          targets, LR, WD, STEPS)

    tensors = [("param." + n, to_baton(n, initial[n], flatten_hwc)) for n in shapes]
    tensors += [("grad." + n, to_baton(n, grads[n], flatten_hwc)) for n in shapes]
    tensors.append(("images", x))  # (N, C, H, W): the layout the data gives Baton
    tensors.append(("logits", logits))
    doc = {
        "about": "tests/golden/make_cnn_golden.py, torch " + torch.__version__,
        "model": model_config,
        "image_shape": [C, H, W],
        "classes": K,
        "batch": N,
        "optimizer": {"lr": LR, "weight_decay": WD, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
        "params": list(shapes),
        "targets": targets.tolist(),
        "loss": loss.item(),
        "adamw_losses": losses,
    }
    offset = write_golden(out_dir, name, doc, tensors)
    print(f"{name}: loss {loss.item():.6f}; {offset} floats; "
          f"adamw losses {losses[0]:.4f} .. {losses[-1]:.4f}")


def main(out_dir):
    cnn = {"type": "cnn", "norm": "batchnorm", "activation": "relu", "head": [16],
           "blocks": [{"conv": 4, "kernel": 3, "padding": 1, "pool": "max", "pool_size": 2},
                      {"conv": 6, "kernel": 3, "padding": 1, "groups": 2, "pool": "avg",
                       "pool_size": 2}]}
    make("cnn_tiny", cnn_params(), cnn_forward, cnn, {"fc1.weight": (6, 2, 2)}, out_dir, 4321)
    resnet = {"type": "resnet", "stem": 4, "stages": [[4, 1], [8, 1]], "norm": "batchnorm"}
    make("resnet_tiny", resnet_params(), resnet_forward, resnet, {}, out_dir, 8765)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
