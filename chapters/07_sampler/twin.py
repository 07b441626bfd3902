"""Chapter 07's twin: the same lesson with PyTorch (gloo), as a reader of post D would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 /usr/bin/python3 twin.py [--dataset-size 11 ...]
It takes the flags of ch07_sampler and prints the same lines; tests/chapters/chapter_check.py
parity compares them.
"""
import argparse
import os
from collections import Counter

import torch
import torch.distributed as dist
from torch.utils.data import (BatchSampler, RandomSampler, SequentialSampler,
                              SubsetRandomSampler, WeightedRandomSampler)
from torch.utils.data.distributed import DistributedSampler


PREFIX = {}  # "rank" and "world", set once the group exists (and kept after it is destroyed)


def out(text):
    # One write() per line: print() writes the text and the newline separately, and lines of
    # two ranks sharing a terminal or a pipe would interleave.
    os.write(1, f"[rank {PREFIX['rank']}/{PREFIX['world']}] {text}\n".encode())


def out0(text):
    if PREFIX["rank"] == 0:
        out(text)


def join(values, sep=" "):
    return sep.join(str(v) for v in values)


def shard_by_hand(n, world, rank, shuffle, seed, drop_last, epoch):
    """Post D's __iter__, in torch 1.13's version, written out as main.cpp writes it."""
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    num_samples = n // world if drop_last and n % world else -(-n // world)
    total_size = num_samples * world
    order += [order[(i - n) % n] for i in range(n, total_size)]
    order = order[:total_size]
    return order[rank:total_size:world]


def gather_shards(mine):
    if not mine:
        # Every rank has the same num_samples, so all of them are empty here. torch 1.13's gloo
        # all_gather of empty tensors kills the process (SIGFPE): there is nothing to gather.
        return [[] for _ in range(dist.get_world_size())]
    t = torch.tensor(mine, dtype=torch.int64)
    shards = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(shards, t)
    return [s.tolist() for s in shards]


def draw_grid(epoch, shards, n):
    world = len(shards)
    if n > 40:
        out0(f"epoch {epoch}: grid left out for more than 40 indices")
        return
    width = len(str(n - 1)) + 1
    out0(f"epoch {epoch}: who reads which index (x read, p padding, . not read)")
    out0("  index  " + "".join(str(i).rjust(width) for i in range(n)))
    padded = 0
    for r in range(world):
        row = ["."] * n
        for k, index in enumerate(shards[r]):
            padding = r + k * world >= n
            row[index] = "p" if padding else "x"
            padded += padding
        out0(f"  rank {r} " + "".join(c.rjust(width) for c in row))
    reads = sum(len(s) for s in shards)
    out0(f"epoch {epoch}: {reads} reads of {n} indices: {padded} padded, "
         f"{n + padded - reads} dropped")


def covers_dataset(shards, n, drop_last):
    world = len(shards)
    times = Counter(i for s in shards for i in s)
    reads = sum(times.values())
    if any(i < 0 or i >= n or (drop_last and c != 1) for i, c in times.items()):
        return False
    if drop_last and n % world:
        return len(times) == n // world * world and reads == len(times)
    return len(times) == n and reads == -(-n // world) * world


def make_data_sampler(dataset, shuffle, distributed):
    """Post D's helper (its samplers.DistributedSampler is torch's, in an older version)."""
    if distributed:
        return DistributedSampler(dataset, shuffle=shuffle)
    if shuffle:
        sampler = torch.utils.data.sampler.RandomSampler(dataset)
    else:
        sampler = torch.utils.data.sampler.SequentialSampler(dataset)
    return sampler


def show_other_samplers(n, seed):
    for shuffle, distributed in [(True, True), (True, False), (False, False)]:
        s = make_data_sampler(range(n), shuffle, distributed)
        out0(f"make_data_sampler(shuffle={shuffle}, distributed={distributed}) -> "
             f"{type(s).__name__}, len {len(s)}")
    g = torch.Generator()
    g.manual_seed(seed)
    even = [i for i in range(n) if i % 2 == 0]
    weights = [float(1 + i % 3) for i in range(n)]
    out0("SequentialSampler:     " + join(SequentialSampler(range(n))))
    out0("RandomSampler:         " + join(RandomSampler(range(n), generator=g)))
    out0("SubsetRandomSampler:   " + join(SubsetRandomSampler(even, generator=g))
         + "  (the even indices)")
    out0("WeightedRandomSampler: "
         + join(WeightedRandomSampler(weights, n, replacement=True, generator=g))
         + "  (weights 1, 2, 3, 1, 2, 3, ...)")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dataset-size", type=int, default=11)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--drop-last", action="store_true")
    p.add_argument("--backend", default="gloo")
    return p.parse_args()


def main():
    args = parse_args()
    dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    PREFIX.update(rank=rank, world=world)
    n = args.dataset_size
    sampler = DistributedSampler(range(n), shuffle=args.shuffle, seed=args.seed,
                                 drop_last=args.drop_last)
    dropped = n - sampler.total_size if args.drop_last else 0
    out0(f"dataset of {n} indices on {world} ranks: num_samples = {sampler.num_samples}, "
         f"total_size = {sampler.total_size} ({sampler.total_size - n + dropped} padded, "
         f"{dropped} dropped)")

    ok = True
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        mine = list(sampler)
        out(f"epoch {epoch} indices: {join(mine)}")
        hand = [shard_by_hand(n, world, r, args.shuffle, args.seed, args.drop_last, epoch)
                for r in range(world)]
        ok = ok and mine == hand[rank]

        batches = BatchSampler(sampler, args.batch_size, drop_last=False)
        text = "".join(f" [{join(b, ', ')}]" for b in batches)
        out(f"epoch {epoch} batches (len {len(batches)}):{text}")

        shards = gather_shards(mine)
        if rank == 0:
            draw_grid(epoch, shards, n)
        ok = ok and shards == hand and covers_dataset(shards, n, args.drop_last)

    if rank == 0:
        show_other_samplers(n, args.seed)

    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    if verdict.item() != 1:
        out0("MISMATCH: a shard differs from the computation by hand (see above)")
        return 1
    out0("OK: in every epoch, every shard matches the computation by hand, and the shards cover "
         "the dataset as the closed form says")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
