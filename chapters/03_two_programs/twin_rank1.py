"""Chapter 03's twin, rank 1: post B's try_rank1.py with PyTorch (gloo), mirroring rank1.cpp.

Run it and twin_rank0.py in two terminals, in either order (not under a launcher); see
twin_rank0.py. Like post B, it writes RANK=1 and WORLD_SIZE=2 into its own environment (post
B's comment calls that the "local rank": it is the global rank) and lets env:// read them.
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master-addr", help="else MASTER_ADDR, else 127.0.0.1")
    parser.add_argument("--master-port", type=int, help="else MASTER_PORT, else 29501")
    parser.add_argument("--timeout", type=int, default=60, help="seconds to wait for rank 0")
    return parser.parse_args()


def out(text):
    os.write(1, f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n".encode())


def main():
    args = parse_args()
    os.environ["RANK"] = "1"
    os.environ["WORLD_SIZE"] = "2"
    if args.master_addr:
        os.environ["MASTER_ADDR"] = args.master_addr
    if args.master_port:
        os.environ["MASTER_PORT"] = str(args.master_port)
    for name, seed_value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29501")):
        if not os.environ.get(name):  # unset or empty: post B's value
            os.environ[name] = seed_value
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"

    out(f"waiting up to {args.timeout} s for rank 0 at {where} (RANK=1, WORLD_SIZE=2 set)")
    dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    out(f"Rank: {rank}, World size: {world}")
    t = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(t)
    out(f"all_reduce(rank + 1): {t!r}")
    ok = rank == 1 and world == 2 and t.item() == 3

    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    return 0 if verdict.item() == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
