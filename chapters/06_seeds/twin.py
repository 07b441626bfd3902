"""Chapter 06's twin: the same lesson with PyTorch (gloo), as a reader of post C would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 /usr/bin/python3 twin.py [--seed 0] [--no-deterministic]
It prints the same lines as ch06_seeds, with the same numbers: dist::randint is torch.randint on
the CPU, draw for draw. tests/chapters/chapter_check.py parity compares them.
"""
import argparse
import os
import random

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist

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


# --8<-- [start:predicted_draws]
def predicted_draws(seed, images):
    """torch.randint's draws, predicted with a fresh torch.Generator seeded with seed."""
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randint(0, images, (DRAWS,), generator=g).tolist()
# --8<-- [end:predicted_draws]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--images", type=int, default=1000)
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
    predicted = all(rows[r] == predicted_draws(args.seed + r, args.images) for r in range(world))
    different = all(rows[a] != rows[b] for a in range(world) for b in range(a + 1, world))
    fix_works = predicted and different
    out0("seed + rank: " + ("" if fix_works else "NOT ")
         + ("what mt19937(seed + 0) predicts" if world == 1
            else "pairwise different partners, each as mt19937(seed + rank) predicts"))

    init_seeds(args.seed + rank, args.deterministic)
    repeated = torch.tensor([1 if torch.equal(mosaic_partners(args.images), fixed) else 0],
                            dtype=torch.int32)
    dist.all_reduce(repeated, op=dist.ReduceOp.MIN)
    repeats = repeated.item() == 1
    out0(f"rerun with the same seeds: {'every rank' if repeats else 'NOT every rank'} drew the "
         "same partners again")

    out0(f"deterministic algorithms: {'on' if cudnn.deterministic else 'off'} "
         f"(in PyTorch: cudnn.deterministic={cudnn.deterministic}, "
         f"cudnn.benchmark={cudnn.benchmark})")

    ok = bug_shows and fix_works and repeats
    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    if verdict.item() != 1:
        out0(f"MISMATCH: bug shown {int(bug_shows)}, fix works {int(fix_works)}, reruns repeat "
             f"{int(repeats)} (on rank 0; see the lines above)")
        return 1
    if world == 1:
        out0("OK: the draws are mt19937's and reruns repeat (2 or more ranks show the bug and the "
             "fix)")
    else:
        out0("OK: one seed gave identical picks, seed + rank gave different ones, reruns repeat")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
