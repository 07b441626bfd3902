"""Chapter 16's twin: pipeline parallel in PyTorch 1.13 on Gloo, GPipe and 1F1B written out.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 4 twin.py
It takes ch16_pipeline_parallel's flags and prints the same lines. The data are closed forms and
the initial weights torch.randn from one generator (the same bits as the library's).

torch 1.13 has no pipeline across processes: its torch.distributed.pipeline.sync.Pipe runs GPipe
inside one process over several GPUs. So each rank builds its stage as an nn.Sequential of
nn.Linear and nn.ReLU, and the schedules are written out: micro-batches go forward with
dist.isend / dist.irecv (Gloo has them in 1.13), their gradients come back the same way, and
autograd keeps each micro-batch's graph until its backward (the stash). torch 2.4's
torch.distributed.pipelining has all of it (PipelineStage, ScheduleGPipe, Schedule1F1B).

With --dp N the ranks are N replicas of a pipeline of world/N stages, as the library's
{"dp": N, "pp": world/N} mesh lays them out (torch 2.x: init_device_mesh("cpu", (N, world // N),
mesh_dim_names=("dp", "pp"))); torch 1.13 has no DeviceMesh, so every rank makes every row ("pp")
and column ("dp") group with dist.new_group, in the same order. Each replica takes its B/N rows,
and after each backward every stage all_reduces its gradients over its "dp" group and divides by
N, as DDP does.

Each rank also trains the unsplit model alone on the same micro-batches and compares its own
layers' weights with torch.equal: bit for bit, in torch's arithmetic. With --dp N that process
runs its replica's micro-batches and averages every grad over its "dp" group as the stages do. The losses are torch's;
they agree with the library's to float32 rounding (the parity test's tolerance).
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

FEATURES, OUTPUTS, SEED = 16, 4, 16


def out(text):
    # One write per line, so that the ranks' lines, sharing one pipe, do not interleave.
    sys.stdout.write(f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n")
    sys.stdout.flush()


def out0(text):
    if int(os.environ["RANK"]) == 0:
        out(text)


def feature(i, j):
    return ((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0


def inputs(first, rows):
    x = [feature(i, j) for i in range(first, first + rows) for j in range(FEATURES)]
    return torch.tensor(x, dtype=torch.float32).reshape(rows, FEATURES)


def targets(first, rows):
    """A linear teacher: y_ik = sum_j x_ij t_kj / 16, summed in float64 from the float32 x."""
    x = inputs(first, rows).tolist()
    y = [sum(x[r][j] * float((3 * k + 5 * j) % 7 - 3) for j in range(FEATURES)) / 16.0
         for r in range(rows) for k in range(OUTPUTS)]
    return torch.tensor(y, dtype=torch.float32).reshape(rows, OUTPUTS)


def model_layers(layers, hidden):
    """[(kind, in, out)]: Linear(16, hidden), ReLU, ..., Linear(hidden, 4)."""
    widths = [FEATURES] + [hidden] * (layers - 1) + [OUTPUTS]
    spec = []
    for i in range(len(widths) - 1):
        spec.append(("Linear", widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            spec.append(("ReLU", 0, 0))
    return spec


def build(spec, begin, end):
    """nn.Sequential of spec[begin:end], weights drawn as the library draws them: one generator
    for the whole model, randn(out, in) then randn(out) per Linear, times 2^-k, k =
    floor(log2(in)) // 2, every stage drawing all of them and keeping its own."""
    g = torch.Generator().manual_seed(SEED)
    modules = []
    for i, (kind, fan_in, fan_out) in enumerate(spec):
        if kind == "ReLU":
            if begin <= i < end:
                modules.append(nn.ReLU())
            continue
        scale = 2.0 ** -((fan_in.bit_length() - 1) // 2)
        w = torch.randn(fan_out, fan_in, generator=g) * scale
        b = torch.randn(fan_out, generator=g) * scale
        if begin <= i < end:
            layer = nn.Linear(fan_in, fan_out)
            with torch.no_grad():
                layer.weight.copy_(w)
                layer.bias.copy_(b)
            modules.append(layer)
    return nn.Sequential(*modules)


def split_stages(spec, p):
    """The library's cut: units are a Linear and the layers after it up to the next; the first
    L mod p stages get ceil(L/p) units, the others floor(L/p)."""
    starts = [i for i, (kind, _, _) in enumerate(spec) if kind == "Linear"]
    units = len(starts)
    if p > units:
        raise SystemExit(f"{p} stages for a model of {units} Linear layers")
    cut, unit = [], 0
    for s in range(p):
        n = units // p + (1 if s < units % p else 0)
        begin = starts[unit]
        unit += n
        cut.append((begin, starts[unit] if unit < units else len(spec)))
    return cut


def describe(spec, begin, end):
    return ", ".join("ReLU" if kind == "ReLU" else f"Linear({a}, {b})"
                     for kind, a, b in spec[begin:end])


def order(kind, p, s, m):
    """GPipe: every forward, then every backward. 1F1B: min(p - s - 1, m) forwards, then one
    forward and one backward in turn, then the backwards left."""
    if kind == "GPipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(p - s - 1, m)
    steps = [("F", i) for i in range(warmup)]
    f, b = warmup, 0
    while f < m:
        steps += [("F", f), ("B", b)]
        f, b = f + 1, b + 1
    return steps + [("B", i) for i in range(b, m)]


def stash_bytes(stage, rows, last):
    """What a micro-batch's backward needs on this stage: each layer's input (nn.Linear keeps it;
    nn.ReLU keeps its output, the same size), and on the last stage the loss's gradient."""
    size = sum(layer.in_features if isinstance(layer, nn.Linear) else 0 for layer in stage)
    width = 0
    for layer in stage:
        if isinstance(layer, nn.Linear):
            width = layer.out_features
        else:
            size += width
    return 4 * rows * (size + (width if last else 0))


class Stage:
    """One rank's stage and one schedule's step: sends and receives around each F and B."""

    def __init__(self, module, pp, s, m, rows, in_width, out_width):
        # pp: (the replica's group, its global ranks); isend/irecv take global ranks in 1.13.
        self.group, self.ranks = pp
        self.module, self.p, self.s, self.m, self.rows = module, len(self.ranks), s, m, rows
        self.in_width, self.out_width = in_width, out_width
        self.peak = 0
        self.spans = []

    def step(self, kind, x, y, t0):
        stash, sends, losses = {}, [], []
        self.spans = []
        for action, i in order(kind, self.p, self.s, self.m):
            start = time.perf_counter() - t0
            if action == "F":
                if self.s == 0:
                    h = x[i * self.rows:(i + 1) * self.rows]
                else:
                    h = torch.empty(self.rows, self.in_width)
                    dist.irecv(h, self.ranks[self.s - 1], self.group, tag=2 * i).wait()
                    h.requires_grad_()
                    start = time.perf_counter() - t0
                o = self.module(h)
                if self.s == self.p - 1:
                    o = F.mse_loss(o, y[i * self.rows:(i + 1) * self.rows])
                    losses.append(o.item())
                else:
                    sends.append(dist.isend(o.detach(), self.ranks[self.s + 1], self.group,
                                            tag=2 * i))
                stash[i] = (h, o)
                self.peak = max(self.peak, len(stash))
            else:
                h, o = stash.pop(i)
                if self.s == self.p - 1:
                    o.backward()
                else:
                    g = torch.empty(self.rows, self.out_width)
                    dist.irecv(g, self.ranks[self.s + 1], self.group, tag=2 * i + 1).wait()
                    start = time.perf_counter() - t0
                    o.backward(g)
                if self.s > 0:
                    sends.append(dist.isend(h.grad, self.ranks[self.s - 1], self.group,
                                            tag=2 * i + 1))
            self.spans.append((f"{action}{i}", start, time.perf_counter() - t0))
        for work in sends:
            work.wait()
        return losses


def one_process(spec, args, m, n=1, replica=0, dp=None):
    """The unsplit model on one replica's micro-batches, one after the other, grads summed then
    / m; with dp (the replica's "dp" group), every grad then all_reduced over it and / n, and the
    loss averaged over it, as the stages do. n = 1: one process on the whole batch (m = N x
    --microbatches: the replicas' micro-batches, replica by replica)."""
    model = build(spec, 0, len(spec))
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr)
    rows_r = args.batch_size // n
    rows, losses = rows_r // m, []
    for step in range(args.steps):
        sgd.zero_grad()
        first, total = step * args.batch_size + replica * rows_r, 0.0
        for i in range(m):
            loss = F.mse_loss(model(inputs(first + i * rows, rows)),
                              targets(first + i * rows, rows))
            total += loss.item()
            loss.backward()
        for param in model.parameters():
            if m > 1:
                param.grad /= m
            if dp is not None and n > 1:
                dist.all_reduce(param.grad, group=dp)
                param.grad /= n
        sgd.step()
        loss = total / m
        if dp is not None and n > 1:
            mean = torch.tensor([loss / n], dtype=torch.float64)
            dist.all_reduce(mean, group=dp)
            loss = mean.item()
        losses.append(loss)
    return model, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--schedule", choices=["gpipe", "1f1b", "both"], default="both")
    parser.add_argument("--trace", default="")
    parser.add_argument("--mistake", choices=["", "mismatched-widths"], default="")
    parser.add_argument("--throughput", action="store_true",
                        help="also print each schedule's training steps' samples per second, "
                             "GPipe's first; the first step (a warm-up) is left out (for "
                             "bench/run.py)")
    args = parser.parse_args()
    if args.dp > 1 and args.batch_size % (args.dp * args.microbatches):
        raise SystemExit(f"--microbatches {args.microbatches} x --dp {args.dp} does not divide "
                         f"--batch-size {args.batch_size}")
    if args.batch_size % args.microbatches:
        raise SystemExit(f"--microbatches {args.microbatches} does not divide --batch-size "
                         f"{args.batch_size}")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world, m, n = dist.get_rank(), dist.get_world_size(), args.microbatches, args.dp
    spec = model_layers(args.layers, args.hidden)
    # The mesh's groups by new_group, row-major as torch.arange(world).view(dp, pp): a row is a
    # replica's pipeline, a column a "dp" group. Every rank makes every group, in the same order.
    if world % n:
        raise SystemExit(f"--dp {n} does not divide the world size {world}")
    p = world // n
    grid = torch.arange(world).view(n, p).tolist()
    for row in grid:
        group = dist.new_group(row)
        if rank in row:
            pp = (group, row)
    for j in range(p):
        column = [grid[i][j] for i in range(n)]
        group = dist.new_group(column)
        if rank in column:
            dp = group
    d, s = rank // p, rank % p  # this rank's replica, and its stage
    rows_r = args.batch_size // n  # a replica's rows of each batch
    if n > 1:
        out0(f"mesh {grid} (dp, pp): a row is a replica's pipeline (\"pp\"), a column a \"dp\" "
             "group")
        if s == 0:
            out(f"replica {d} of {n}: stages on ranks {pp[1]}, rows {d * rows_r}.."
                f"{(d + 1) * rows_r - 1} of each batch of {args.batch_size}")

    # ---- Step 1: the model cut into p stages, one per rank
    cut = split_stages(spec, p)
    begin, end = cut[s]
    widths = "-".join(str(w) for w in [FEATURES] + [b for k, _, b in spec if k == "Linear"])
    each = f" ({rows_r} per replica)" if n > 1 else ""
    out0(f"MLP {widths} ({args.layers} Linear layers) cut into {p} stage{'' if p == 1 else 's'}; "
         f"a batch of {args.batch_size} rows{each} in {m} micro-batches of {rows_r // m}")
    out(f"stage {s}: layers {begin}..{end - 1}: {describe(spec, begin, end)}")
    hidden = args.hidden + 1 if args.mistake and s == p - 1 else args.hidden
    built = model_layers(args.layers, hidden)

    # ---- Step 2: the two schedules: the order each stage runs its micro-batches in
    kinds = [k for k, flag in (("GPipe", "gpipe"), ("1F1B", "1f1b"))
             if args.schedule in (flag, "both")]
    for kind in kinds:
        text = " ".join(f"{a}{i}" for a, i in order(kind, p, s, m))
        out(f"{kind}{' ' if kind == '1F1B' else ''} order: {text}")
    rows = rows_r // m
    runs = []
    for kind in kinds:
        module = build(built, begin, end)
        in_width = built[begin][1]
        out_width = [w for k, _, w in built[begin:end] if k == "Linear"][-1]
        stage = Stage(module, pp, s, m, rows, in_width, out_width)
        sgd = torch.optim.SGD(module.parameters(), lr=args.lr)
        losses, timed = [], 0.0  # timed: the steps alone (--throughput)
        for step in range(args.steps):
            first = step * args.batch_size + d * rows_r  # replica d's rows
            x, y = inputs(first, rows_r), targets(first, rows_r)
            start = time.perf_counter()
            sgd.zero_grad()
            dist.barrier(group=pp[0])
            t0 = time.perf_counter()
            step_losses = stage.step(kind, x, y, t0)
            for param in module.parameters():
                if m > 1:
                    param.grad /= m
                if n > 1:  # DDP's mean over the replicas: this stage's grads over "dp", / N
                    dist.all_reduce(param.grad, group=dp)
                    param.grad /= n
            sgd.step()
            if step > 0 or args.steps == 1:  # step 0: a warm-up
                timed += time.perf_counter() - start
            loss = sum(step_losses) / m
            if n > 1 and s == p - 1:  # the batch's: the replicas' means averaged over "dp"
                mean = torch.tensor([loss / n], dtype=torch.float64)
                dist.all_reduce(mean, group=dp)
                loss = mean.item()
            losses.append(loss)
        if args.throughput:  # every stage's steps over the slowest stage's seconds
            slowest = torch.tensor([timed], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            samples = max(args.steps - 1, 1) * args.batch_size
            out0(f"throughput: {samples / slowest.item():.0f} samples/s "
                 f"({samples} samples in {slowest.item():.3f} s)")
        runs.append((kind, module, stage, losses))

    # ---- Step 3: what each stage holds at its peak, and the bubble
    last = s == p - 1
    for kind, module, stage, _ in runs:
        want = m if kind == "GPipe" else min(p - s, m)
        form = "m = " if kind == "GPipe" else "min(p - s, m) = "
        plural = "" if stage.peak == 1 else "es"
        out(f"{kind}: at most {stage.peak} micro-batch{plural} stashed, "
            f"{stage.peak * stash_bytes(module, rows, last):,} bytes (closed form {form}{want})")
    out0(f"bubble, closed form: (p - 1)/(m + p - 1) = {p - 1}/{m + p - 1} = "
         f"{100 * (p - 1) / (m + p - 1):.1f}% of each step idle on every stage, with either schedule")
    if args.trace:
        for kind, _, stage, _ in runs:
            every = [None] * p
            dist.all_gather_object(every, stage.spans, group=pp[0])
            if rank == 0:
                begin_s = min(span[1] for spans in every for span in spans)
                end_s = max(span[2] for spans in every for span in spans)
                window = end_s - begin_s
                idle = [window - sum(e - b for _, b, e in spans) for spans in every]
                os.makedirs(args.trace, exist_ok=True)
                path = f"{args.trace}/{'gpipe' if kind == 'GPipe' else '1f1b'}_twin.json"
                events = [{"name": a, "ph": "X", "pid": 0, "tid": t, "ts": (b - begin_s) * 1e6,
                           "dur": (e - b) * 1e6} for t, spans in enumerate(every)
                          for a, b, e in spans]
                with open(path, "w") as f:
                    json.dump({"traceEvents": events}, f)
                out0(f"{kind}: bubble measured {100 * sum(idle) / (p * window):.1f}% of the last "
                     f"step (idle µs per stage: {', '.join(f'{int(v * 1e6):,}' for v in idle)}); "
                     f"trace {path}")

    # ---- Step 4: training: the weights equal one process's with the same micro-batches
    # With --dp N: one process per replica (its rows, its m micro-batches), every grad all_reduced
    # over this rank's "dp" group and / N as the stages do: the same sums in the same order.
    reference, ref_losses = one_process(spec, args, m, n, d, dp)
    mine = [param for i, layer in enumerate(reference) if begin <= i < end
            for param in layer.parameters()]

    def same(a, b):  # bit for bit, a NaN equal to the same NaN (--lr 10 diverges alike)
        return torch.equal(a.detach().view(torch.int32), b.detach().view(torch.int32))

    ok = True
    for kind, module, _, losses in runs:
        ok = ok and all(same(a, b) for a, b in zip(module.parameters(), mine))
        ok = ok and (not last or [struct.pack("<d", v) for v in losses]
                     == [struct.pack("<d", v) for v in ref_losses])
        if last and d == 0:
            out(f"{kind}: loss per step {', '.join(f'{v:.6g}' for v in losses)}")
    verdict = torch.tensor([int(ok)])
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    both = " (either schedule)" if len(kinds) == 2 else ""
    whose = "one process's" if n == 1 else "one process per replica's"
    over = "" if n == 1 else ", averaged over \"dp\""
    out0(f"after {args.steps} steps, every stage's weights{both} equal {whose} with the same "
         f"{m} micro-batches{over}, bit for bit: {'yes' if verdict.item() else 'NO'}")
    if n > 1:  # information, not a check: the same sums in another order (support.h)
        whole, whole_losses = one_process(spec, args, n * m)
        part = [param for i, layer in enumerate(whole) if begin <= i < end
                for param in layer.parameters()]
        worst = 0.0

        def largest(a, b):
            a, b = a.double(), b.double()
            both_off = ~torch.isfinite(a) & ~torch.isfinite(b)  # both diverged: equal
            diff = torch.where(both_off, torch.zeros_like(a), (a - b).abs() / b.abs().clamp(min=1))
            diff = torch.nan_to_num(diff, nan=math.inf)
            return diff.max().item() if diff.numel() else 0.0

        for kind, module, _, losses in runs:
            worst = max([worst] + [largest(a.detach(), b.detach())
                                   for a, b in zip(module.parameters(), part)])
            if last:
                worst = max(worst, largest(torch.tensor(losses, dtype=torch.float64),
                                           torch.tensor(whole_losses, dtype=torch.float64)))
        largest_all = torch.tensor([worst], dtype=torch.float64)
        dist.all_reduce(largest_all, op=dist.ReduceOp.MAX)
        out0(f"largest difference from one process on the whole batch ({n} x {m} = {n * m} "
             f"micro-batches): {largest_all.item():.1e} of max(1, |value|), any rank")
    dist.destroy_process_group()
    if not verdict.item():
        out0("MISMATCH: the weights or losses differ from one process's")
        sys.exit(1 if rank == 0 else 0)
    out0("OK: every stage's layers, stash peaks and weights are their closed forms and one "
         "process's")


if __name__ == "__main__":
    main()
