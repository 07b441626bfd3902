"""When does torch's DistributedDataParallel copy rank 0's buffers? The closed form that
tests/multiprocess/ddp_test.cpp (BroadcastBuffersCopiesRankZerosBuffersBeforeTrainingForwardsAsTorchDoes)
asserts for dist::DistributedDataParallel::before_forward, asserted here of torch itself.

Run under a launcher on 2 ranks or more, gloo on the CPU:
    ddprun --standalone --nproc-per-node 2 tests/parity/ddp_buffers.py

Each rank's buffers drift to rank + step before every forward (what its own BatchNorm would do);
after a forward that copied, every rank holds rank 0's value, step. Exits 0 when every step
matches, 1 otherwise.
"""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class WithBuffers(torch.nn.Module):
    def __init__(self, rank):
        super().__init__()
        self.linear = torch.nn.Linear(1, 1)
        self.register_buffer("mean", torch.full((3,), 10.0 * rank))
        self.register_buffer("count", torch.full((1,), 5.0 * rank))

    def forward(self, x):
        return self.linear(x)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    module = WithBuffers(rank)
    x = torch.ones(2, 1)
    failures = []

    def holds(value, when):
        if not (torch.equal(module.mean, torch.full((3,), float(value))) and
                torch.equal(module.count, torch.full((1,), float(value)))):
            failures.append(f"{when}: mean {module.mean.tolist()}, count {module.count.tolist()}")

    def drift(step):
        module.mean.fill_(rank + step)
        module.count.fill_(rank + step)

    def train_forward():
        ddp(x).sum().backward()  # a training forward needs its backward before the next one

    ddp = DDP(module)  # broadcast_buffers=True, torch's default
    holds(0, "construction copies rank 0's")
    drift(1)
    train_forward()
    holds(1, "the first training forward copies")
    drift(2)
    with torch.no_grad():
        ddp(x)
    holds(2, "the first evaluation forward copies")
    drift(3)
    with torch.no_grad():
        ddp(x)
    holds(rank + 3, "a second evaluation forward does not")
    drift(4)
    train_forward()
    holds(rank + 4, "the training forward after evaluation does not")
    drift(5)
    with ddp.no_sync():
        train_forward()
        holds(5, "a no_sync forward after a training one copies")
        drift(6)
        train_forward()
        holds(rank + 6, "the next no_sync forward does not")
    off = DDP(WithBuffers(rank), broadcast_buffers=False)
    module = off.module
    holds(0, "construction copies rank 0's with broadcast_buffers=False too")
    drift(7)
    off(x).sum().backward()
    holds(rank + 7, "broadcast_buffers=False never copies after construction")

    for line in failures:
        print(f"[rank {rank}] MISMATCH: {line}")
    if not failures:
        print(f"[rank {rank}] OK: torch {torch.__version__} copies rank 0's buffers where the closed form says")
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
