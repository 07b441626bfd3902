#!/usr/bin/env python3
"""Checks dist's samplers (common/src/data/sampler.cpp) against PyTorch's, index for index.

Usage: /usr/bin/python3 tests/unit/sampler_parity.py path/to/sampler_driver

Builds thousands of deterministic cases (DistributedSampler for dataset sizes 0 to 1,000,003,
world sizes 1 to 8, every rank, shuffle and drop_last on and off, several seeds and epochs;
BatchSampler over it; the iteration-based batch sampler of post D's make_batch_data_sampler; torch.randperm; RandomSampler, SubsetRandomSampler and
WeightedRandomSampler with an explicit generator and with the default one), feeds them to the C++
driver (tests/unit/sampler_driver.cpp, which documents the case format) and compares each of its
output lines with what torch.utils.data computes for the same case. No process group is needed:
DistributedSampler is given num_replicas and rank. Exits 1 on any difference.
"""

import random
import sys
from pathlib import Path

import torch
from torch.utils.data import (BatchSampler, RandomSampler, SequentialSampler,
                              SubsetRandomSampler, WeightedRandomSampler)
from torch.utils.data.distributed import DistributedSampler

# Post D's iteration-based batch sampler, written once: chapter 07's twin holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "chapters" / "07_sampler"))
from twin import IterationBasedBatchSampler  # noqa: E402
from parity_harness import compare, run_driver  # noqa: E402  (beside this file)

SEED = 707  # fixed so that every run checks the same cases


def join(values):
    return " ".join(str(v) for v in values)


def passes(sampler, count):
    return f"len:{len(sampler)} " + ";".join(join(list(sampler)) for _ in range(count))


def generator_for(gen):
    """The generator a case names: a seeded torch.Generator, or None after seeding the default."""
    if isinstance(gen, str):
        torch.manual_seed(int(gen.split(":")[1]))
        return None
    g = torch.Generator()
    g.manual_seed(gen)
    return g


def distributed(n, w, rank, shuffle, seed, epoch, drop_last):
    sampler = DistributedSampler(range(n), num_replicas=w, rank=rank, shuffle=bool(shuffle),
                                 seed=seed, drop_last=bool(drop_last))
    sampler.set_epoch(epoch)
    return sampler


def expected(case):
    kind, *args = case
    if kind == "randperm":
        seed, n = args
        g = torch.Generator()
        g.manual_seed(seed)
        return join(torch.randperm(n, generator=g).tolist())
    if kind == "sequential":
        return passes(SequentialSampler(range(args[0])), 1)
    if kind == "distributed":
        return passes(distributed(*args), 1)
    if kind == "batch":
        batches = BatchSampler(distributed(*args[:7]), args[7], bool(args[8]))
        return f"len:{len(batches)} " + ",".join(join(b) for b in batches)
    if kind == "iteration":
        n, w, rank, shuffle, seed, batch_size, num_iterations, start_iter = args
        sampler = DistributedSampler(range(n), num_replicas=w, rank=rank, shuffle=bool(shuffle),
                                     seed=seed)
        batches = IterationBasedBatchSampler(BatchSampler(sampler, batch_size, False),
                                             num_iterations, start_iter)
        return (f"len:{len(batches)} " + ",".join(join(b) for b in batches) +
                f" epoch:{sampler.epoch}")
    if kind == "random":
        n, replacement, num_samples, gen, count = args
        sampler = RandomSampler(range(n), replacement=bool(replacement),
                                num_samples=None if num_samples == -1 else num_samples,
                                generator=generator_for(gen))
        return passes(sampler, count)
    if kind == "subset":
        gen, count, indices = args
        return passes(SubsetRandomSampler(indices, generator=generator_for(gen)), count)
    if kind == "weighted":
        num_samples, replacement, gen, count, weights = args
        sampler = WeightedRandomSampler(weights, num_samples, replacement=bool(replacement),
                                        generator=generator_for(gen))
        return passes(sampler, count)
    raise ValueError(kind)


def as_line(case):
    words = []
    for arg in case:
        words += [repr(v) for v in arg] if isinstance(arg, list) else [str(arg)]
    return " ".join(words)


