"""Chapter 14's twin: float16 and bfloat16, and mixed-precision training, in PyTorch 1.13 on Gloo.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py
It takes ch14_mixed_precision's flags and prints the same lines. The data and the initial
weights are closed forms (the same bits as in support.cpp).

  step 1  torch's casts and its printing; 1.0 added in float16 and bfloat16 tensors.
  step 2  dist.all_reduce of a float16 tensor on Gloo. torch counts no bytes: the twin prints
          2 and 4 bytes a value instead of the program's measured bytes.
  step 3  float32: DistributedDataParallel + SGD. bfloat16: the same under
          torch.autocast("cpu", dtype=torch.bfloat16), torch 1.13's CPU autocast. float16: torch
          1.13's CPU autocast takes bfloat16 only (it warns and turns itself off for float16), and
          torch.cuda.amp.GradScaler turns itself off without CUDA (it warns; 1.13 has no CPU
          kernels for its two operations), so the twin replays both: the layers round to float16
          where autocast would (weights, inputs, outputs, gradients; each sum in float64, rounded
          once), DDP's average is an all_reduce of the float32 gradients divided by W, and the
          scaler is GradScaler's rule written out (skip on inf/NaN, back off x0.5, grow x2 after
          growth_interval clean steps, the scale a float32 multiplied in float64).
          torch.amp.GradScaler("cpu") runs on the CPU from torch 2.3 (2.2's GradScaler is still
          torch.cuda.amp's, CUDA only), and CPU autocast accepts float16 too (by 2.5 at the latest):
          there a learner's float16 run uses both directly.
  step 4  the activations' bytes from the tensors each forward returned, and the closed form.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES, CLASSES = 8, 4


def out0(text):
    if int(os.environ["RANK"]) == 0:
        out(text)


def out(text):
    # One write per line: print() writes the text and the newline apart, and the ranks' lines,
    # sharing one pipe, could interleave between the two.
    sys.stdout.write(f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n")
    sys.stdout.flush()


def batch(first, size):
    """support.cpp's closed-form samples: features from a hash of (i, j), a teacher's label."""
    xs, ys = [], []
    for i in range(first, first + size):
        row = [((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0 for j in range(FEATURES)]
        scores = []
        for c in range(CLASSES):
            score = 0.0
            for j in range(FEATURES):
                score += float((3 * c + 5 * j) % 7 - 3) * row[j]
            scores.append(score)
        best = 0
        for c in range(1, CLASSES):
            if scores[c] > scores[best]:
                best = c
        xs.append(row)
        ys.append(best)
    return torch.tensor(xs, dtype=torch.float32), torch.tensor(ys)


def weights(rows, cols, a, b, m, div):
    # C++'s % of non-negative numbers, then an integer minus m / 2 (integer division)
    return torch.tensor([[((a * r + b * c) % m - m // 2) / div for c in range(cols)]
                         for r in range(rows)], dtype=torch.float32)


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.l1, self.relu, self.l2 = nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES)
        with torch.no_grad():
            self.l1.weight.copy_(weights(hidden, FEATURES, 31, 17, 23, 20.0))
            self.l1.bias.zero_()
            self.l2.weight.copy_(weights(CLASSES, hidden, 13, 7, 19, 10.0))
            self.l2.bias.zero_()
        self.activations = 0

    def forward(self, x):
        h1 = self.l1(x)
        h2 = self.relu(h1)
        o = self.l2(h2)
        self.activations = sum(t.numel() * t.element_size() for t in (h1, h2, o))
        return o


def sum_of_ones(dtype, terms):
    s, one = torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)
    for _ in range(terms):
        s = s + one
    return s.item()


def g(value):
    return f"{value:g}"


def train_torch(args, bf16):
    """DDP + SGD, in float32 or under CPU autocast in bfloat16: (first loss, last loss, bytes)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = Mlp(args.hidden)
    ddp = DDP(model)
    sgd = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    losses, activations = [], 0
    for step in range(args.steps):
        sgd.zero_grad()
        x, y = batch((step * world + rank) * args.batch_size, args.batch_size)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = ddp(x)
            loss = F.cross_entropy(logits, y)  # autocast runs it in float32
        if step == 0:
            activations = model.activations
        loss.backward()
        sgd.step()
        mean = torch.tensor([loss.item() / world], dtype=torch.float64)
        dist.all_reduce(mean)
        losses.append(mean.item())
    return losses[0], losses[-1], activations, 0, 0.0, True


