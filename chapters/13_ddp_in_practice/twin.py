"""Chapter 13's twin: DDP in practice in PyTorch 1.13 on Gloo.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py
It takes ch13_ddp_in_practice's flags and prints the same lines. The data and the initial
weights are closed forms (the same bits as in support.cpp).

  step 1  DistributedDataParallel without find_unused_parameters: the forward after a step that
          left head b out raises torch's RuntimeError, whose first sentence is printed; then
          find_unused_parameters=True, checked against a single-process replay.
  step 2  torch.distributed.algorithms.join.Join([ddp]) with rank r's batches; torch reports no
          count of shadowed steps, so the twin prints the one its counts imply.
  step 3  register_comm_hook with allreduce_hook, fp16_compress_hook and powerSGD_hook
          (PowerSGDState(start_powerSGD_iter=2)). torch 1.13's bf16_compress_hook refuses to run
          without CUDA 11 and NCCL 2.10, and Gloo reduces no bfloat16, so its line comes from a
          replay of the hook: the bucket cast to bfloat16 and divided by W, all-gathered, summed
          in bfloat16 in rank order, cast back. torch counts no bytes sent: the twin prints the
          closed forms only (the parity test ignores those lines, and the OK line).
  step 4  torch 1.13 measures no CPU memory: the twin prints the closed form only (ignored too).
torch sums a batch's gradient in float32, the library in float64: the losses agree within a
relative 1e-5, not bit for bit, and the replays within the same tolerance on both sides.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

IN, OUT = 16, 8


def out0(text):
    if int(os.environ["RANK"]) == 0:
        out(text)


def out(text):
    # One write per line, so that the ranks' lines never interleave.
    sys.stdout.write(f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n")
    sys.stdout.flush()


def weights(rows, cols, a, b, m):
    return torch.tensor([[((a * r + b * c) % m - m // 2) / 16 for c in range(cols)]
                         for r in range(rows)], dtype=torch.float32)


class Net(nn.Module):
    """support.cpp's Net: trunk Linear(16, hidden) + ReLU, heads a and b Linear(hidden, 8)."""

    def __init__(self, hidden):
        super().__init__()
        self.trunk, self.a, self.b = nn.Linear(IN, hidden), nn.Linear(hidden, OUT), \
            nn.Linear(hidden, OUT)
        with torch.no_grad():
            self.trunk.weight.copy_(weights(hidden, IN, 5, 3, 9))
            self.trunk.bias.zero_()
            self.a.weight.copy_(weights(OUT, hidden, 3, 7, 5))
            self.a.bias.fill_(0.0625)
            self.b.weight.copy_(weights(OUT, hidden, 7, 2, 7))
            self.b.bias.fill_(-0.125)

    def forward(self, x, branch):
        h = F.relu(self.trunk(x))
        return self.a(h) + self.b(h) if branch else self.a(h)


def batch(step, rank, size):
    x = torch.tensor([[((step * 7 + rank * 5 + i * 3 + j * 2) % 11 - 5) / 8 for j in range(IN)]
                      for i in range(size)], dtype=torch.float32)
    y = torch.tensor([[((step + rank * 3 + i + o) % 5 - 2) / 4 for o in range(OUT)]
                      for i in range(size)], dtype=torch.float32)
    return x, y


def takes_branch(step, rank):
    return (step + rank) % 2 == 1


