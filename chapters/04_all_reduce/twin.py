"""Chapter 04's twin: the same lesson with PyTorch (gloo), as a reader of post C would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 /usr/bin/python3 twin.py
It prints the same lines as ch04_all_reduce; tests/chapters/chapter_check.py parity compares them.
"""
import os

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp


def out(rank, world, text):
    # One write() per line: print() writes the text and the newline separately, and lines of
    # two ranks sharing a terminal or a pipe would interleave.
    os.write(1, f"[rank {rank}/{world}] {text}\n".encode())


def label(name):
    return f"{name}:".ljust(9)


def ring_all_reduce(t, rank, world):
    """SUM by hand around a ring of send/recv, exactly as main.cpp does it."""
    t = t.clone()
    chunk = t.numel() // world
    right, left = (rank + 1) % world, (rank - 1) % world
    for phase in range(2):
        for step in range(world - 1):
            out_c = (rank - step if phase == 0 else rank + 1 - step) % world
            in_c = (rank - step - 1 if phase == 0 else rank - step) % world
            sent = t[out_c * chunk:(out_c + 1) * chunk].clone()
            received = torch.empty_like(sent)
            if rank % 2 == 0:
                dist.send(sent, right)
            dist.recv(received, left)
            if rank % 2 != 0:
                dist.send(sent, right)
            if phase == 0:
                received += t[in_c * chunk:(in_c + 1) * chunk]
            t[in_c * chunk:(in_c + 1) * chunk] = received
    return t


def draw_ring(world):
    if world == 1:
        return ["ring all-reduce on 1 rank: nothing to send"]
    lines = [f"ring all-reduce on {world} ranks, the tensor cut in {world} chunks c0..c{world - 1}:"]
    for phase in range(2):
        for step in range(world - 1):
            moves = " | ".join(
                f"{r}->{(r + 1) % world} c{(r - step if phase == 0 else r + 1 - step) % world}"
                for r in range(world)
            )
            name = "reduce-scatter" if phase == 0 else "all-gather    "
            lines.append(f"  {name} step {step + 1}: {moves}")
    lines.append(f"  each rank sent {2 * (world - 1)} chunks of 1/{world} of the tensor")
    return lines


def main():
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = torch.arange(world, dtype=torch.int64) + 1 + world * rank
    out(rank, world, label("tensor") + repr(tensor))

    # Closed forms over the ranks r of i + 1 + world * r, for element i.
    column = [[i + 1 + world * r for r in range(world)] for i in range(world)]
    expected = {"SUM": [sum(c) for c in column], "MIN": [min(c) for c in column],
                "MAX": [max(c) for c in column], "PRODUCT": [int(torch.tensor(c).prod()) for c in column]}
    ok = True
    for name, op in [("SUM", ReduceOp.SUM), ("MIN", ReduceOp.MIN), ("MAX", ReduceOp.MAX),
                     ("PRODUCT", ReduceOp.PRODUCT)]:
        t = tensor.clone()
        dist.all_reduce(t, op=op)
        out(rank, world, label(name) + repr(t))
        ok = ok and t.tolist() == expected[name]

    mean = tensor.float()
    dist.all_reduce(mean)
    mean /= world
    out(rank, world, label("mean") + repr(mean) + "  (SUM, then / world_size)")
    # torch's gloo backend has no ReduceOp.AVG (only NCCL does): sum and divide is what it means.
    avg = tensor.float()
    dist.all_reduce(avg)
    out(rank, world, label("AVG") + repr(avg / world))
    want_mean = torch.tensor(expected["SUM"], dtype=torch.float32) / world
    ok = ok and torch.equal(mean, want_mean) and torch.equal(avg / world, want_mean)

    if rank == 0:
        for line in draw_ring(world):
            out(rank, world, line)
    ring = ring_all_reduce(tensor, rank, world)
    out(rank, world, label("ring") + repr(ring) + "  (send/recv by hand)")
    ok = ok and ring.tolist() == expected["SUM"]

    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=ReduceOp.MIN)
    dist.destroy_process_group()
    if rank == 0:
        if verdict.item() == 1:
            out(rank, world, "OK: every result matches its closed form on every rank")
        else:
            out(rank, world, "MISMATCH: some rank's result differs from its closed form (see above)")
    return 0 if verdict.item() == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
