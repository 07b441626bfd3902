#!/usr/bin/env python3
"""bench_collectives on PyTorch: the same sweep, sizes, timing and checks, on torch's gloo backend.

Run under any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT:
    ddprun --standalone --nproc-per-node 2 /usr/bin/python3 bench/torch_collectives.py

PyTorch 1.13's gloo backend has no reduce_scatter; its row is what a torch user does instead,
all_reduce of the concatenated inputs and then the own slice (so is our library's today:
bench/README.md says so), and is labelled that way.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter")


def bus_factor(op, world):
    if op == "all_reduce":
        return 2.0 * (world - 1) / world
    if op == "broadcast":
        return 1.0
    return (world - 1) / world


def iterations(nbytes):
    return max(5, min(200, (64 << 20) // nbytes))


def make_op(name, count, rank, world):
    """(fill, call, wrong) for one op and size, with the C++ program's inputs and closed forms."""
    part = count // world
    idx = torch.arange(count, dtype=torch.int64)
    if name == "all_reduce":
        a = torch.empty(count)
        expected = (world * (world + 1) / 2 + world * (idx % 7)).float()
        return (lambda: a.copy_(rank + 1 + idx % 7),
                lambda: dist.all_reduce(a),
                lambda: int((a != expected).sum()))
    if name == "broadcast":
        a = torch.empty(count)
        expected = (1 + idx % 251).float()
        return (lambda: a.copy_(expected if rank == 0 else torch.full((count,), -1.0)),
                lambda: dist.broadcast(a, 0),
                lambda: int((a != expected).sum()))
    if name == "all_gather":
        a = torch.empty(part)
        outs = [torch.empty(part) for _ in range(world)]
        small = torch.arange(part, dtype=torch.int64) % 97
        return (lambda: a.copy_(rank * 1000 + small),
                lambda: dist.all_gather(outs, a),
                lambda: sum(int((outs[r] != (r * 1000 + small).float()).sum()) for r in range(world)))
    # reduce_scatter: all_reduce of the concatenated chunks, then this rank's slice
    small = torch.arange(part, dtype=torch.int64) % 5
    flat = torch.empty(count)
    out = torch.empty(part)

    def fill():
        for c in range(world):
            flat[c * part:(c + 1) * part].copy_((rank + 1) * (c + 1) + small)

    def call():
        dist.all_reduce(flat)
        out.copy_(flat[rank * part:(rank + 1) * part])

    expected = ((rank + 1) * world * (world + 1) / 2 + world * small).float()
    return fill, call, lambda: int((out != expected).sum())


def measure(name, nbytes, rank, world, fixed_iters):
    count = nbytes // 4
    iters = fixed_iters or iterations(nbytes)
    fill, call, wrong = make_op(name, count, rank, world)
    fill()
    for _ in range(max(1, iters // 10)):
        call()
    dist.barrier()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e6)
    mine = sorted(times)[iters // 2]  # the median call, as bench_collectives takes it
    slowest = torch.tensor([mine], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    time_us = float(slowest[0])
    fill()
    call()
    bad = torch.tensor([wrong()], dtype=torch.int64)
    dist.all_reduce(bad)
    algbw = nbytes / (time_us * 1e3)
    return dict(impl="torch", op=name, world=world, bytes=nbytes, count=count, iters=iters,
                time_us=time_us, algbw=algbw, busbw=algbw * bus_factor(name, world),
                wrong=int(bad[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--min-bytes", type=int, default=4)
    parser.add_argument("--max-mib", type=int, default=256)
    parser.add_argument("--iters", type=int, default=0,
                        help="timed calls per row; 0: by size, 5 to 200 (about 64 MiB moved)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    ops = args.ops.split(",")
    for op in ops:
        if op not in OPS:
            sys.exit(f"--ops: unknown op '{op}' ({', '.join(OPS)})")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def out0(line):
        if rank == 0:
            print(f"[rank 0/{world}] {line}", flush=True)

    out0(f"torch_collectives: {world} ranks, torch {torch.__version__} gloo, float32, "
         f"sizes {args.min_bytes} B to {args.max_mib} MiB")
    rows = []
    for op in ops:
        label = op + (" (all_reduce + slice: torch's gloo has no reduce_scatter)"
                      if op == "reduce_scatter" else "")
        out0("")
        out0(f"{label}  (busbw factor {bus_factor(op, world):g})")
        out0("        size       count   type  iters     time(us)  algbw(GB/s)  busbw(GB/s)  #wrong")
        nbytes = args.min_bytes if op in ("all_reduce", "broadcast") else max(args.min_bytes, 4 * world)
        while nbytes <= args.max_mib << 20:
            if op in ("all_reduce", "broadcast") or (nbytes // 4) % world == 0:
                r = measure(op, nbytes, rank, world, args.iters)
                rows.append(r)
                out0(f"{r['bytes']:12d} {r['count']:11d}  float {r['iters']:6d} {r['time_us']:12.2f} "
                     f"{r['algbw']:12.3f} {r['busbw']:12.3f}  {r['wrong']:6d}")
            nbytes *= 2
    if rank == 0 and args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        os.replace(tmp, args.json)
    dist.destroy_process_group()
    total = sum(r["wrong"] for r in rows)
    if total:
        out0(f"MISMATCH: {total} wrong elements (see #wrong)")
        sys.exit(1 if rank == 0 else 0)
    out0("OK: every result matched its closed form (#wrong = 0 in every row)")


if __name__ == "__main__":
    main()
