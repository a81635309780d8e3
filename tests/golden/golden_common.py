"""What the golden-file scripts in tests/golden/ share: the AdamW steps
whose losses the C++ tests compare, and the writer of a golden pair
(<name>.json: the index and the figures; <name>.bin: float32,
little-endian, the tensors one after another)."""
import json
import os

import torch
import torch.nn.functional as F


def adamw_losses(params, decayed, forward, targets, lr, weight_decay, steps):
    """The losses of `steps` AdamW steps on one batch; `decayed` names the
    parameters with weight decay (Baton decays matrices, not biases or
    norms)."""
    for t in params.values():
        t.grad = None
    decay = [t for n, t in params.items() if n in decayed]
    no_decay = [t for n, t in params.items() if n not in decayed]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999), eps=1e-8)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(forward(), targets)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses


def write_golden(out_dir, name, doc, tensors):
    """Writes <name>.json (doc plus the "tensors" index) and <name>.bin
    from `tensors`, a list of (key, tensor) in file order; returns the
    number of floats written."""
    index, blob, offset = {}, bytearray(), 0
    for key, t in tensors:
        a = t.detach().contiguous().float().numpy().astype("<f4")
        index[key] = {"offset": offset, "shape": list(a.shape)}
        blob.extend(a.tobytes())
        offset += a.size
    doc = dict(doc, tensors=index)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
        f.write(bytes(blob))
    return offset
