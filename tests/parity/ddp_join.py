"""torch 1.13's Join([ddp]) with uneven inputs: the half of tests/parity/ddp_practice_parity.py
that runs torch (gloo, on the CPU, under a launcher).

    ddprun --standalone --nproc-per-node 3 tests/parity/ddp_join.py 7 4 2

Head a of practice_data (one Linear), plain SGD; rank r trains on the r-th count of batches
inside `with Join([ddp]):`. Prints each rank's final parameters as float32 bits.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

import practice_data as data
from ddp_unused import bits


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    counts = [int(c) for c in sys.argv[1:]]
    assert len(counts) == world, "one batch count per rank"
    model = torch.nn.Linear(data.IN, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor(data.initial("a.weight")).reshape(1, -1))
        model.bias.copy_(torch.tensor(data.initial("a.bias")))
    ddp = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=data.LR)
    with Join([ddp]):  # divide_by_initial_world_size=True, the default
        for step in range(counts[rank]):
            x, y = data.batch(step, rank)
            opt.zero_grad()
            out = ddp(torch.tensor(x).reshape(-1, data.IN))
            torch.nn.functional.mse_loss(out.reshape(-1), torch.tensor(y)).backward()
            opt.step()
    for name, p in (("a.weight", model.weight), ("a.bias", model.bias)):
        print(f"param {name} {rank} {bits(p)}", flush=True)
    dist.destroy_process_group()
    # os._exit, not return: torch 1.13 sometimes hangs freeing the DDP object as main() returns
    # (seen at 3 ranks after a Join, about 1 run in 10); the output is complete by then.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
