"""Shared by the PyTorch sides of the benchmarks: the MLP they all train and
a free local port for torch.distributed's rendezvous."""
import socket

import torch


def build_mlp(widths):
    """Linear layers of the given widths with ReLU between them."""
    mods = []
    for i in range(len(widths) - 1):
        mods.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
