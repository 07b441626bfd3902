"""Chapter 04's twin: the same lesson with PyTorch (gloo), as a reader of post C would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py
It prints the same lines as ch04_all_reduce; tests/chapters/chapter_check.py parity compares them.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp


def out(rank, world, text):
    # One write() per line: print() writes the text and the newline separately, and lines of
    # two ranks sharing a terminal or a pipe would interleave.
    os.write(1, f"[rank {rank}/{world}] {text}\n".encode())


def label(name):
    return f"{name}:".ljust(17)


def example_tensor(rank, world):
    return torch.arange(world, dtype=torch.int64) + 1 + world * rank


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


def verdict(ok, rank, world, what):
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=ReduceOp.MIN)
    dist.destroy_process_group()
    if rank == 0:
        if flag.item() == 1:
            out(rank, world, f"OK: {what}")
        else:
            out(rank, world, "MISMATCH: some rank's result differs from its closed form (see above)")
    return 0 if flag.item() == 1 or rank != 0 else 1


def main():
    # Step 0: the robust line. python -m torch.distributed.launch passes --local_rank=N (torch
    # 1.x) or --local-rank=N (2.0 on), torchrun passes nothing; this accepts all three.
    parser = argparse.ArgumentParser()
    parser.add_argument("--local-rank", "--local_rank", type=int, default=None)
    parser.add_argument("--local-rank-only", action="store_true")
    args = parser.parse_args()

    # Step 1: the local rank comes from LOCAL_RANK, which every launcher sets.
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    if args.local_rank is not None and args.local_rank != local_rank:
        raise SystemExit(f"--local-rank {args.local_rank} disagrees with LOCAL_RANK {local_rank}")
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.local_rank_only:
        source = "LOCAL_RANK" if "LOCAL_RANK" in os.environ else "the rank (no LOCAL_RANK)"
        said = ("; the launcher's --local-rank argument says the same" if args.local_rank is not None
                else "; no --local-rank argument, as under torchrun")
        out(rank, world, f"local_rank {local_rank}, from {source}{said}")
        return verdict(True, rank, world, "every rank knows its local_rank")
    tensor = example_tensor(rank, world)
    out(rank, world, label("tensor") + repr(tensor))

    # Step 2. Closed forms over the ranks r of i + 1 + world * r, for element i.
    column = [[i + 1 + world * r for r in range(world)] for i in range(world)]
    expected = {"SUM": [sum(c) for c in column], "MIN": [min(c) for c in column],
                "MAX": [max(c) for c in column], "PRODUCT": [int(torch.tensor(c).prod()) for c in column]}
    everyone_want = [example_tensor(r, world) for r in range(world)]
    ok = True
    for name, op in [("SUM", ReduceOp.SUM), ("MIN", ReduceOp.MIN), ("MAX", ReduceOp.MAX),
                     ("PRODUCT", ReduceOp.PRODUCT)]:
        t = tensor.clone()
        dist.all_reduce(t, op=op)
        out(rank, world, label(name) + repr(t))
        ok = ok and t.tolist() == expected[name]

    # Step 3. torch's gloo backend has no ReduceOp.AVG (only NCCL does): sum and divide is what
    # it means.
    mean = tensor.float()
    dist.all_reduce(mean)
    mean /= world
    out(rank, world, label("mean") + repr(mean) + "  (SUM, then / world_size)")
    avg = tensor.float()
    dist.all_reduce(avg)
    out(rank, world, label("AVG") + repr(avg / world))
    want_mean = torch.tensor(expected["SUM"], dtype=torch.float32) / world
    ok = ok and torch.equal(mean, want_mean) and torch.equal(avg / world, want_mean)

    # Step 4: broadcast from rank 0.
    from_rank0 = tensor.clone()
    dist.broadcast(from_rank0, src=0)
    out(rank, world, label("broadcast") + repr(from_rank0) + "  (rank 0's)")
    ok = ok and torch.equal(from_rank0, example_tensor(0, world))

    # Step 5: all_gather into a list of world tensors.
    everyone = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(everyone, tensor)
    out(rank, world, label("all_gather") + repr(everyone))
    ok = ok and all(torch.equal(a, b) for a, b in zip(everyone, everyone_want))

    # Step 6: reduce_scatter. torch 1.13's gloo refuses it ("ProcessGroupGloo does not support
    # reduce_scatter"), so this twin does what it means: the all_reduce's SUM, then this rank's
    # piece of it (on NCCL, dist.reduce_scatter(my_piece, list(tensor.chunk(world))) does it in
    # one call).
    summed = tensor.clone()
    dist.all_reduce(summed)
    my_piece = summed.chunk(world)[rank].clone()
    out(rank, world, label("reduce_scatter") + repr(my_piece) + f"  (element {rank} of the SUM)")
    ok = ok and my_piece.tolist() == expected["SUM"][rank:rank + 1]

    # Step 7: gather to rank 0, then scatter that list back from rank 0.
    gathered = [torch.empty_like(tensor) for _ in range(world)] if rank == 0 else None
    dist.gather(tensor, gather_list=gathered, dst=0)
    if rank == 0:
        out(rank, world, label("gather") + repr(gathered) + "  (rank 0 only)")
    mine = torch.empty_like(tensor)
    dist.scatter(mine, scatter_list=gathered, src=0)
    out(rank, world, label("scatter") + repr(mine) + f"  (item {rank} of rank 0's list)")
    ok = ok and (rank != 0 or all(torch.equal(a, b) for a, b in zip(gathered, everyone_want)))
    ok = ok and torch.equal(mine, example_tensor(rank, world))

    # Step 8: async_op=True returns a work handle at once; wait() blocks until the sum is there.
    total = tensor.clone()
    work = dist.all_reduce(total, op=ReduceOp.SUM, async_op=True)
    expected_total = torch.tensor(expected["SUM"])  # other work, while the all_reduce runs
    work.wait()
    out(rank, world, label("async SUM") + repr(total) + "  (async_op, other work, wait())")
    ok = ok and torch.equal(total, expected_total)

    # Step 9: the ring by hand.
    if rank == 0:
        for line in draw_ring(world):
            out(rank, world, line)
    ring = ring_all_reduce(tensor, rank, world)
    out(rank, world, label("ring") + repr(ring) + "  (send/recv by hand)")
    ok = ok and ring.tolist() == expected["SUM"]

    return verdict(ok, rank, world, "every result matches its closed form on every rank")


if __name__ == "__main__":
    raise SystemExit(main())
