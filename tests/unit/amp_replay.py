#!/usr/bin/env python3
"""Checks dist::GradScaler (common/src/nn/amp.cpp) against a plain-Python replay of torch 1.13's
rules, step by step: every scale, found_inf, skipped step, unscaled gradient value and growth
tracker.

Usage: /usr/bin/python3 tests/unit/amp_replay.py path/to/amp_driver

The rules replayed (torch/cuda/amp/grad_scaler.py and the CUDA kernels behind its two operators,
_amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_, in torch 1.13):
  inv_scale = float32(1 / double(scale))
  found_inf = any gradient value, before unscaling, is inf or NaN
  grad      = float32(grad * inv_scale)  (untouched when inv_scale == 1)
  step      = skipped when found_inf
  update    = found_inf: scale = float32(scale * backoff), tracker = 0
              else tracker + 1 == growth_interval: scale = float32(scale * growth), tracker = 0
              else: tracker += 1
float32 arithmetic is emulated with struct: a product of two float32 values is exact in double,
so rounding that double once gives float32's product. Where the library differs from torch 1.13
(dist/amp.h says why), the replay says so: a growth to inf, or a backoff to 0, is an error.

torch's own GradScaler cannot be the reference on this machine: torch 1.13's disables itself
without CUDA ("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
and both operators have no CPU kernel in 1.13 (NotImplementedError for the 'CPU' backend). So
this script also tries torch._amp_update_scale_ on the CPU, and on a GPU when there is one; where
it runs (torch 2.x has CPU kernels), every case's scales and trackers are checked against it as
well, with torch's own overflow rule of that version. It says which it did.
"""

import math
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parity_harness import compare, run_driver  # noqa: E402

FLOAT32_MAX = struct.unpack("<f", bytes.fromhex("ffff7f7f"))[0]


