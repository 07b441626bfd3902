#!/usr/bin/env python3
"""Checks dist::Tensor::to(dtype) into and out of float16 and bfloat16 against torch, bit for bit.

Usage: /usr/bin/python3 tests/unit/tensor_cast_parity.py path/to/tensor_cast_driver

Generates deterministic cases (fixed seed), each a source dtype, a destination dtype and up to 64
values, feeds them to the C++ driver (tests/unit/tensor_cast_driver.cpp) and compares the bits it
prints with those of torch.tensor(values, dtype=source).to(destination). The values are the ones
where rounding can go wrong: every midpoint between neighbouring float16 or bfloat16 values and the
floats just beside it (ties to even), float64 values a hair from a midpoint (torch goes through
float32 and rounds twice), subnormals, the overflow to inf, integers past 2^24, and random bit
patterns. A NaN compares equal to any NaN: torch writes different NaN bits on different kernel
paths (its vectorised float -> bfloat16 writes 0xffff, its scalar one 0x7fc0).
It checks arithmetic the same way: + - * / of float16 and bfloat16 tensors with each other, with
float32 and integer tensors, and with Python floats and ints (the result's dtype, and its bits:
one rounding per operation, the scalar rounded to the tensor's dtype first, as in torch 1.13).
Prints the first mismatches and exits 1 on any; exits 0 when all match.
"""

import math
import random
import struct
import sys

import torch

from parity_harness import compare, run_driver  # beside this file

SEED = 1631  # fixed so that every run checks the same cases
PER_LINE = 64

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def f32(x):
    """The float32 nearest to x, as a Python float."""
    return struct.unpack("f", struct.pack("f", x))[0]


def f32_from_bits(bits):
    return struct.unpack("f", struct.pack("I", bits))[0]


def next_f32(x, toward):
    """The float32 after x toward `toward` (x a float32 value)."""
    bits = struct.unpack("I", struct.pack("f", x))[0]
    up = (toward > x) == (x >= 0)
    if x == 0:
        return f32_from_bits(1) if toward > 0 else -f32_from_bits(1)
    return f32_from_bits(bits + 1 if up else bits - 1)


def sixteen_bit_values(dtype, rng, count):
    """`count` random finite non-negative values of a 16-bit dtype, with the largest finite one
    and the smallest subnormal always among them."""
    top = 0x7BFF if dtype == torch.float16 else 0x7F7F
    bits = [0, 1, 2, 0x3FF, 0x400, top - 1, top] + [rng.randint(0, top) for _ in range(count)]
    return torch.tensor(bits, dtype=torch.int16).view(dtype).double().tolist()


def ties(dtype, rng, count):
    """Midpoints between neighbouring values of `dtype` (exact in float32 and float64)."""
    values = sixteen_bit_values(dtype, rng, count)
    top = max(values)
    mids = []
    for v in values:
        up = torch.tensor([v], dtype=dtype).view(torch.int16) + 1
        nxt = up.view(dtype).double().item()
        if math.isinf(nxt):  # past the largest finite: the midpoint to the next power of two
            nxt = 2 * top - torch.tensor([top], dtype=dtype).view(torch.int16).sub(1) \
                .view(dtype).double().item()
        mids.append((v + nxt) / 2)
    return mids


def float32_cases(rng):
    values = []
    for dtype in (torch.float16, torch.bfloat16):
        for m in ties(dtype, rng, 600):
            m = f32(m)  # exact already
            values += [m, -m, next_f32(m, math.inf), next_f32(m, -math.inf)]
    values += [f32_from_bits(rng.getrandbits(32)) for _ in range(3000)]
    values += [f32(rng.uniform(-70000, 70000)) for _ in range(500)]
    values += [f32(math.ldexp(rng.random(), rng.randint(-30, -10))) for _ in range(500)]
    values += [0.0, -0.0, math.inf, -math.inf, math.nan, 65504.0, 65519.0, 65520.0,
               f32(3.4028234663852886e38), f32(3.3895313892515355e38)]
    return values


def float64_cases(rng):
    values = []
    for dtype in (torch.float16, torch.bfloat16):
        for m in ties(dtype, rng, 400):
            nudge = abs(m) * 2**-40 or 2**-1074
            values += [m, m + nudge, m - nudge, -(m + nudge)]
    values += [rng.uniform(-70000, 70000) for _ in range(500)]
    values += [math.ldexp(rng.random(), rng.randint(-160, 130)) for _ in range(500)]
    values += [1e300, -1e300, 5e-324, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, math.nan]
    return values


def int_cases(rng, bits):
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    values = [rng.randint(-70000, 70000) for _ in range(300)]
    values += [rng.randint(low, high) for _ in range(300)]
    # Past 2^24 an integer is rounded to float32 first, then to 16 bits: two roundings.
    values += [2**24 + 2**16 + 1, 2**24 + 2**16, 2**24 + 3 * 2**16 - 1, low, high, 0, -1]
    values += [rng.randint(2**24, 2**31 - 1) for _ in range(300)]
    return values


def chunks(values):
    return [values[i:i + PER_LINE] for i in range(0, len(values), PER_LINE)]


