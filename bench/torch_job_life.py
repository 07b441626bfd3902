#!/usr/bin/env python3
"""The PyTorch side of bench/job_life.py: a whole 2-rank job that does what chapter 01 does at
its core. Each rank joins a gloo group, asks for its rank and the world size, prints them, and
leaves. job_life.py starts two of these with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set,
as torchrun would (Debian's torchrun cannot start on Python 3.11):

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 /usr/bin/python3 bench/torch_job_life.py &
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 /usr/bin/python3 bench/torch_job_life.py
"""
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    print(f"[rank {rank}/{world_size}] get_rank() = {rank}, get_world_size() = {world_size}",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
