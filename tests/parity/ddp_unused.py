"""torch 1.13's DistributedDataParallel with parameters that get no gradient: the half of
tests/parity/ddp_practice_parity.py that runs torch (gloo, on the CPU, under a launcher).

    ddprun --standalone --nproc-per-node 2 tests/parity/ddp_unused.py train
    ddprun --standalone --nproc-per-node 2 tests/parity/ddp_unused.py static
    ddprun --standalone --nproc-per-node 2 tests/parity/ddp_unused.py view
    ddprun --standalone --nproc-per-node 2 tests/parity/ddp_unused.py stale
    ddprun --standalone --nproc-per-node 2 tests/parity/ddp_unused.py error

train: three heads on one input, a (always), b (on rank r at step s when s + r is odd: one rank of
two uses it, so it is locally unused and globally used), c (on every rank at steps s % 3 == 0, so
globally unused at the other steps), trained with find_unused_parameters=True and plain SGD.
Prints each rank's final parameters as float32 bits, and for step 1 the grads that torch leaves:
`grad <name> <rank> <none|bits...>`.

static: heads a and b at every step, c never, with static_graph=True instead.

view: as train, with gradient_as_bucket_view=True.

stale: one step without zero_grad(), every grad holding 100 + rank (c.bias's None): a rank that
did not use head b adds the grad b holds; c, used by no rank, keeps its grads (None stays None).

error: head b is never used and find_unused_parameters is False; the second forward raises
torch's error, which each rank prints between `ERROR-BEGIN` and `ERROR-END` (run it with
TORCH_DISTRIBUTED_DEBUG=OFF, INFO or DETAIL to see the variants).
"""
import os
import struct
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import practice_data as data


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(data.IN, 1)
        self.b = torch.nn.Linear(data.IN, 1)
        self.c = torch.nn.Linear(data.IN, 1)
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(torch.tensor(data.initial(name)).reshape(p.shape))

    def forward(self, x, heads):
        out = self.a(x)
        if "b" in heads:
            out = out + self.b(x)
        if "c" in heads:
            out = out + self.c(x)
        return out


def bits(t):
    return " ".join(f"{struct.unpack('<I', struct.pack('<f', v))[0]:08x}"
                    for v in t.detach().reshape(-1).tolist())


def train(rank, how):
    model = Heads()
    static = how == "static"
    # static: heads a and b at every step, c never, with static_graph (which finds c unused at
    # the first step) instead of find_unused_parameters. view: gradient_as_bucket_view too.
    ddp = DDP(model, static_graph=True) if static else DDP(
        model, find_unused_parameters=True, gradient_as_bucket_view=how == "view")
    opt = torch.optim.SGD(model.parameters(), lr=data.LR)
    for step in range(data.STEPS):
        x, y = data.batch(step, rank)
        opt.zero_grad()  # torch 1.13: set_to_none=False, zeros stay
        out = ddp(torch.tensor(x).reshape(-1, data.IN), "ab" if static else data.heads(step, rank))
        torch.nn.functional.mse_loss(out.reshape(-1), torch.tensor(y)).backward()
        if step == 1:
            for name, p in model.named_parameters():
                print(f"grad {name} {rank} {'none' if p.grad is None else bits(p.grad)}",
                      flush=True)
        opt.step()
    for name, p in model.named_parameters():
        print(f"param {name} {rank} {bits(p)}", flush=True)


def stale(rank):
    """One step in which rank 1 uses heads a and b, the others a only, with every .grad holding
    100 + rank beforehand (no zero_grad), except c.bias's, None: what does each rank's grad
    hold after backward?"""
    model = Heads()
    ddp = DDP(model, find_unused_parameters=True)
    for name, p in model.named_parameters():
        p.grad = None if name == "c.bias" else torch.full_like(p, 100.0 + rank)
    x, y = data.batch(0, rank)
    out = ddp(torch.tensor(x).reshape(-1, data.IN), "ab" if rank == 1 else "a")
    torch.nn.functional.mse_loss(out.reshape(-1), torch.tensor(y)).backward()
    for name, p in model.named_parameters():
        print(f"grad {name} {rank} {'none' if p.grad is None else bits(p.grad)}", flush=True)


def error(rank):
    model = Heads()
    ddp = DDP(model)  # find_unused_parameters=False: head b never gets a gradient
    x, y = data.batch(0, rank)
    for _ in range(2):
        try:
            out = ddp(torch.tensor(x).reshape(-1, data.IN), "a")
        except RuntimeError as e:
            print(f"ERROR-BEGIN\n{e}\nERROR-END", flush=True)
            return
        torch.nn.functional.mse_loss(out.reshape(-1), torch.tensor(y)).backward()
    print("no error", flush=True)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if sys.argv[1] in ("train", "static", "view"):
        train(rank, sys.argv[1])
    elif sys.argv[1] == "stale":
        stale(rank)
    else:
        error(rank)
    dist.destroy_process_group()
    # os._exit, not return: torch 1.13 sometimes hangs freeing the DDP object as main() returns
    # (seen at 3 ranks after a Join, about 1 run in 10); the output is complete by then.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
