#!/usr/bin/env python3
"""bench_init on PyTorch: the time from $BENCH_T0_NS (set just before the launch) until every rank
has joined a gloo group, `import torch` included, as a PyTorch program pays it.

    BENCH_T0_NS=$(date +%s%N) ddprun --standalone --nproc-per-node 2 /usr/bin/python3 bench/torch_init.py
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    start = os.environ.get("BENCH_T0_NS")
    if not start:
        sys.exit("BENCH_T0_NS is not set: export BENCH_T0_NS=$(date +%s%N) first")
    dist.init_process_group("gloo")
    slowest = torch.tensor([(time.time_ns() - int(start)) / 1e6], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        print(f"[rank 0/{dist.get_world_size()}] init_ms: {float(slowest[0]):g}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