def f32(x):
    """x rounded to float32 (to nearest even), as a Python float; inf past float32's range."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def bits(x):
    if math.isnan(x):
        return "nan"
    return struct.pack(">f", x).hex()


def fmt(x):
    """A value as the driver parses it back (Python's repr: 'inf', 'nan', '0.1')."""
    return repr(float(x))


def replay(case):
    """The driver's line for one case (amp_driver.cpp documents the format)."""
    init, growth, backoff, interval, steps = case
    if not (math.isfinite(init) and 0 < init <= FLOAT32_MAX):
        return "error:init_scale"
    if not (math.isfinite(growth) and growth > 1):
        return "error:growth_factor"
    if not (0 < backoff < 1):
        return "error:backoff_factor"
    if not (1 <= interval <= 2**31 - 1):
        return "error:growth_interval"
    scale = f32(init)
    if scale == 0:
        return "error:init_scale"
    tracker = 0
    records = []
    for grad in steps:
        scaled = [f32(f32(g) * scale) for g in grad]
        inv_scale = f32(1.0 / scale)
        found = any(not math.isfinite(v) for v in scaled)
        unscaled = scaled if inv_scale == 1.0 else [f32(v * inv_scale) for v in scaled]
        head = f"{bits(scale)}/{int(found)}/{int(not found)}/{','.join(bits(v) for v in unscaled)}/"
        if found:
            new = f32(scale * backoff)
            if new == 0:
                records.append(head + "error:zero")
                return " ".join(records)
            scale, tracker = new, 0
        elif tracker + 1 == interval:
            new = f32(scale * growth)
            if math.isinf(new):
                records.append(head + "error:overflow")
                return " ".join(records)
            scale, tracker = new, 0
        else:
            tracker += 1
        records.append(head + f"{bits(scale)}/{tracker}")
    return " ".join(records)


def cases():
    inf, nan = math.inf, math.nan
    clean = [0.5, -0.25]
    yield 65536.0, 2.0, 0.5, 2000, [clean] * 5  # torch's defaults: no growth within 5 steps
    # growth after N clean steps (N = 3), an inf, then a NaN, then growth again
    yield 1024.0, 2.0, 0.5, 3, [clean, clean, clean, clean, [1.0, inf], clean, [nan, 0.0],
                                clean, clean, clean, clean]
    # -inf counts too; two bad steps in a row back off twice
    yield 8.0, 2.0, 0.5, 2, [[-inf, 1.0], [2.0, nan], clean, clean, clean]
    # a gradient that overflows only once scaled: 70000 * 65536 is finite in float32, but the
    # scaled value 2^127 * 4 is not
    yield 2.0**127, 2.0, 0.5, 5, [[4.0], [4.0], [1.0], [1.0]]
    # factors that round: the scale is float32(float32 * double) each time
    yield 1000.0, 1.1, 0.3, 2, [clean, clean, [inf], clean, clean, clean, clean, [0.1, 3.3]]
    yield 3.0, 1.0000001, 0.9999999, 1, [clean, [nan], clean, clean]
    # unscaling that is not exact: inv_scale = float32(1 / 3) and values that round
    yield 3.0, 2.0, 0.5, 100, [[0.1, 1e-30, -7.25, 3.4e38]]
    # inv_scale 1: the values stay as they are
    yield 1.0, 2.0, 0.5, 100, [[0.1, -0.3]]
    # overflow on growth: the library refuses (torch 1.13 lets the scale become inf)
    yield 2.0**126, 2.0, 0.5, 1, [clean, clean]
    yield FLOAT32_MAX, 1.5, 0.5, 2, [clean, clean]
    # backoff to 0: refused (torch 1.13 reaches 0 and then steps on NaN gradients)
    yield 2.0**-148, 2.0, 0.5, 10, [[inf], [inf], [inf]]
    # init_scale that rounds to float32 (1e-46 rounds to 0)
    yield 1e-46, 2.0, 0.5, 10, [clean]
    yield 0.1, 2.0, 0.5, 2, [[1.0], [1.0], [1.0]]
    # bad options
    yield 0.0, 2.0, 0.5, 10, [clean]
    yield -1.0, 2.0, 0.5, 10, [clean]
    yield inf, 2.0, 0.5, 10, [clean]
    yield nan, 2.0, 0.5, 10, [clean]
    yield 1e39, 2.0, 0.5, 10, [clean]
    yield 8.0, 1.0, 0.5, 10, [clean]
    yield 8.0, inf, 0.5, 10, [clean]
    yield 8.0, 2.0, 1.0, 10, [clean]
    yield 8.0, 2.0, 0.0, 10, [clean]
    yield 8.0, 2.0, -0.5, 10, [clean]
    yield 8.0, 2.0, 0.5, 0, [clean]
    yield 8.0, 2.0, 0.5, -3, [clean]
    yield 8.0, 2.0, 0.5, 2**31, [clean]


def line(case):
    init, growth, backoff, interval, steps = case
    return " ".join([fmt(init), fmt(growth), fmt(backoff), str(interval)] +
                    [",".join(fmt(g) for g in grad) for grad in steps])


def torch_update_kernel():
    """torch._amp_update_scale_ on a device where it runs, or None and why not."""
    try:
        import torch
    except ImportError as e:
        return None, f"no torch ({e})"
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    reasons = []
    for device in devices:
        try:
            scale = torch.full((1,), 8.0, device=device)
            tracker = torch.zeros(1, dtype=torch.int32, device=device)
            torch._amp_update_scale_(scale, tracker, torch.zeros(1, device=device), 2.0, 0.5, 1)
            return (torch, device), ""
        except (NotImplementedError, RuntimeError) as e:
            reasons.append(f"{device}: {str(e).splitlines()[0][:90]}")
    return None, (f"torch {torch.__version__} has no _amp_update_scale_ kernel here "
                  f"({'; '.join(reasons)})")


def torch_scales(kernel, case):
    """The scale and tracker after each update by torch's own kernel, from the replay's found_inf
    sequence, up to the first step that the library refuses."""
    torch, device = kernel
    init, growth, backoff, interval, steps = case
    scale = torch.full((1,), init, device=device)
    tracker = torch.zeros(1, dtype=torch.int32, device=device)
    out = []
    for grad in steps:
        found = any(not math.isfinite(f32(f32(g) * scale.item())) for g in grad)
        torch._amp_update_scale_(scale, tracker, torch.full((1,), float(found), device=device),
                                 growth, backoff, interval)
        out.append((bits(scale.item()), int(tracker.item())))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    all_cases = list(cases())
    answers = run_driver(sys.argv[1], [line(c) for c in all_cases], "\n", "lines")

    def show(case, want, ours):
        print(f"case {line(case)}\n  replay: {want}\n  ours:   {ours}")

    code = compare(all_cases, answers, replay, show,
                   "the reference: a plain-Python replay of torch 1.13's rules, not torch")
    steps = sum(len(c[4]) for c in all_cases)
    print(f"{steps} steps in {len(all_cases)} cases")

    kernel, why = torch_update_kernel()
    if kernel is None:
        print(f"torch's own update rule not checked: {why}")
        return code
    checked = 0
    for case, ours in zip(all_cases, answers):
        records = [r for r in ours.split(" ") if r and "error:" not in r]
        if not records:
            continue
        want = torch_scales(kernel, case)[: len(records)]
        got = [(r.split("/")[4], int(r.split("/")[5])) for r in records]
        checked += 1
        if want != got:
            print(f"case {line(case)}\n  torch {kernel[0].__version__}: {want}\n  ours: {got}")
            code = 1
    print(f"{checked} cases checked against torch._amp_update_scale_ on {kernel[1]}")
    return code


if __name__ == "__main__":
    sys.exit(main())
