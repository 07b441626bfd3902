#!/usr/bin/env python3
"""Checks dist's half-precision layers and mixed-precision training against torch 1.13 on the CPU.

Usage: /usr/bin/python3 tests/unit/mixed_precision_parity.py path/to/mixed_precision_driver

1. A bfloat16 Linear, forward and backward, against torch.autocast("cpu", dtype=torch.bfloat16)
   (torch 1.13's CPU autocast: bfloat16 only). Both round the weight, bias and input to bfloat16,
   sum the products in float32 or better, and round the result once to bfloat16; torch's float32
   sums add in its own order (ours in double), so a result near a rounding boundary may fall on
   the other side: every value must be within one bfloat16 unit in the last place (2^-7 relative
   to the value's power of two) of torch's, the weight's and bias's float32 grads too (each is a
   bfloat16 value widened). Where torch's own result is not within one unit of the exact sum
   rounded once (torch 1.13 has a CPU path that adds bfloat16 products in bfloat16: seen here for
   the weight gradient of an 8 x 16 -> 5 layer; which path runs depends on the shapes and the
   CPU), the script says so and compares with that exact sum instead.
2. Six mixed-precision training steps in float16 with a GradScaler whose first scale overflows
   float16 (so the first step is skipped and the scale backs off, then grows), against a replay in
   torch: fp32 master weights and SGD (torch.optim.SGD), the forward and backward rounded to float16
   where dist rounds them (each matmul in float64 from the float16 values, rounded to float32 and
   then to float16: torch 1.13 has no float16 matmul on the CPU, "addmm_impl_cpu_" not implemented
   for 'Half', and its CPU autocast refuses float16), cross_entropy in float32 by torch's autograd,
   and GradScaler's rules (torch's own GradScaler disables itself without CUDA). The scale and the
   skipped steps must be the same at every step, the loss and the weights within 1e-6 relative (the
   float64 sums add in another order than ours: a float16 rounding may flip).
Exits 1 on any difference.
"""

import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parity_harness import run_driver  # noqa: E402

SEED = 1313


def token(t):
    return ",".join(repr(float(v)) for v in t.flatten().tolist())


def from_bits(text):
    values = [int(h, 16) for h in text.split(",")]
    return torch.tensor(values, dtype=torch.int64).to(torch.int32).view(torch.float32)


def bf16_ulps(ours, theirs):
    """Each value's distance in bfloat16 units in the last place of the larger magnitude."""
    a, b = ours.double(), theirs.double()
    m = torch.maximum(a.abs(), b.abs()).clamp_min(2.0 ** -126)
    return ((a - b).abs() / 2.0 ** (torch.floor(torch.log2(m)) - 7)).max().item()


def linear_cases():
    g = torch.Generator().manual_seed(SEED)
    for n, fan_in, fan_out in [(32, 196, 64), (64, 512, 10), (16, 100, 40)]:
        x = torch.randn(n, fan_in, generator=g)
        w = torch.randn(fan_out, fan_in, generator=g) / math.sqrt(fan_in)
        b = torch.randn(fan_out, generator=g) * 0.1
        grad = torch.randn(n, fan_out, generator=g) * 0.01
        yield n, fan_in, fan_out, x, w, b, grad


def torch_autocast_linear(x, w, b, grad):
    layer = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        layer.weight.copy_(w)
        layer.bias.copy_(b)
    x = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x)
    out.backward(grad.bfloat16())
    return {"out": out.float(), "gx": x.grad, "gw": layer.weight.grad, "gb": layer.bias.grad}


def exact_linear(x, w, b, grad):
    """The same computation with every sum exact (float64), rounded once to float32 then
    bfloat16: what a float32-accumulating kernel gives, to a last-bit tie."""
    xb, wb, bb, gb = (t.bfloat16().double() for t in (x, w, b, grad))
    once = lambda t: t.float().bfloat16().float()  # noqa: E731
    return {"out": once(xb @ wb.T + bb), "gx": once(gb @ wb), "gw": once(gb.T @ xb),
            "gb": once(gb.sum(0))}


def check_linear(driver):
    cases = list(linear_cases())
    lines = [f"linear bfloat16 {n} {i} {o} {token(x)} {token(w)} {token(b)} {token(g)}"
             for n, i, o, x, w, b, g in cases]
    answers = run_driver(driver, lines, "\n", "lines")
    failed = 0
    for (n, i, o, x, w, b, g), answer in zip(cases, answers):
        ours = dict(part.split("=", 1) for part in answer.split())
        theirs = torch_autocast_linear(x, w, b, g)
        exact = exact_linear(x, w, b, g)
        for name in ("out", "gx", "gw", "gb"):
            mine = from_bits(ours[name]).reshape(theirs[name].shape)
            reference, what = theirs[name], "torch's autocast"
            if bf16_ulps(theirs[name].float(), exact[name]) > 1:
                reference, what = exact[name], "the exact sum (torch added in bfloat16 here)"
            ulps = bf16_ulps(mine, reference.float())
            same = torch.equal(mine, reference.float())
            verdict = "bit for bit" if same else f"{ulps:g} ulp at most"
            print(f"linear {n}x{i}->{o} bfloat16, {name}: {verdict} against {what}")
            failed += ulps > 1
    return failed