def half_linear(x, w, b):
    """x W^T + b from float16 values: one float64 sum, rounded to float32 and then float16."""
    return ((x.double() @ w.double().T) + b.double()).float().half()


def train_fp16_replay(args):
    """Mixed precision in float16 with GradScaler's rule, replayed (see the docstring)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = Mlp(args.hidden)
    params = [p.detach().clone() for p in (model.l1.weight, model.l1.bias, model.l2.weight,
                                            model.l2.bias)]
    sgd = torch.optim.SGD(params, lr=args.lr)
    scale, tracker, skipped = torch.tensor(args.init_scale, dtype=torch.float32), 0, 0
    losses, activations, grown, untouched = [], 0, 0, True
    for step in range(args.steps):
        x, y = batch((step * world + rank) * args.batch_size, args.batch_size)
        x = x.half()
        w1, b1, w2, b2 = (p.half() for p in params)  # autocast's half copies of the master weights
        pre = half_linear(x, w1, b1)
        h = torch.relu(pre.float()).half()  # exact; 1.13 has no float16 relu on the CPU
        logits = half_linear(h, w2, b2)
        if step == 0:
            activations = sum(t.numel() * t.element_size() for t in (pre, h, logits))
        z = logits.float().requires_grad_(True)
        loss = F.cross_entropy(z, y)
        loss.backward()
        g2 = (z.grad * scale).half()  # scaler.scale(loss).backward(): the scaled gradient
        gh = (g2.double() @ w2.double()).float().half()
        gpre = torch.where(pre.float() > 0, gh.float(), torch.zeros(())).half()
        grads = [(gpre.T.double() @ x.double()).float().half().float(),
                 gpre.double().sum(0).float().half().float(),
                 (g2.T.double() @ h.double()).float().half().float(),
                 g2.double().sum(0).float().half().float()]
        for gr in grads:  # DDP: each float32 gradient divided by W, then summed over the ranks
            gr.div_(world)
            dist.all_reduce(gr)
        found = any(not torch.isfinite(gr).all() for gr in grads)
        before = scale.item()
        kept = [p.clone() for p in params]
        if not found:
            inv_scale = scale.double().reciprocal().float()
            for p, gr in zip(params, grads):
                p.grad = gr * inv_scale
            sgd.step()
            tracker += 1
            if tracker == args.growth_interval:
                scale, tracker, grown = (scale.double() * 2.0).float(), 0, grown + 1
                out0(f"  step {step + 1}: {args.growth_interval} clean steps at scale "
                     f"{g(before)}: scale {g(scale.item())}")
        else:
            skipped += 1
            untouched = untouched and all(torch.equal(p, q) for p, q in zip(params, kept))
            scale, tracker = (scale.double() * 0.5).float(), 0
            out0(f"  step {step + 1}: a gradient is inf or NaN at scale {g(before)}: step "
                 f"skipped, scale {g(scale.item())}")
        mean = torch.tensor([loss.item() / world], dtype=torch.float64)
        dist.all_reduce(mean)
        losses.append(mean.item())
    # The replay is the rule; what it can still get wrong is checked: a skipped step left the
    # weights as they were, and the scale is init_scale x 2^growths x 0.5^skips (powers of two
    # multiply exactly while the scale stays a normal float32).
    rule_ok = untouched and scale.item() == args.init_scale * 2.0 ** grown * 0.5 ** skipped
    return losses[0], losses[-1], activations, skipped, scale.item(), rule_ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--terms", type=int, default=3000)
    p.add_argument("--numel", type=int, default=32768)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--init-scale", type=float, default=65536.0)
    p.add_argument("--growth-interval", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    # Step 1: what float16 and bfloat16 keep
    v = torch.tensor([0.1, 65504.0, 65520.0, 1.00390625])
    out0(f"float32:  {v}")
    out0(f"float16:  {v.half()}")
    out0(f"bfloat16: {v.bfloat16()}")
    out0(f"0.1 is stored as {v.half()[0].item():.17g} in float16, "
         f"{v.bfloat16()[0].item():.17g} in bfloat16")
    s32, s16, sb = (sum_of_ones(dt, args.terms) for dt in (torch.float32, torch.float16,
                                                           torch.bfloat16))
    out0(f"1.0 added {args.terms} times: float32 {g(s32)}, float16 {g(s16)}, bfloat16 {g(sb)} "
         f"(closed form: min(terms, 2^11) and min(terms, 2^8))")

    # Step 2: an all_reduce in float16
    mine = torch.tensor([0.1, 40000.0, 0.5 * (rank + 1)]).half()
    out(f"holds {mine}")
    dist.all_reduce(mine)
    fold = torch.zeros((), dtype=torch.float16)
    for _ in range(world):
        fold = fold + torch.tensor(0.1).half()
    want = torch.tensor([fold.item(), 40000.0 * world, 0.25 * world * (world + 1)]).half()
    out0(f"all_reduce(SUM) in float16: {mine}; closed form {want}")
    n_sent = args.numel * (world - 1)
    out0(f"all_reduce of {args.numel:,} values: torch counts no bytes sent (closed form: n(W-1) "
         f"values, 4 or 2 bytes each: {4 * n_sent:,} and {2 * n_sent:,})")

    # Step 3: the same model in float32, bfloat16, float16 with a GradScaler
    out0(f"MLP 8-{args.hidden}-4, SGD (lr {g(args.lr)}), {args.steps} steps of {args.batch_size} "
         f"samples per rank, DDP on {world} {'rank' if world == 1 else 'ranks'}; master weights "
         f"in float32:")
    fp32 = train_torch(args, bf16=False)
    bf16 = train_torch(args, bf16=True)
    out0(f"float16 with GradScaler(init_scale={g(args.init_scale)}, growth_interval="
         f"{args.growth_interval}):")
    fp16 = train_fp16_replay(args)
    out0(f"loss, first step -> last: float32 {fp32[0]:.4f} -> {fp32[1]:.4f}, bfloat16 "
         f"{bf16[0]:.4f} -> {bf16[1]:.4f}, float16 {fp16[0]:.4f} -> {fp16[1]:.4f}")
    out0(f"float16: {fp16[3]} of {args.steps} steps skipped, final scale {g(fp16[4])}; every step "
         f"as GradScaler's rule says: {'yes' if fp16[5] else 'NO'}")

    # Step 4: the memory
    per_forward = args.batch_size * (2 * args.hidden + CLASSES)
    out0(f"activations of one forward: float32 {fp32[2]:,} bytes, bfloat16 {bf16[2]:,}, float16 "
         f"{fp16[2]:,} (closed form: batch * (2 * hidden + 4) = {per_forward:,} values, 4 or 2 "
         f"bytes each)")
    psi = args.hidden * (FEATURES + 1) + CLASSES * (args.hidden + 1)
    out0(f"model state with Adam: float32 4 + 4 + 8 bytes a value, mixed 2 + 2 + 12: 16Ψ = "
         f"{16 * psi:,} bytes either way (Ψ = {psi:,}); what sharding does to it: ./tutorial run "
         f"12 -- --mixed-precision")
    ok = (s16 == min(args.terms, 2048) and sb == min(args.terms, 256)
          and torch.equal(mine.float(), want.float())
          and fp32[2] == 4 * per_forward and bf16[2] == 2 * per_forward and fp16[5])
    dist.destroy_process_group()
    if not ok:
        out0("MISMATCH: some number above is not its closed form")
        leave(1 if rank == 0 else 0)
    out0("OK: casts, sums, the all_reduce, GradScaler's rule and the bytes are their closed forms")
    leave(0)


def leave(code):
    """Ends without tearing DDP down (torch 1.13's teardown can deadlock; chapter 09's twin)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
