"""The twins' copy of fashion_data.h: Fashion-MNIST's first images shrunk to 14x14, and the
initial weights drawn as ch09::uniform_init draws them; and the programs' first step, joining
and reading the data, with their "[rank R/W]" lines. Chapter 09's and 12's twins import it, so both
read and draw the same bits."""
import gzip
import os
import struct

import torch
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

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


PREFIX = {}  # rank and world, for out(); set by join_and_read


def out(text):
    """One line on stdout, prefixed as the C++ programs prefix theirs, written in one call."""
    os.write(1, f"[rank {PREFIX['rank']}/{PREFIX['world']}] {text}\n".encode())


def out0(text):
    if PREFIX["rank"] == 0:
        out(text)


def join_and_read(args):
    """Joins the job on Gloo (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher), reads
    args.train_samples and args.test_samples images, and prints the programs' first line.
    Returns rank, world, train_x, train_y, test_x, test_y."""
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    PREFIX.update(rank=rank, world=world)
    train_x, train_y = read_idx(f"{SOURCE}/train", args.train_samples)
    test_x, test_y = read_idx(f"{SOURCE}/t10k", args.test_samples)
    out0(f"Fashion-MNIST, 14x14: {len(train_y)} training and {len(test_y)} test images, {world} "
         f"{'rank' if world == 1 else 'ranks'}, batch {args.batch_size} per rank")
    return rank, world, train_x, train_y, test_x, test_y


def add_training_flags(p, train_samples, test_samples, epochs, lr):
    """The flags every Fashion-MNIST program takes, with its program's defaults."""
    p.add_argument("--train-samples", type=int, default=train_samples)
    p.add_argument("--test-samples", type=int, default=test_samples)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=0)


def print_throughput(training_seconds, trained, world):
    """The programs' --throughput line: every rank's samples over the slowest rank's seconds."""
    slowest = torch.tensor([training_seconds], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    samples = trained * world
    out0(f"throughput: {samples / slowest.item():.0f} samples/s "
         f"({samples} samples in {slowest.item():.3f} s)")


def test_shard(count):
    """This rank's indices of a `count`-image test set as DistributedSampler(shuffle=False) deals
    them, without its padding: over all ranks, each image exactly once."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = list(DistributedSampler(range(count), shuffle=False))
    return [i for k, i in enumerate(mine) if rank + k * world < count]
