"""Chapter 15's twin: tensor parallelism and a 2-D mesh in PyTorch 1.13 on Gloo.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 4 twin.py
It takes ch15_tensor_parallel's flags and prints the same lines. The data and the initial
weights are closed forms (the same bits as in support.cpp).

torch 1.13 has neither tensor parallelism nor a DeviceMesh, so the twin builds both by hand:
  step 1  the mesh's groups with dist.new_group(ranks): every rank makes every row ("tp") and
          every column ("dp") group, in the same order, and keeps its own, as torch 2.x's
          init_device_mesh does; then a group of the even ranks.
  step 2  f and g as torch.autograd.Function subclasses calling dist.all_reduce on the tp group;
          the column layer keeps its rows of fc1, the row layer its columns of fc2, both cut from
          the one-process model's weights. The row layer adds its bias after g (Megatron's order;
          the library adds it on the group's rank 0 before: the same sum, rounded in another
          order). torch counts no bytes sent and, on the CPU, no memory allocated: those lines
          are the twin's own (the call counts come from f and g) and the parity test skips them.
  step 3  sequence parallel: f becomes all_gather forward / reduce_scatter backward, g
          reduce_scatter forward / all_gather backward. torch 1.13's Gloo has no reduce_scatter,
          so the twin all_reduces and keeps its rows: the same sums (Gloo's own order).
  step 4  DP x TP: the block on the tp group, gradients all_reduced over the dp group and
          divided by its size (what DDP does), checked bit for bit against the same DP x TP by
          hand (SameOrderDpTp); one process training nn.Linear's unsplit is printed beside it.
torch 2.x spells it init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp")) and
parallelize_module(mlp, mesh["tp"], {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
(torch.distributed.tensor.parallel; SequenceParallel for the layers around the block).
"""
import argparse
import os
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

IN, OUT = 8, 4