def distributed_cases():
    cases = []
    for n in [0, 1, 2, 3, 5, 7, 10, 11, 16, 100, 1000]:
        for w in range(1, 9):
            for drop_last in (0, 1):
                configs = [(0, 0, 0)] + [(1, s, e) for s in (0, 1, 42, -3, 2**32 + 7)
                                         for e in (0, 1, 9)]
                for shuffle, seed, epoch in configs:
                    cases += [("distributed", n, w, r, shuffle, seed, epoch, drop_last)
                              for r in range(w)]
    for n in (4097, 65537):  # larger datasets: a few ranks of a few world sizes
        for w in (3, 8):
            for drop_last in (0, 1):
                cases += [("distributed", n, w, r, 1, 0, 5, drop_last) for r in (0, w - 1)]
    cases += [("distributed", 1_000_003, 8, r, 1, 3, 2, d) for r in (0, 7) for d in (0, 1)]
    return cases


def batch_cases():
    cases = []
    for n in [0, 1, 7, 10, 11, 100]:
        for w in (1, 2, 3, 4, 8):
            for epoch in (0, 1):
                for drop_last in (0, 1):
                    for batch_size in (1, 2, 3, 4, 7, 64):
                        cases += [("batch", n, w, r, 1, 0, epoch, drop_last, batch_size, bd)
                                  for r in range(w) for bd in (0, 1)]
    return cases


def iteration_cases():
    """Passes that end exactly at num_iterations and past it; resuming mid-pass and at a pass's
    start; shards of 1 to 3 batches."""
    cases = []
    for n in (5, 10, 11, 16):
        for w in (1, 2, 3):
            for batch_size in (1, 2, 3, 4):
                for num_iterations, start_iter in ((0, 0), (1, 0), (6, 0), (7, 0), (12, 0),
                                                   (12, 5), (12, 6), (12, 12), (25, 13)):
                    cases += [("iteration", n, w, r, shuffle, 7, batch_size, num_iterations,
                               start_iter) for r in range(w) for shuffle in (0, 1)]
    return cases


def random_sampler_cases():
    cases = []
    for n in [1, 2, 5, 10, 33, 100]:
        for replacement in (0, 1):
            for num_samples in (-1, 1, 7, 40, 64, 65, 200):
                for gen in (0, 7, 2**40 + 1, "none:0", "none:123"):
                    cases.append(("random", n, replacement, num_samples, gen, 3))
    return cases


def subset_cases(rng):
    cases = []
    for size in list(range(0, 21)) + [257]:
        indices = [rng.randint(0, 10_000) for _ in range(size)]
        for gen in (3, "none:5"):
            cases.append(("subset", gen, 2, indices))
    return cases


def weighted_cases(rng):
    cases = []
    for size in [1, 2, 3, 6, 10, 50, 300]:
        for flavour in ("uniform", "skewed", "with_zeros", "integers"):
            weights = []
            for i in range(size):
                if flavour == "uniform":
                    weights.append(rng.random())
                elif flavour == "skewed":
                    weights.append(10 ** rng.uniform(-6, 3))
                elif flavour == "with_zeros":
                    weights.append(0.0 if rng.random() < 0.3 and i > 0 else rng.random())
                else:
                    weights.append(float(rng.randint(1, 5)))
            positive = sum(1 for x in weights if x > 0)
            for gen in (11, "none:2"):
                for num_samples in (1, 2, 5, 100, 1000):
                    cases.append(("weighted", num_samples, 1, gen, 2, weights))
                for num_samples in sorted({1, min(2, positive), positive}):
                    cases.append(("weighted", num_samples, 0, gen, 2, weights))
    return cases


def all_cases():
    rng = random.Random(SEED)
    cases = [("randperm", seed, n) for seed in (0, 1, 5, -1, 2**32 + 5, 67280421310721)
             for n in (0, 1, 2, 3, 7, 10, 100, 1000, 65537)]
    cases += [("randperm", 2024, 1_000_003)]
    cases += [("sequential", n) for n in (0, 1, 5, 100)]
    cases += distributed_cases() + batch_cases() + iteration_cases() + random_sampler_cases()
    cases += subset_cases(rng) + weighted_cases(rng)
    return cases


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/sampler_driver")
    cases = all_cases()
    got = run_driver(sys.argv[1], [as_line(case) for case in cases], "\n", "lines")
    counts = {}
    for case in cases:
        counts[case[0]] = counts.get(case[0], 0) + 1

    def show(case, want, ours):
        print(f"MISMATCH for case: {as_line(case)[:200]}")
        print(f"  torch: {want[:300]}")
        print(f"  dist:  {ours[:300]}")

    return compare(cases, got, expected, show, ", ".join(f"{n} {kind}" for kind, n in counts.items()))

if __name__ == "__main__":
    sys.exit(main())
