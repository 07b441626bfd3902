"""The twins' copy of fashion_data.h: Fashion-MNIST's first images shrunk to 14x14, and the
initial weights drawn as ch09::uniform_init draws them. Chapter 09's and 12's twins and
bench/torch_sharding.py import it, so all three read and draw the same bits."""
import gzip
import struct

import torch

SOURCE = "/usr/share/datasets/fashion-mnist"
SIDE, PIXELS, CLASSES = 14, 14 * 14, 10


def read_idx(prefix, count):
    """The first `count` images, 28x28 shrunk to 14x14 by 2x2 means, and their labels."""
    with gzip.open(f"{prefix}-images-idx3-ubyte.gz") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051 and rows == cols == 28 and n >= count
        raw = torch.frombuffer(bytearray(f.read(count * 28 * 28)), dtype=torch.uint8)
    with gzip.open(f"{prefix}-labels-idx1-ubyte.gz") as f:
        magic, n = struct.unpack(">II", f.read(8))
        assert magic == 2049 and n >= count
        labels = torch.frombuffer(bytearray(f.read(count)), dtype=torch.uint8).long()
    blocks = raw.reshape(count, SIDE, 2, SIDE, 2).int().sum(dim=(2, 4))
    return (blocks.float() / 1020.0).reshape(count, PIXELS), labels


def uniform_init(layer, g):
    """nn.Linear's default range, uniform in [-1/sqrt(in), 1/sqrt(in)), from torch.randint's draws
    (as ch09::uniform_init draws them): the weights first, then the biases."""
    bound = 1 / (layer.in_features ** 0.5)
    draws = lambda n: (torch.randint(0, 1 << 24, (n,), generator=g).double() / (1 << 24) * 2 - 1)
    with torch.no_grad():
        layer.weight.copy_((draws(layer.weight.numel()) * bound).float().reshape(layer.weight.shape))
        layer.bias.copy_((draws(layer.bias.numel()) * bound).float())
