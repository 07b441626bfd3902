"""Chapter 10's twin: the collective mistakes of ch10_broken, made with PyTorch (gloo).

Run under a launcher, with or without PyTorch's own check:
    ddprun --standalone --nproc-per-node 2 /usr/bin/python3 twin.py CASE [--timeout S]
    TORCH_DISTRIBUTED_DEBUG=DETAIL ddprun --standalone --nproc-per-node 2 /usr/bin/python3 twin.py CASE
CASE is partial-collective, mismatched-size, mismatched-dtype or mismatched-op: the same code as
broken.cpp's, with the mistake. Each rank prints the tensor it ended with or the error it got
(first line only), and exits 1 on an error. What PyTorch 1.13 does is the chapter's comparison;
tests/chapters/torch_failure_modes.py runs every case both ways and checks it.
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist


def out(text):
    os.write(1, f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n".encode())


def partial_collective(rank):
    loss = torch.full((1,), 0.5 * (rank + 1))
    if rank == 0:  # THE MISTAKE: only rank 0 reduces (it alone prints)
        dist.all_reduce(loss)
    dist.barrier()
    return loss


def mismatched_size(rank):
    samples = 4 - rank % 2  # the last batch: 4 samples on rank 0, 3 on rank 1
    losses = torch.full((samples,), 0.25)
    dist.all_reduce(losses)
    return losses


def mismatched_dtype(rank):
    correct = torch.full((1,), 90.0 + rank, dtype=torch.float64 if rank == 0 else torch.float32)
    dist.all_reduce(correct)
    return correct


def mismatched_op(rank):
    loss = torch.full((1,), 0.5 * (rank + 1))
    dist.all_reduce(loss, op=dist.ReduceOp.MAX if rank == 0 else dist.ReduceOp.SUM)
    return loss


CASES = {"partial-collective": partial_collective, "mismatched-size": mismatched_size,
         "mismatched-dtype": mismatched_dtype, "mismatched-op": mismatched_op}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--timeout", type=float, default=5, help="seconds for every wait")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    try:
        result = CASES[args.case](rank)
    except RuntimeError as e:
        out(f"error: {str(e).splitlines()[0]}")
        raise SystemExit(1)
    out(f"result: {result}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
