"""Chapter 10's twin: the collective mistakes of ch10_broken, made with PyTorch (gloo).

Run under a launcher, with or without PyTorch's own check:
    ddprun --standalone --nproc-per-node 2 twin.py CASE [--timeout S]
    TORCH_DISTRIBUTED_DEBUG=DETAIL ddprun --standalone --nproc-per-node 2 twin.py CASE
CASE is partial-collective, mismatched-size, mismatched-dtype, mismatched-op or skipped-barrier:
the same code as broken.cpp's, with the mistake. Each rank prints the tensor it ended with or the error it got
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


def skipped_barrier(rank):
    if rank != 1:  # THE MISTAKE: rank 1 has no validation shard and skips the barrier
        # PyTorch's monitored_barrier is Gloo-only; wait_all_ranks names every missing rank.
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=2), wait_all_ranks=True)
    epoch_loss = torch.full((1,), 1.0)
    dist.all_reduce(epoch_loss)
    return epoch_loss


CASES = {"partial-collective": partial_collective, "mismatched-size": mismatched_size,
         "mismatched-dtype": mismatched_dtype, "mismatched-op": mismatched_op,
         "skipped-barrier": skipped_barrier}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--timeout", type=float, default=5, help="seconds for every collective")
    args = parser.parse_args()
    # env:// as the launcher sets it, in two steps so that only the collectives get the short
    # --timeout: the store waits up to 60 s for every rank to start (importing torch takes a while
    # on a busy machine), then the group's collectives wait --timeout.
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                          is_master=rank == 0, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        result = CASES[args.case](rank)
    except RuntimeError as e:
        out(f"error: {str(e).splitlines()[0]}")
        raise SystemExit(1)
    out(f"result: {result}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