def out(text):
    # One write per line: the ranks share one pipe.
    sys.stdout.write(f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n")
    sys.stdout.flush()


def out0(text):
    if int(os.environ["RANK"]) == 0:
        out(text)


def batch(first, size):
    """support.cpp's closed-form regression: x from a hash of (i, j), y = x t^T / 4."""
    xs, ys = [], []
    for i in range(first, first + size):
        row = [((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0 for j in range(IN)]
        xs.append(row)
        ys.append([sum(float((3 * k + 5 * j) % 7 - 3) * row[j] for j in range(IN)) / 4.0
                   for k in range(OUT)])
    return torch.tensor(xs, dtype=torch.float32), torch.tensor(ys, dtype=torch.float32)


def values(rows, cols, a, b, m, div):
    return torch.tensor([[((a * r + b * c) % m - m // 2) / div for c in range(cols)]
                         for r in range(rows)], dtype=torch.float32)


def one_process_model(hidden):
    fc1, fc2 = torch.nn.Linear(IN, hidden), torch.nn.Linear(hidden, OUT)
    with torch.no_grad():
        fc1.weight.copy_(values(hidden, IN, 31, 17, 23, 20.0))
        fc1.bias.copy_(values(1, hidden, 0, 5, 11, 50.0)[0])
        fc2.weight.copy_(values(OUT, hidden, 13, 7, 19, 20.0))
        fc2.bias.copy_(values(1, OUT, 0, 3, 7, 50.0)[0])
    return fc1, fc2


CALLS = []  # the collectives f and g made, by name


def all_reduce(t, group):
    CALLS.append("all_reduce")
    dist.all_reduce(t, group=group)
    return t


def all_gather_rows(local, group):
    CALLS.append("all_gather_into_tensor")
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, local.contiguous(), group=group)
    return torch.cat(parts)


def reduce_scatter_rows(whole, group):
    CALLS.append("reduce_scatter_tensor")
    summed = whole.clone()
    dist.all_reduce(summed, group=group)  # 1.13's Gloo has no reduce_scatter
    n = whole.shape[0] // dist.get_world_size(group)
    r = dist.get_rank(group)
    return summed[r * n:(r + 1) * n].clone()


class CopyToTensorParallelRegion(torch.autograd.Function):  # f
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return all_reduce(grad.clone(), ctx.group), None


class ReduceFromTensorParallelRegion(torch.autograd.Function):  # g
    @staticmethod
    def forward(ctx, partial, group):
        return all_reduce(partial.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherFromSequenceParallelRegion(torch.autograd.Function):  # f, sequence parallel
    @staticmethod
    def forward(ctx, local, group):
        ctx.group = group
        return all_gather_rows(local, group)

    @staticmethod
    def backward(ctx, grad):
        return reduce_scatter_rows(grad, ctx.group), None


class ReduceScatterToSequenceParallelRegion(torch.autograd.Function):  # g, sequence parallel
    @staticmethod
    def forward(ctx, partial, group):
        ctx.group = group
        return reduce_scatter_rows(partial, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_rows(grad, ctx.group), None


class ParallelMLP(torch.nn.Module):
    """Column-parallel fc1, ReLU, row-parallel fc2: this tp rank's slices of the two layers."""

    def __init__(self, fc1, fc2, group, sequence_parallel):
        super().__init__()
        t, size = dist.get_rank(group), dist.get_world_size(group)
        h = fc1.out_features // size
        self.group, self.sp = group, sequence_parallel
        self.w1 = torch.nn.Parameter(fc1.weight.detach()[t * h:(t + 1) * h].clone())
        self.b1 = torch.nn.Parameter(fc1.bias.detach()[t * h:(t + 1) * h].clone())
        self.w2 = torch.nn.Parameter(fc2.weight.detach()[:, t * h:(t + 1) * h].clone())
        self.b2 = torch.nn.Parameter(fc2.bias.detach().clone())

    def forward(self, x):
        f = GatherFromSequenceParallelRegion if self.sp else CopyToTensorParallelRegion
        g = ReduceScatterToSequenceParallelRegion if self.sp else ReduceFromTensorParallelRegion
        a = torch.relu(F.linear(f.apply(x, self.group), self.w1, self.b1))
        return g.apply(F.linear(a, self.w2), self.group) + self.b2


class SameOrderDpTp:
    """Step 4's check: the same DP x TP by hand, every cross-rank sum the same collective on the
    same group with the same inputs, so its bits must be the model's (the program's
    SameOrderDpTp). Every rank keeps the whole model; each step cuts ParallelMLP's slices from it,
    runs them without the autograd Functions, averages the slices' gradients over "dp", steps the
    slices with SGD (the model's shapes: the same kernels) and all_gathers them back over "tp"."""

    def __init__(self, hidden, tp_group, dp_group, sequence_parallel, lr):
        fc1, fc2 = one_process_model(hidden)
        self.whole = [fc1.weight.detach().clone(), fc1.bias.detach().clone(),
                      fc2.weight.detach().clone(), fc2.bias.detach().clone()]
        self.tp, self.dp, self.sp, self.lr = tp_group, dp_group, sequence_parallel, lr

    def slices(self):
        t, size = dist.get_rank(self.tp), dist.get_world_size(self.tp)
        h = self.whole[0].shape[0] // size
        w1, b1, w2, b2 = self.whole
        return [w1[t * h:(t + 1) * h].clone(), b1[t * h:(t + 1) * h].clone(),
                w2[:, t * h:(t + 1) * h].clone(), b2.clone()]

    def step(self, xm, ym):
        w1, b1, w2, b2 = params = [q.requires_grad_(True) for q in self.slices()]
        x = all_gather_rows(rows_of(xm, self.tp), self.tp) if self.sp else xm
        partial = F.linear(torch.relu(F.linear(x, w1, b1)), w2)
        if self.sp:
            summed = reduce_scatter_rows(partial.detach(), self.tp).requires_grad_(True)
            o = summed + b2
            whole = all_gather_rows(o.detach(), self.tp).requires_grad_(True)
            loss = F.mse_loss(whole, ym)
            loss.backward()
            o.backward(rows_of(whole.grad, self.tp))
            partial.backward(all_gather_rows(summed.grad, self.tp))
            dist.all_reduce(b2.grad, group=self.tp)
        else:
            summed = partial.detach().clone()
            dist.all_reduce(summed, group=self.tp)
            o = summed.requires_grad_(True) + b2
            loss = F.mse_loss(o, ym)
            loss.backward()
            partial.backward(summed.grad)
        for q in params:
            dist.all_reduce(q.grad, group=self.dp)
            q.grad /= dist.get_world_size(self.dp)
        torch.optim.SGD(params, lr=self.lr).step()
        for k, q in enumerate(params[:3]):
            parts = [torch.empty_like(q) for _ in range(dist.get_world_size(self.tp))]
            dist.all_gather(parts, q.detach().contiguous(), group=self.tp)
            self.whole[k] = torch.cat(parts, dim=1 if k == 2 else 0)
        self.whole[3] = b2.detach().clone()
        return loss.item()

    def same_bits(self, model_params):
        bits = lambda q: q.detach().contiguous().view(torch.int32)
        return all(torch.equal(bits(a), bits(b)) for a, b in zip(model_params, self.slices()))


def rows_of(t, group):
    n = t.shape[0] // dist.get_world_size(group)
    r = dist.get_rank(group)
    return t[r * n:(r + 1) * n].clone()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dp", type=int, default=0)
    p.add_argument("--tp", type=int, default=0)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--throughput", action="store_true",
                   help="also print step 4's DP x TP training steps' samples per second: each "
                        "step from a barrier, the first (a warm-up), one process's steps and "
                        "the loss print left out (for bench/run.py)")
    args = p.parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tp_size = args.tp or (2 if world % 2 == 0 else 1)
    dp_size = args.dp or max(1, world // tp_size)

    # Step 1: the mesh's groups by new_group, row-major as torch.arange(world).view(dp, tp)
    grid = torch.arange(world).view(dp_size, tp_size).tolist()
    tp_group = dp_group = None
    for row in grid:  # every rank makes every group, in the same order
        group = dist.new_group(row)
        if rank in row:
            tp_group, tp_ranks = group, row
    for j in range(tp_size):
        column = [grid[i][j] for i in range(dp_size)]
        group = dist.new_group(column)
        if rank in column:
            dp_group, dp_ranks = group, column
    d, t = rank // tp_size, rank % tp_size
    out0(f"mesh {grid} (dp, tp): a row is a \"tp\" group, a column a \"dp\" group")
    out(f"coordinate (dp {d}, tp {t}): tp group {tp_ranks}, dp group {dp_ranks}")
    evens = list(range(0, world, 2))
    even = dist.new_group(evens)
    if rank in evens:
        s = torch.tensor([rank])
        dist.all_reduce(s, group=even)
        k = len(evens)
        out0(f"new_group({evens}): all_reduce of the global ranks {s.item()} "
             f"(closed form k(k - 1) = {k * (k - 1)})")

    # Step 2: one MLP block split across the tp group
    n = args.batch_size // dp_size
    x, y = batch(d * n, n)
    fc1, fc2 = one_process_model(args.hidden)
    one_out = fc2(torch.relu(fc1(x)))
    mlp = ParallelMLP(fc1, fc2, tp_group, False)
    CALLS.clear()
    o = mlp(x.clone().requires_grad_(True))  # d loss / d x wanted: f's backward runs
    forward_calls = list(CALLS)
    CALLS.clear()
    F.mse_loss(o, y).backward()
    backward_calls = list(CALLS)
    diff = (o - one_out).abs().max().item()
    out0(f"block {IN}-{args.hidden}-{OUT} on {tp_size} ranks ({args.hidden // tp_size} hidden "
         f"features each), {n} rows: largest difference from one process's output {diff:.1e}")
    out0(f"forward: {' + '.join(forward_calls)}; backward: {' + '.join(backward_calls)} "
         f"(torch counts no bytes sent)")

    # Step 3: sequence parallel
    if args.sequence_parallel:
        sp = ParallelMLP(fc1, fc2, tp_group, True)
        CALLS.clear()
        o = sp(rows_of(x, tp_group).requires_grad_(True))
        forward_calls = list(CALLS)
        CALLS.clear()
        o.backward(rows_of(torch.ones(n, OUT), tp_group))
        out0(f"sequence parallel, forward: {' + '.join(forward_calls)}; backward: "
             f"{' + '.join(CALLS)} (torch counts no bytes sent, nor CPU memory)")

    # Step 4: 2-D: DP x TP training beside one process
    out0(f"training {dp_size} x {tp_size} (dp x tp)"
         f"{', sequence parallel' if args.sequence_parallel else ''}: SGD (lr {args.lr:g}), "
         f"{args.steps} steps of {args.batch_size} rows")
    one1, one2 = one_process_model(args.hidden)
    model = ParallelMLP(one1, one2, tp_group, args.sequence_parallel)
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr)
    one_sgd = torch.optim.SGD(list(one1.parameters()) + list(one2.parameters()), lr=args.lr)
    reference = SameOrderDpTp(args.hidden, tp_group, dp_group, args.sequence_parallel, args.lr)
    worst, timed, same = 0.0, 0.0, True  # timed: the DP x TP steps alone (--throughput)
    for step in range(args.steps):
        first = step * args.batch_size
        xa, ya = batch(first, args.batch_size)
        one_sgd.zero_grad()
        one = F.mse_loss(one2(torch.relu(one1(xa))), ya)
        one.backward()
        one_sgd.step()
        xm, ym = batch(first + d * n, n)
        if args.throughput:
            dist.barrier()  # the ranks' clocks start together
        start = time.perf_counter()
        sgd.zero_grad()
        if args.sequence_parallel:
            o = model(rows_of(xm, tp_group))
            whole = all_gather_rows(o.detach(), tp_group).requires_grad_(True)
            loss = F.mse_loss(whole, ym)
            loss.backward()
            o.backward(rows_of(whole.grad, tp_group))
            # b2 is added after g, to this rank's rows only: its gradient is a partial sum over
            # the tp group (Megatron all_reduces its sequence-parallel parameters' gradients)
            dist.all_reduce(model.b2.grad, group=tp_group)
        else:
            loss = F.mse_loss(model(xm), ym)
            loss.backward()
        for q in model.parameters():  # what DDP does, over the dp group
            dist.all_reduce(q.grad, group=dp_group)
            q.grad /= dp_size
        sgd.step()
        if step > 0 or args.steps == 1:  # step 0: a warm-up
            timed += time.perf_counter() - start
        ref_loss = reference.step(xm, ym)  # its bits: NaN too, once lr 1 diverges
        same = struct.pack("d", ref_loss) == struct.pack("d", loss.item()) and reference.same_bits(
            list(model.parameters())) and same
        mean = torch.tensor([loss.item() / dp_size], dtype=torch.float64)
        dist.all_reduce(mean, group=dp_group)
        worst = max(worst, abs(mean.item() - one.item()) / one.item())
        out0(f"step {step + 1}: loss {mean.item():.6f}, one process {one.item():.6f}")
    if args.throughput:  # every rank's steps over the slowest rank's seconds
        slowest = torch.tensor([timed], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        samples = max(args.steps - 1, 1) * args.batch_size
        out0(f"throughput: {samples / slowest.item():.0f} samples/s "
             f"({samples} samples in {slowest.item():.3f} s)")
    # One process sums in another order, which a long run at a large lr magnifies: information.
    out0(f"largest difference from one process: {worst:.1e} of the loss")
    out0("the same DP x TP by hand (the same collectives, the whole model on every rank): loss "
         f"and parameters bit for bit at every step: {'yes' if same else 'NO'} (rank 0's)")
    ok = torch.tensor([0 if same else 1])
    dist.all_reduce(ok)  # every rank's
    if ok.item() != 0:
        out0("MISMATCH: the training is not the same DP x TP by hand's")
        leave(1 if rank == 0 else 0)
    out0("OK: the groups, the block's output, calls and bytes, and the loss curve agree")
    leave(0)


def leave(code):
    """Ends without tearing the groups down (torch 1.13's teardown can hang; chapter 09's twin)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
