"""Chapter 06's twin: the same lesson with PyTorch (gloo), as a reader of post C would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py [--seed 0] [--no-deterministic]
It prints the same lines as ch06_seeds, with the same numbers: dist::randint is torch.randint on
the CPU, draw for draw, and the DataLoader steps run a real DataLoader with worker processes, whose
seeds the C++ program computes (dist::dataloader_base_seed). tests/chapters/chapter_check.py
parity compares them.
"""
import argparse
import multiprocessing
import os
import random

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler, get_worker_info

IMAGES_PER_RANK = 2
PARTNERS_PER_IMAGE = 3
DRAWS = IMAGES_PER_RANK * PARTNERS_PER_IMAGE


def out(text):
    # One write() per line; RANK/WORLD_SIZE from the launcher, valid after destroy_process_group().
    os.write(1, f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n".encode())


def out0(text):
    if os.environ["RANK"] == "0":
        out(text)


def init_seeds(seed=0, cuda_deterministic=True):
    """Post C's helper, unchanged."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # Speed-reproducibility tradeoff https://pytorch.org/docs/stable/notes/randomness.html
    if cuda_deterministic:  # slower, more reproducible
        cudnn.deterministic = True
        cudnn.benchmark = False
    else:  # faster, less reproducible
        cudnn.deterministic = False
        cudnn.benchmark = True


def mosaic_partners(images):
    return torch.randint(0, images, (DRAWS,))


def show(how, partners, rank, world):
    out(f"{how}mosaics of images {rank} and {rank + world} take partners {partners!r}")


def gather_partners(mine):
    rows = [torch.zeros(DRAWS, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, mine)
    return [row.tolist() for row in rows]


def predicted_draws(seed, images):
    """torch.randint's draws, predicted with a fresh torch.Generator seeded with seed."""
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randint(0, images, (DRAWS,), generator=g).tolist()


def predicted_base_seed(seed):
    """What iter(DataLoader) draws for its workers after torch.manual_seed(seed)."""
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.empty((), dtype=torch.int64).random_(generator=g).item()


class Mosaics(Dataset):
    """One item per worker of every rank: the mosaic partners of image i, drawn in the worker."""

    def __init__(self, images, length):
        self.images, self.length = images, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        info = get_worker_info()  # in a worker: its id and seed (base_seed + id)
        partners = torch.randint(0, self.images, (PARTNERS_PER_IMAGE,))
        return info.id, info.seed - info.id, i, partners


def first(batch):
    return batch[0]  # batch_size=1, and no collation: the tuple as __getitem__ returned it


def load_one_epoch(images, workers, how, generator=None):
    """One epoch of DataLoader(sampler=DistributedSampler(shuffle=False), num_workers=workers):
    worker w of rank r gets one image, r + w * world."""
    world = dist.get_world_size()
    dataset = Mosaics(images, world * workers)
    loader = DataLoader(dataset, batch_size=1, sampler=DistributedSampler(dataset, shuffle=False),
                        num_workers=workers, collate_fn=first, generator=generator,
                        multiprocessing_context="forkserver")
    items = sorted(loader)  # by worker id
    base_seed = items[0][1]
    out(f"{how}: base_seed {base_seed}")
    row = [base_seed]
    for worker, base, image, partners in items:
        assert base == base_seed
        out(f"  worker {worker} (seed base_seed + {worker}): mosaic of image {image} takes "
            f"partners {partners!r}")
        row += partners.tolist()
    return row


def gather_rows(values):
    rows = [torch.zeros(len(values), dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, torch.tensor(values, dtype=torch.int64))
    return [row.tolist() for row in rows]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--deterministic", dest="deterministic", action="store_true", default=True)
    parser.add_argument("--no-deterministic", dest="deterministic", action="store_false")
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    init_seeds(args.seed, args.deterministic)
    same = mosaic_partners(args.images)
    show(f"init_seeds({args.seed}):     ", same, rank, world)
    rows = gather_partners(same)
    bug_shows = all(row == rows[0] for row in rows)
    if world == 1:
        out0("same seed: only 1 rank, so nothing to be identical to")
    else:
        out0(f"same seed: {'all ' if bug_shows else 'NOT all '}{world} ranks drew the same "
             "partners (the mosaic bug)")

    init_seeds(args.seed + rank, args.deterministic)
    fixed = mosaic_partners(args.images)
    show(f"init_seeds({args.seed} + {rank}): ", fixed, rank, world)
    rows = gather_partners(fixed)
    fix_works = all(rows[r] == predicted_draws(args.seed + r, args.images) for r in range(world))
    apart = len({tuple(row) for row in rows}) == len(rows)
    out0("seed + rank: " + ("" if fix_works else "NOT ")
         + ("what mt19937(seed + 0) predicts" if world == 1
            else "pairwise different partners, each as mt19937(seed + rank) predicts" if apart
            else "each as mt19937(seed + rank) predicts, though two ranks drew the same partners "
                 "by chance (few --images)"))

    init_seeds(args.seed + rank, args.deterministic)
    repeated = torch.tensor([1 if torch.equal(mosaic_partners(args.images), fixed) else 0],
                            dtype=torch.int32)
    dist.all_reduce(repeated, op=dist.ReduceOp.MIN)
    repeats = repeated.item() == 1
    out0(f"rerun with the same seeds: {'every rank' if repeats else 'NOT every rank'} drew the "
         "same partners again")

    # DataLoader workers: base_seed from this rank's default generator, worker w seeded base + w.
    init_seeds(args.seed + rank, args.deterministic)
    epoch = gather_rows(load_one_epoch(args.images, args.workers,
                                       f"DataLoader after init_seeds({args.seed} + {rank})"))
    workers_seeded = all(epoch[r][0] == predicted_base_seed(args.seed + r) for r in range(world))
    sets = {tuple(row[k:k + PARTNERS_PER_IMAGE]) for row in epoch
            for k in range(1, len(row), PARTNERS_PER_IMAGE)}
    all_workers = world * args.workers
    out0(f"workers: base_seed {'' if workers_seeded else 'NOT '}as mt19937(seed + rank) predicts, "
         f"and the {all_workers} worker{'' if all_workers == 1 else 's'} drew {len(sets)} "
         f"different set{'' if len(sets) == 1 else 's'} of partners")

    # The bug again, through the loader: generator=g seeded alike on every rank.
    g = torch.Generator()
    g.manual_seed(args.seed)
    shared = gather_rows(load_one_epoch(args.images, args.workers,
                                        f"DataLoader(generator=g), g.manual_seed({args.seed})", g))
    loader_bug_shows = all(row == shared[0] for row in shared)
    if world == 1:
        out0("generator=g: only 1 rank, so nothing to be identical to")
    else:
        out0(f"generator=g: {'' if loader_bug_shows else 'NOT '}every rank's worker w drew what "
             "rank 0's worker w drew (the mosaic bug, through the loader)")

    out0(f"deterministic algorithms: {'on' if cudnn.deterministic else 'off'} "
         f"(in PyTorch: cudnn.deterministic={cudnn.deterministic}, "
         f"cudnn.benchmark={cudnn.benchmark})")

    ok = bug_shows and fix_works and repeats and workers_seeded and loader_bug_shows
    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    if verdict.item() != 1:
        out0(f"MISMATCH: bug shown {int(bug_shows)}, fix works {int(fix_works)}, reruns repeat "
             f"{int(repeats)}, workers seeded {int(workers_seeded)}, loader bug shown "
             f"{int(loader_bug_shows)} (on rank 0; see the lines above)")
        return 1
    if world == 1:
        out0("OK: the draws are mt19937's, reruns repeat, workers are seeded base_seed + worker_id "
             "(2 or more ranks show the bug and the fix)")
    else:
        out0("OK: one seed gave identical picks, seed + rank gave each rank its own stream, reruns "
             "repeat, and generator=g brought the bug back to the workers")
    return 0


if __name__ == "__main__":
    # Workers start from a fork server, a fresh process with this module loaded, not by fork() of
    # a rank whose Gloo threads may hold a lock at that moment (the child would wait on it forever).
    multiprocessing.set_forkserver_preload(["__main__"])
    raise SystemExit(main())