def values(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def replay(args, world, steps, trains, branch):
    """support.cpp's replay: every rank's gradient / W (zeros from a rank not training), summed
    in rank order, one SGD step."""
    net = Net(args.hidden)
    sgd = torch.optim.SGD(net.parameters(), lr=args.lr)
    for step in range(steps):
        total = [torch.zeros_like(p) for p in net.parameters()]
        for rank in range(world):
            if not trains(step, rank):
                continue
            sgd.zero_grad()
            x, y = batch(step, rank, args.batch_size)
            F.mse_loss(net(x, branch(step, rank)), y).backward()
            for t, p in zip(total, net.parameters()):
                t += (p.grad if p.grad is not None else torch.zeros_like(p)) / world
        for t, p in zip(total, net.parameters()):
            p.grad = t
        sgd.step()
    return values(net)


def close(a, b):
    """Within a relative 1e-5, or 1e-9 near 0 (where a sum's cancellation leaves little), as the
    program's largest_difference counts."""
    return bool(torch.all((a - b).abs() <= torch.maximum(1e-5 * a.abs(), torch.tensor(1e-9))))


def same_on_every_rank(v):
    zero = v.clone()
    dist.broadcast(zero, 0)
    ok = torch.tensor([1 if torch.equal(zero, v) else 0])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return bool(ok.item())


def bf16_replay_hook(state, bucket):
    """torch 1.13's bf16_compress_hook, with the all_reduce replayed on Gloo."""
    world = dist.get_world_size()
    compressed = bucket.buffer().to(torch.bfloat16).div_(world)
    parts = [torch.empty(compressed.numel()) for _ in range(world)]
    dist.all_gather(parts, compressed.float())
    total = parts[0].bfloat16()
    for part in parts[1:]:
        total = total + part.bfloat16()
    bucket.buffer().copy_(total.float())
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def train_with(args, name, r):
    rank, world = dist.get_rank(), dist.get_world_size()
    net = Net(args.hidden)
    ddp = DDP(net)
    if name == "allreduce_hook":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif name == "fp16_compress_hook":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif name == "bf16_compress_hook":
        ddp.register_comm_hook(None, bf16_replay_hook)
    elif r > 0:
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=r,
                                            start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    sgd = torch.optim.SGD(net.parameters(), lr=args.lr)
    loss_mean = 0.0
    for step in range(args.steps):
        sgd.zero_grad()
        x, y = batch(step, rank, args.batch_size)
        loss = F.mse_loss(ddp(x, True), y)
        loss.backward()
        sgd.step()
        mean = torch.tensor([loss.item() / world], dtype=torch.float64)
        dist.all_reduce(mean)
        loss_mean = mean.item()
    psi = sum(p.numel() for p in net.parameters())
    if r > 0:
        sent = 0
        for p in net.parameters():
            n, m = p.shape[0], p.numel() // p.shape[0]
            sent += (n + m) * r if p.dim() > 1 and (n + m) * r * 2 < n * m else n * m
    else:
        sent = psi
    per_value = 2 if name in ("fp16_compress_hook", "bf16_compress_hook") else 4
    return loss_mean, per_value * sent * (world - 1), psi


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--fewer", type=int, default=2)
    p.add_argument("--max-rank", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.1)
    args = p.parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    # Step 1: a branch taken on some steps; the parameters it leaves without a gradient
    net = Net(args.hidden)
    ddp = DDP(net)  # find_unused_parameters=False
    sgd = torch.optim.SGD(net.parameters(), lr=args.lr)
    error = ""
    try:
        for step in range(2):  # step 0 leaves the branch out on every rank
            sgd.zero_grad()
            x, y = batch(step, rank, args.batch_size)
            F.mse_loss(ddp(x, step == 1), y).backward()
            sgd.step()
    except RuntimeError as e:  # raised by step 1's forward
        error = str(e)
    start = error.find("Expected")
    sentence = "" if start < 0 else error[start:error.find(". ", start) + 1]
    out0(f"without find_unused_parameters, step 2 fails: {sentence}")
    net = Net(args.hidden)
    ddp = DDP(net, find_unused_parameters=True)
    sgd = torch.optim.SGD(net.parameters(), lr=args.lr)
    for step in range(args.steps):
        sgd.zero_grad()
        x, y = batch(step, rank, args.batch_size)
        F.mse_loss(ddp(x, takes_branch(step, rank)), y).backward()
        sgd.step()
    trained = values(net)
    want = replay(args, world, args.steps, lambda s, r: True, takes_branch)
    unused_ok = same_on_every_rank(trained) and close(want, trained) and bool(sentence)
    out0(f"with find_unused_parameters=True: {args.steps} steps, the branch on odd step + rank; "
         f"every rank holds the replay's weights: {'yes' if unused_ok else 'NO'}")

    # Step 2: uneven inputs; Join shadows the all_reduces of a rank out of batches
    def batches_of(r):
        return max(1, args.batches - args.fewer * r)

    net = Net(args.hidden)
    ddp = DDP(net)
    sgd = torch.optim.SGD(net.parameters(), lr=args.lr)
    with Join([ddp]):
        for step in range(batches_of(rank)):
            sgd.zero_grad()
            x, y = batch(step, rank, args.batch_size)
            F.mse_loss(ddp(x, True), y).backward()
            sgd.step()
    longest = max(batches_of(r) for r in range(world))
    out(f"trained {batches_of(rank)} batches, then shadowed {longest - batches_of(rank)} steps "
        f"with zeros")
    joined = values(net)
    want = replay(args, world, batches_of(0), lambda s, r: s < batches_of(r), lambda s, r: True)
    join_ok = same_on_every_rank(joined) and close(want, joined)
    out0(f"Join: every rank holds the same weights, the replay's (a joined rank adds zeros, the "
         f"mean still divides by {world}): {'yes' if join_ok else 'NO'}")

    # Step 3: communication hooks: what each sends, and what it costs
    runs = [(name, *train_with(args, name, 0)) for name in
            ("no hook", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook")]
    runs += [(f"powerSGD_hook rank {r}", *train_with(args, "powerSGD_hook", r))
             for r in range(1, args.max_rank + 1)]
    for name, _, closed_form, _ in runs:
        out0(f"{name}: torch counts no bytes a step (closed form {closed_form:,})")
    out0(f"loss at step {args.steps}: " + ", ".join(f"{name} {loss:.6f}"
                                                   for name, loss, _, _ in runs))

    # Step 4: gradient_as_bucket_view
    psi = runs[0][3]
    out0(f"memory DDP adds: torch 1.13 measures no CPU memory (closed form: 4 bytes less per "
         f"value with gradient_as_bucket_view, {4 * psi:,} for Ψ = {psi:,})")

    dist.barrier()
    if not (unused_ok and join_ok):
        out0("MISMATCH: a replay differs")
        leave(1 if rank == 0 else 0)
    out0("OK: the replays hold (torch counts no bytes and no CPU memory: those are the program's)")
    leave(0)


def leave(code):
    """Ends without tearing DDP down (torch 1.13's teardown can deadlock; chapter 09's twin)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
