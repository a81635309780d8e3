#!/usr/bin/env python3
"""Writes the golden file the C++ test tests/engine/nn/test_golden_gpt.cpp
compares Baton's GPT against: a tiny GPT-2 (2 layers, d_model 32, 2 heads,
context 16, vocabulary 64) in PyTorch with random weights, one batch, the
logits, the mean cross-entropy, every parameter's gradient, and the losses
of 10 AdamW steps on that batch.

Run by hand (Debian's python3-torch; packaging/bench-deps.sh installs it):
    python3 tests/golden/make_gpt_golden.py tests/golden/
It writes gpt_tiny.json (the index and the figures) and gpt_tiny.bin
(float32, little-endian, the tensors one after another). Both are
committed: the C++ test needs no Python.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

from golden_common import adamw_losses, write_golden

V, T, C, H, L, B = 64, 16, 32, 2, 2, 2
LR, WD, STEPS = 3e-3, 0.1, 10


def param_names():
    # Baton's parameter order (Sequential::params()).
    names = ["wte", "wpe"]
    for i in range(L):
        for p in ["ln1.gain", "ln1.bias", "qkv.weight", "qkv.bias", "proj.weight", "proj.bias",
                  "ln2.gain", "ln2.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]:
            names.append(f"h{i}.{p}")
    return names + ["lnf.gain", "lnf.bias"]


def shapes():
    s = {"wte": (V, C), "wpe": (T, C), "lnf.gain": (C,), "lnf.bias": (C,)}
    for i in range(L):
        s.update({f"h{i}.ln1.gain": (C,), f"h{i}.ln1.bias": (C,),
                  f"h{i}.qkv.weight": (3 * C, C), f"h{i}.qkv.bias": (3 * C,),
                  f"h{i}.proj.weight": (C, C), f"h{i}.proj.bias": (C,),
                  f"h{i}.ln2.gain": (C,), f"h{i}.ln2.bias": (C,),
                  f"h{i}.fc1.weight": (4 * C, C), f"h{i}.fc1.bias": (4 * C,),
                  f"h{i}.fc2.weight": (C, 4 * C), f"h{i}.fc2.bias": (C,)})
    return s


def forward(p, idx):
    x = p["wte"][idx] + p["wpe"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        g = lambda n: p[f"h{i}.{n}"]
        h = F.layer_norm(x, (C,), g("ln1.gain"), g("ln1.bias"), 1e-5)
        qkv = h @ g("qkv.weight").T + g("qkv.bias")
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = [t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ g("proj.weight").T + g("proj.bias"))
        h = F.layer_norm(x, (C,), g("ln2.gain"), g("ln2.bias"), 1e-5)
        h = F.gelu(h @ g("fc1.weight").T + g("fc1.bias"), approximate="tanh")
        x = x + (h @ g("fc2.weight").T + g("fc2.bias"))
    x = F.layer_norm(x, (C,), p["lnf.gain"], p["lnf.bias"], 1e-5)
    return (x @ p["wte"].T).reshape(B * T, V)  # the tied head


def main(out_dir):
    torch.manual_seed(1234)
    sh = shapes()
    p = {}
    for n in param_names():
        if n.endswith("gain"):
            t = 1.0 + 0.2 * torch.randn(sh[n])
        elif n.endswith("bias"):
            t = 0.1 * torch.randn(sh[n])
        else:
            t = 0.2 * torch.randn(sh[n])  # larger than GPT-2's 0.02: every path matters
        p[n] = t.float().requires_grad_(True)
    idx = torch.randint(0, V, (B, T))
    targets = torch.randint(0, V, (B * T,))
    initial = {n: t.detach().clone() for n, t in p.items()}

    logits = forward(p, idx)
    loss = F.cross_entropy(logits, targets)
    loss.backward()
    grads = {n: p[n].grad.detach().clone() for n in param_names()}

    # AdamW: decay on the matrices and embeddings, not biases or norms.
    losses = adamw_losses(p, {n for n in param_names() if len(sh[n]) == 2},
                          lambda: forward(p, idx), targets, LR, WD, STEPS)

    tensors = [("param." + n, initial[n]) for n in param_names()]
    tensors += [("grad." + n, grads[n]) for n in param_names()]
    tensors.append(("logits", logits))
    doc = {
        "about": "tests/golden/make_gpt_golden.py, torch " + torch.__version__,
        "config": {"vocab": V, "context": T, "d_model": C, "n_head": H, "n_layer": L, "batch": B},
        "optimizer": {"lr": LR, "weight_decay": WD, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
        "params": param_names(),
        "tokens": idx.reshape(-1).tolist(),
        "targets": targets.tolist(),
        "loss": loss.item(),
        "adamw_losses": losses,
    }
    offset = write_golden(out_dir, "gpt_tiny", doc, tensors)
    print(f"loss {loss.item():.6f}; {offset} floats; adamw losses {losses[0]:.4f} .. {losses[-1]:.4f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