def train_case():
    g = torch.Generator().manual_seed(SEED + 1)
    n, fan_in, hidden, classes = 128, 12, 24, 5
    x = torch.randn(n, fan_in, generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    w1 = torch.randn(hidden, fan_in, generator=g) / math.sqrt(fan_in)
    b1 = torch.randn(hidden, generator=g) * 0.1
    w2 = torch.randn(classes, hidden, generator=g) / math.sqrt(hidden)
    b2 = torch.randn(classes, generator=g) * 0.1
    # The last layer's weights are large enough that the logits are confident: a quarter of the
    # loss gradients (a wrong class's probability / n) are below float16's smallest normal value,
    # 6.1e-5, where rounding them to float16 before scaling (not after) would lose bits. At 2^17
    # the first step's scaled gradients pass float16's largest, 65504, and become inf: skipped,
    # the scale halves, then grows every 2 clean steps (2^17 no longer overflows by then).
    w2 = w2 * 4
    return dict(n=n, fan_in=fan_in, hidden=hidden, classes=classes, steps=6, init_scale=2.0 ** 17,
                growth_interval=2, lr=0.5, x=x, labels=labels, w1=w1, b1=b1, w2=w2, b2=b2)


def half_matmul(a, b):
    """a @ b from float16 values: the sums in float64, rounded to float32, then to float16."""
    return (a.double() @ b.double()).float().half()


def torch_replay(c):
    """Mixed-precision training in torch, rounding where dist rounds (see the module docstring)."""
    params = [c[k].clone() for k in ("w1", "b1", "w2", "b2")]
    optimizer = torch.optim.SGD(params, lr=c["lr"])
    scale, tracker = torch.tensor(c["init_scale"], dtype=torch.float32), 0
    x = c["x"].half()
    records = []
    for _ in range(c["steps"]):
        w1, b1, w2, b2 = (p.half() for p in params)  # the half copies of the master weights
        # x W^T + b as one float64 sum, rounded to float32 and then float16, as dist computes it
        pre = ((x.double() @ w1.double().T) + b1.double()).float().half()
        h = torch.relu(pre.float()).half()
        logits = ((h.double() @ w2.double().T) + b2.double()).float().half()
        z = logits.float().requires_grad_(True)
        loss = F.cross_entropy(z, c["labels"])
        (loss * scale).backward()  # scale is a power of two: the scaled gradient is exact
        g2 = z.grad.half()
        grad_w2 = half_matmul(g2.T, h).float()
        grad_b2 = g2.double().sum(0).float().half().float()
        gh = half_matmul(g2, w2)
        gpre = torch.where(pre.float() > 0, gh.float(), torch.zeros(())).half()
        grad_w1 = half_matmul(gpre.T, x).float()
        grad_b1 = gpre.double().sum(0).float().half().float()
        grads = [grad_w1, grad_b1, grad_w2, grad_b2]
        inv_scale = scale.double().reciprocal().float()
        found = any(not torch.isfinite(gr).all() for gr in grads)
        records.append((scale.item(), not found, loss.item()))
        if not found:
            for p, gr in zip(params, grads):
                p.grad = gr * inv_scale
            optimizer.step()
        if found:
            scale, tracker = (scale.double() * 0.5).float(), 0
        elif tracker + 1 == c["growth_interval"]:
            scale, tracker = (scale.double() * 2.0).float(), 0
        else:
            tracker += 1
    return records, params


def check_training(driver):
    c = train_case()
    line = (f"train float16 {c['n']} {c['fan_in']} {c['hidden']} {c['classes']} {c['steps']} "
            f"{c['init_scale']!r} {c['growth_interval']} {c['lr']!r} {token(c['x'])} "
            f"{token(c['labels'].float())} {token(c['w1'])} {token(c['b1'])} {token(c['w2'])} "
            f"{token(c['b2'])}")
    answer = run_driver(driver, [line], "\n", "lines")[0]
    if answer.startswith("error"):
        print(f"training: the driver failed: {answer}")
        return 1
    parts = answer.split()
    steps, weights = parts[: c["steps"]], dict(p.split("=", 1) for p in parts[c["steps"]:])
    records, params = torch_replay(c)
    failed = 0
    for k, (record, (scale, stepped, loss)) in enumerate(zip(steps, records)):
        s, st, lo = record.split("/")
        ours = (from_bits(s).item(), st == "1", from_bits(lo).item())
        ok = ours[0] == scale and ours[1] == stepped and math.isclose(ours[2], loss, rel_tol=1e-6)
        print(f"step {k + 1}: scale {ours[0]:g} ({'stepped' if ours[1] else 'skipped'}), loss "
              f"{ours[2]:.6f}; torch replay: scale {scale:g} "
              f"({'stepped' if stepped else 'skipped'}), loss {loss:.6f}"
              f"{'' if ok else '  DIFFERENT'}")
        failed += not ok
    if not any(not r[1] for r in records):
        print("no step was skipped: the case no longer tests the overflow")
        failed += 1
    for name, p in zip(("w1", "b1", "w2", "b2"), params):
        mine = from_bits(weights[name]).reshape(p.shape)
        worst = ((mine.double() - p.detach().double()).abs()
                 / p.detach().double().abs().clamp_min(1e-30)).max().item()
        same = torch.equal(mine, p.detach())
        verdict = "bit for bit" if same else f"{worst:.1e} relative at most"
        print(f"master weights {name}: {verdict}")
        failed += worst > 1e-6
    return failed


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    failed = check_linear(sys.argv[1]) + check_training(sys.argv[1])
    print("OK" if failed == 0 else f"FAILED: {failed} checks")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
