"""The twins' copy of post_b_data.h: post B's data, y = 3x + 2 + noise, and each rank's initial
weights, drawn as main.cpp draws them; and the "[rank R/W]" lines the programs print. Chapter 08's
and chapter 11's twins import it, as the C++ programs share post_b_data.cpp, so that both start
from the same bits."""
import os

import torch

STEPS = 1 << 24  # every value is k / STEPS for a draw k of torch.randint(0, STEPS)
PREFIX = {}  # rank and world, set once the process has joined its group


def out(text):
    """One line with this rank's "[rank R/W] " prefix, in one write(), as the C++ programs do."""
    os.write(1, f"[rank {PREFIX['rank']}/{PREFIX['world']}] {text}\n".encode())


def out0(text):
    if PREFIX["rank"] == 0:
        out(text)


def make_dataset(n, seed):
    """Post B's x and y = 3x + 2 + noise, as main.cpp's make_dataset builds them: x uniform in
    [-2, 2), the noise in [-0.1, 0.1). Two float32 tensors of shape (n, 1)."""
    g = torch.Generator()
    g.manual_seed(seed)
    kx = torch.randint(0, STEPS, (n,), generator=g).tolist()
    kn = torch.randint(0, STEPS, (n,), generator=g).tolist()
    x = torch.tensor([4.0 * k / STEPS - 2.0 for k in kx], dtype=torch.float32)
    noise = [(k / STEPS - 0.5) * 0.2 for k in kn]
    y = torch.tensor([3.0 * xi + 2.0 + e for xi, e in zip(x.tolist(), noise)], dtype=torch.float32)
    return x.reshape(n, 1), y.reshape(n, 1)


def initial_weights(model, seed, rank):
    """A rank's own initial weight and bias, uniform in [-1, 1), from a generator seeded
    seed + 1 + rank (main.cpp's initial_weights)."""
    g = torch.Generator()
    g.manual_seed(seed + 1 + rank)
    k = torch.randint(0, STEPS, (2,), generator=g).tolist()
    with torch.no_grad():
        model.weight.fill_(k[0] / float(1 << 23) - 1.0)
        model.bias.fill_(k[1] / float(1 << 23) - 1.0)