def all_cases(rng):
    cases = []
    sources = {
        "float32": float32_cases(rng),
        "float64": float64_cases(rng),
        "int32": int_cases(rng, 32),
        "int64": int_cases(rng, 64),
    }
    for source, values in sources.items():
        for dest in ("float16", "bfloat16"):
            cases += [(source, dest, chunk) for chunk in chunks(values)]
    for source in ("float16", "bfloat16"):
        values = sixteen_bit_values(DTYPES[source], rng, 2000)
        values += [-v for v in values[:500]] + [math.inf, -math.inf, math.nan]
        for dest in ("float32", "float64", "float16", "bfloat16"):
            cases += [(source, dest, chunk) for chunk in chunks(values)]
        # To integers only what fits (torch's result is undefined beyond): truncation toward 0.
        small = [v for v in values if math.isfinite(v) and abs(v) < 2**31]
        for dest in ("int32", "int64"):
            cases += [(source, dest, chunk) for chunk in chunks(small)]
    return cases


OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
       "/": lambda a, b: a / b}
TENSOR_PAIRS = [("float16", "float16"), ("bfloat16", "bfloat16"), ("float16", "bfloat16"),
                ("bfloat16", "float32"), ("float16", "float64"), ("int32", "float16"),
                ("bfloat16", "int64")]
SCALARS = [0.1, 1 / 3, 0.7, -2.5, 3, -7, 1e-3, 70000.0, 1e39]


def operand_values(dtype, rng, count):
    """`count` values of `dtype`, exact in it: 16-bit values of both signs, random float32 and
    float64 values, or small integers."""
    if dtype in ("float16", "bfloat16"):
        values = sixteen_bit_values(DTYPES[dtype], rng, count)[:count]
        return [v if rng.random() < 0.5 else -v for v in values]
    if dtype == "float32":
        return [f32(rng.uniform(-100, 100)) for _ in range(count)]
    if dtype == "float64":
        return [rng.uniform(-100, 100) for _ in range(count)]
    return [rng.randint(-3000, 3000) for _ in range(count)]


def arithmetic_cases(rng):
    """(op, a_dtype, b_dtype or "scalar", a_values, b_values or [scalar]) cases."""
    cases = []
    for op in OPS:
        for a, b in TENSOR_PAIRS:
            for _ in range(4):
                cases.append((op, a, b, operand_values(a, rng, PER_LINE),
                              operand_values(b, rng, PER_LINE)))
        for a in ("float16", "bfloat16"):
            for scalar in SCALARS:
                cases.append((op, a, "scalar", operand_values(a, rng, PER_LINE), [scalar]))
    return cases


def arithmetic_line(case):
    op, a, b, a_values, b_values = case
    if b == "scalar":
        return f"{op} {a} scalar {b_values[0]!r}" + "".join(" " + repr(v) for v in a_values)
    return (f"{op} {a} {b} {len(a_values)}" +
            "".join(" " + repr(v) for v in a_values + b_values))


def torch_arithmetic(case):
    op, a, b, a_values, b_values = case
    left = torch.tensor(a_values, dtype=DTYPES[a])
    right = b_values[0] if b == "scalar" else torch.tensor(b_values, dtype=DTYPES[b])
    result = OPS[op](left, right)
    return f"{result.dtype} {bits_of(result)}"


def torch_bits(case):
    if len(case) == 5:
        return torch_arithmetic(case)
    source, dest, values = case
    return bits_of(torch.tensor(values, dtype=DTYPES[source]).to(DTYPES[dest]))


def bits_of(result):
    width = result.element_size()
    raw = result.view(SAME_WIDTH_INT[width]).tolist()
    nan = torch.isnan(result).tolist() if result.is_floating_point() else [False] * len(raw)
    return " ".join("nan" if is_nan else format(b % 2 ** (8 * width), "x")
                    for b, is_nan in zip(raw, nan))


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/tensor_cast_driver")
    rng = random.Random(SEED)
    casts = all_cases(rng)
    arithmetic = arithmetic_cases(rng)
    cases = casts + arithmetic
    lines = [f"{s} {d}" + "".join(" " + repr(v) for v in values) for s, d, values in casts]
    lines += [arithmetic_line(case) for case in arithmetic]
    got = run_driver(sys.argv[1], lines, "\n", "casts")

    def show(case, want, ours):
        if len(case) == 5:
            op, a, b, a_values, b_values = case
            print(f"MISMATCH {a} {op} {b} {b_values[:1] if b == 'scalar' else ''}:\n"
                  f"  a      {a_values[:8]}\n  torch  {want[:120]}\n  ours   {ours[:120]}")
            return
        source, dest, values = case
        for value, w, o in zip(values, want.split(), ours.split()):
            if w != o:
                print(f"MISMATCH {source} {value!r} -> {dest}: torch {w}, dist::Tensor {o}")
                return
        print(f"MISMATCH {source} -> {dest}: torch {want!r}\ndist::Tensor {ours!r}")

    count = sum(len(case[-1] if len(case) == 3 else case[3]) for case in cases)
    return compare(cases, got, torch_bits, show, f"{count} values")


if __name__ == "__main__":
    sys.exit(main())
