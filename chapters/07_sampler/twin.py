"""Chapter 07's twin: the same lesson with PyTorch (gloo), as a reader of post D would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py [--dataset-size 11 ...]
It takes the flags of ch07_sampler and prints the same lines; tests/chapters/chapter_check.py
parity compares them. Where main.cpp cuts batches with a BatchSampler, the twin reads them from
a DataLoader, as the posts do: the parity test compares them index for index.
"""
import argparse
import itertools
import os
from collections import Counter

import torch
import torch.distributed as dist
from torch.utils.data import (BatchSampler, DataLoader, RandomSampler, SequentialSampler,
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


class IterationBasedBatchSampler(BatchSampler):
    """The iteration-based batch sampler of post D's make_batch_data_sampler, as
    maskrcnn-benchmark publishes it (maskrcnn_benchmark/data/samplers/
    iteration_based_batch_sampler.py), written again from its behaviour: it chains passes of a
    batch sampler while iteration <= num_iterations, calls set_epoch(iteration) on the sampler
    before each pass, and yields the batches of iterations start_iter + 1 .. num_iterations.
    On an empty shard it loops for ever, as the original does (main() never gives it one)."""

    def __init__(self, batch_sampler, num_iterations, start_iter=0):
        self.batch_sampler = batch_sampler
        self.num_iterations = num_iterations
        self.start_iter = start_iter

    def __iter__(self):
        iteration = self.start_iter
        while iteration <= self.num_iterations:
            if hasattr(self.batch_sampler.sampler, "set_epoch"):
                self.batch_sampler.sampler.set_epoch(iteration)
            for batch in self.batch_sampler:
                iteration += 1
                if iteration > self.num_iterations:
                    break
                yield batch

    def __len__(self):
        return self.num_iterations


def make_batch_data_sampler(dataset, sampler, aspect_grouping, images_per_batch, num_iters=None,
                            start_iter=0):
    """Post D's helper (maskrcnn-benchmark's), without the aspect-ratio grouping."""
    if aspect_grouping:
        raise NotImplementedError("aspect-ratio grouping is not part of this chapter")
    batch_sampler = BatchSampler(sampler, images_per_batch, drop_last=False)
    if num_iters is not None:
        batch_sampler = IterationBasedBatchSampler(batch_sampler, num_iters, start_iter)
    return batch_sampler


def iteration_batches(n, args, num_iterations, start_iter, skip=0):
    """The batches a job started (or restarted) at start_iter reads, as maskrcnn-benchmark's
    make_data_loader builds its loader: a fresh DistributedSampler, the batch sampler, and
    DataLoader(dataset, batch_sampler=...)."""
    sampler = DistributedSampler(range(n), shuffle=args.shuffle, seed=args.seed,
                                 drop_last=args.drop_last)
    batch_sampler = make_batch_data_sampler(range(n), sampler, False, args.batch_size,
                                            num_iterations, start_iter)
    # Skip in the batch sampler, not in the loader, so that skipped batches are never loaded.
    loader = DataLoader(range(n), batch_sampler=itertools.islice(batch_sampler, skip, None))
    return [b.tolist() for b in loader]


def pass_marks(batches, per_pass):
    text = ""
    for b, batch in enumerate(batches):
        if b > 0 and b % per_pass == 0:
            text += " |"
        text += f" [{join(batch, ', ')}]"
    return text


def pass_seeds(start_iter, num_iterations, per_pass):
    seeds = range(start_iter, num_iterations, per_pass)
    return f" (set_epoch {', '.join(str(s) for s in seeds)})" if seeds else ""


def iterations_text(first, last):
    if first > last:
        return "no iteration"
    return f"iteration {first}" if first == last else f"iterations {first}-{last}"


def ranks_that(yes):
    count = torch.tensor([1 if yes else 0], dtype=torch.int64)
    dist.all_reduce(count)
    return count.item()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dataset-size", type=int, default=11)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--drop-last", action="store_true")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--resume-at", type=int, default=3)
    p.add_argument("--backend", default="gloo")
    args = p.parse_args()
    if args.resume_at > args.iterations:
        p.error(f"--resume-at {args.resume_at} is past --iterations {args.iterations}")
    return args


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

        # The batches as the posts read them: DataLoader builds BatchSampler(sampler,
        # batch_size, drop_last=False) and collates each batch of dataset[i] into one tensor.
        loader = DataLoader(range(n), batch_size=args.batch_size, sampler=sampler)
        batches = [b.tolist() for b in loader]
        out(f"epoch {epoch} indices: {join(mine)} -> batches (len {len(loader)}):"
            + "".join(f" [{join(b, ', ')}]" for b in batches))
        ok = ok and batches == list(BatchSampler(sampler, args.batch_size, drop_last=False))
        if epoch == 0 and rank == 0:
            # Worker processes change who fetches a batch, not which batch comes when (one
            # rank checks it, once: starting workers costs a few tenths of a second). Workers come
            # from a fork server, not fork(): chapter 06's pitfalls say why.
            workers = DataLoader(range(n), batch_size=args.batch_size, sampler=sampler,
                                 num_workers=2, multiprocessing_context="forkserver")
            ok = ok and [b.tolist() for b in workers] == batches

        shards = gather_shards(mine)
        if rank == 0:
            draw_grid(epoch, shards, n)
        hand = [shard_by_hand(n, world, r, args.shuffle, args.seed, args.drop_last, epoch)
                for r in range(world)]
        ok = ok and shards == hand and covers_dataset(shards, n, args.drop_last)
        ok = ok and mine == shards[rank]

    per_pass = len(BatchSampler(sampler, args.batch_size, drop_last=False))
    if per_pass == 0:
        out0("iterations: every shard is empty, so iteration 1 would never come")
    else:
        k, last = args.resume_at, args.iterations
        run = iteration_batches(n, args, last, 0)
        resumed = iteration_batches(n, args, last, k)
        into_pass = k % per_pass
        exact = iteration_batches(n, args, last, k - into_pass, skip=into_pass)
        tail = run[k:]
        out(f"{iterations_text(1, last)}, one run{pass_seeds(0, last, per_pass)}:"
            f"{pass_marks(run, per_pass)}")
        out(f"{iterations_text(k + 1, last)}, resumed at {k}{pass_seeds(k, last, per_pass)}:"
            f"{pass_marks(resumed, per_pass)}")
        same, exact_same = ranks_that(resumed == tail), ranks_that(exact == tail)
        where = (f"(where a pass of {per_pass} begins)" if into_pass == 0
                 else f"(inside a pass of {per_pass})")
        out0(f"resumed at {k} {where}: {iterations_text(k + 1, last)} as in the one run on "
             f"{same} of {world} ranks; at {k - into_pass}, skipping {into_pass}: on "
             f"{exact_same} of {world}")
        ok = (ok and len(run) == last and exact == tail and len(resumed) == last - k
              and (into_pass != 0 or resumed == tail))

    if rank == 0:
        show_other_samplers(n, args.seed)

    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    if verdict.item() != 1:
        out0("MISMATCH: a shard or a batch differs from the computation by hand, or the exact "
             "resume from the one run (see above)")
        return 1 if rank == 0 else 0  # as main.cpp: rank 0's MISMATCH line must get out
    out0("OK: every shard is what the computation by hand gives, the shards cover the dataset, "
         "and the exact resume replays the run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
