"""Chapter 03's twin, rank 0: post B's try_rank0.py with PyTorch (gloo), mirroring rank0.cpp.

Run it and twin_rank1.py in two terminals, in either order (not under a launcher):
    /usr/bin/python3 chapters/03_two_programs/twin_rank0.py
    /usr/bin/python3 chapters/03_two_programs/twin_rank1.py
They print the same lines as ch03_rank0 and ch03_rank1. (A C++ rank cannot meet a Python one:
their stores speak different protocols.)

What changed from post B: gloo instead of nccl (it runs without GPUs), MASTER_ADDR/MASTER_PORT
set only when neither a flag nor the environment gives them, and a timeout (post B passes none:
torch 1.13's default is 30 minutes). Post B says "start rank 0 first"; torch does not need that
either: a TCPStore client retries until its timeout. If rank 1 never comes, torch 1.13's rank 0
gives up after about twice the timeout, not once: its store first waits the timeout for rank 1
to connect, then gloo waits again for rank 1's address (the README's deep dive "PyTorch 1.13
vs 2.x: what the timeout bounds while two programs meet").
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

RANK, WORLD_SIZE = 0, 2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master-addr", help="else MASTER_ADDR, else 127.0.0.1")
    parser.add_argument("--master-port", type=int, help="else MASTER_PORT, else 29501")
    parser.add_argument("--timeout", type=int, default=60, help="seconds to wait for rank 1")
    return parser.parse_args()


def out(text):
    os.write(1, f"[rank {RANK}/{WORLD_SIZE}] {text}\n".encode())


def main():
    args = parse_args()
    # Post B's os.environ['MASTER_ADDR'] = '127.0.0.1', without overwriting a value given.
    if args.master_addr:
        os.environ["MASTER_ADDR"] = args.master_addr
    if args.master_port:
        os.environ["MASTER_PORT"] = str(args.master_port)
    for name, seed_value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29501")):
        if not os.environ.get(name):  # unset or empty: post B's value
            os.environ[name] = seed_value
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"

    out(f"waiting up to {args.timeout} s for rank 1 at {where} (rank=0, world_size=2 passed)")
    dist.init_process_group(backend="gloo", rank=RANK, world_size=WORLD_SIZE,
                            timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    out(f"Rank: {rank}, World size: {world}")
    t = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(t)
    out(f"all_reduce(rank + 1): {t!r}")
    ok = rank == RANK and world == WORLD_SIZE and t.item() == 3

    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    if verdict.item() == 1:
        out("OK: the two programs met; all_reduce(rank + 1) = 1 + 2 = 3")
    else:
        out("MISMATCH: expected rank 0 of 2 and all_reduce(rank + 1) = 3 on both")
    dist.destroy_process_group()  # post B's "release resources"
    return 0 if verdict.item() == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
