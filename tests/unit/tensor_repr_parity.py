#!/usr/bin/env python3
"""Checks dist::Tensor::repr() against torch's repr, character for character.

Usage: /usr/bin/python3 tests/unit/tensor_repr_parity.py path/to/tensor_repr_driver

Generates a few hundred deterministic 1-D tensors (fixed seed; every dtype; sizes up to 1100 so
that lines wrap and tensors over 1000 elements get summarized; int-like, fractional, tiny, huge and
mixed values with zeros, -0.0, nan and inf sprinkled in), feeds them to the C++ driver
(tests/unit/tensor_repr_driver.cpp) and compares its output with repr() of the same tensor built
by torch. Prints the first mismatches and exits 1 on any; exits 0 when all match.

Some cases are printed as if the tensor lived on a GPU ("device='cuda:0'"). torch cannot make a
GPU tensor without a GPU, so for those the expected text is built from torch's own pieces: its
_tensor_str for the values and its _add_suffixes for the suffixes, in the order its _str_intern
appends them (device, then dtype).
"""

import random
import struct
import sys

import torch

from parity_harness import compare, run_driver  # beside this file

SEED = 1013  # fixed so that every run checks the same cases
NUM_RANDOM_CASES = 400
NUM_RANDOM_HALF_CASES = 200  # drawn after the others, from a generator of their own

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
FOUR_DTYPES = ["float32", "float64", "int32", "int64"]  # the random cases' first dtypes
HALF_DTYPES = ["float16", "bfloat16"]
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
SPECIALS = [0.0, -0.0, float("nan"), float("inf"), float("-inf")]

# Cases at the edges of torch's formatting rules, checked on every run.
HAND_PICKED = [
    ("float32", []),
    ("float64", []),
    ("int32", []),
    ("int64", []),
    ("float32", [0.0]),
    ("float32", [-0.0]),
    ("float32", [0.0, -0.0, float("nan"), float("inf"), float("-inf")]),
    ("float64", [float("nan"), 1.5, -0.0]),
    ("float32", [float("nan"), 1e9, -0.0]),
    ("float32", [1.0, 1000.0]),  # ratio exactly 1000: still int mode
    ("float32", [1.0, 1001.0]),  # ratio over 1000: scientific
    ("float64", [1e8, 1.0e8]),  # exactly 1e8: not "> 1e8"
    ("float64", [1e8 + 2.0]),
    ("float64", [1e-4, 0.5]),  # exactly 1e-4: not "< 1e-4"
    ("float64", [9.99e-5, 0.05]),
    ("float64", [0.03125, 0.09375, -0.03125]),  # exact ties at four decimals
    ("float64", [1.03125, 1e-5]),  # an exact tie in scientific notation
    ("float32", [0.1, 0.2, 0.3]),
    ("float64", [0.1 + 0.2]),
    ("float64", [1e300, -1e-300, 5e-324]),
    ("float32", [3.4028234663852886e38, 1.401298464324817e-45]),
    ("float64", [123456789.0, 1.0]),
    ("float64", [99999.99995, 1.0]),  # rounds up to a wider string
    ("int32", [INT_RANGES["int32"][0], INT_RANGES["int32"][1], 0, -1]),
    ("int64", [INT_RANGES["int64"][0], INT_RANGES["int64"][1], 0, -1]),
    # The dtype suffix moves to its own line once the last line would pass 80 columns.
    ("int32", [10] * 13),  # last line 59 characters: the suffix still fits
    ("int32", [1] * 18),  # 61: it does not
    ("float64", [float("nan")] * 10),  # 57: fits
    ("float64", [float("nan")] * 9 + [float("-inf")]),  # 58: does not
    ("int64", list(range(1000))),  # the largest unsummarized tensor
    ("int64", list(range(1001))),  # the smallest summarized one
    ("float32", [float("nan")] * 1001),
    # float16 and bfloat16: torch.tensor rounds the Python floats (float64 -> float32 -> 16 bits,
    # to nearest even), then prints the float32 values of the result.
    ("float16", []),
    ("bfloat16", []),
    ("float16", [1.5, 2.0]),
    ("float16", [0.0, -0.0, float("nan"), float("inf"), float("-inf")]),
    ("bfloat16", [-0.0, float("nan"), 1.0]),
    ("float16", [0.1, 1 / 3, 2 / 3, 0.7]),  # rounded differently by the two 16-bit formats
    ("bfloat16", [0.1, 1 / 3, 2 / 3, 0.7]),
    ("float16", [1 + 2**-11, 1 + 3 * 2**-11, 2049.0, 2051.0]),  # ties: to the even neighbour
    ("bfloat16", [1 + 2**-8, 1 + 3 * 2**-8, 257.0, 259.0]),
    ("float16", [1 + 2**-11 + 2**-40]),  # float32 first makes it a tie: 1., not 1.0010
    ("float16", [6e-8, 2**-24, 2**-25, 3 * 2**-25, 2**-14 - 2**-25, 1e-5]),  # subnormals
    ("bfloat16", [1e-40, 1e-45, 1e-38, 3.0]),
    ("float16", [65504.0, 65519.0]),  # both the largest finite value
    ("float16", [65520.0, -1e5, 1.0]),  # overflow to inf
    ("bfloat16", [3.3895313892515355e38, 3.4e38, 1e39]),
    ("bfloat16", [1e8, 1.0]),  # above 1e8: scientific
    ("float16", [1000.0, 1.0]),
    ("float16", [1001.0, 1.0]),
    ("float16", [0.5] * 20),
    ("float16", list(range(1001))),
    ("bfloat16", [i * 0.37 for i in range(1100)]),
]


def to_float32(x):
    """The float32 nearest to x, as a Python float (so repr() writes it exactly)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def random_size(rng):
    bucket = rng.random()
    if bucket < 0.05:
        return 0
    if bucket < 0.35:
        return rng.randint(1, 8)
    if bucket < 0.65:
        return rng.randint(9, 60)  # wraps onto several lines
    if bucket < 0.85:
        return rng.randint(61, 999)
    return rng.randint(1000, 1100)  # around and past the summarization threshold


def signed(rng, magnitude):
    return magnitude if rng.random() < 0.5 else -magnitude


# Each generator draws one value of a "flavour" the formatter treats differently.
FLOAT_FLAVOURS = {
    "int_like": lambda rng: float(rng.randint(-50, 50)),
    "int_like_wide": lambda rng: float(rng.randint(-(10**6), 10**6)),
    "int_like_huge": lambda rng: float(signed(rng, rng.randint(10**8, 10**13))),
    "fraction": lambda rng: rng.uniform(-10, 10),
    "unit": lambda rng: rng.uniform(0, 1),
    "ties": lambda rng: rng.randint(-4000, 4000) / 32,
    "tiny": lambda rng: rng.uniform(-1e-5, 1e-5),
    "huge": lambda rng: rng.uniform(-1e12, 1e12),
    "mixed_magnitude": lambda rng: signed(rng, 10 ** rng.uniform(-12, 12)),
    "near_limits": lambda rng: rng.choice(
        [1e8, 1e8 + 8, 99999999.0, 1e-4, 9.999e-5, 1000.0, 1001.0, 0.001, 0.5, 1.0]
    ),
}


def random_float_values(rng, dtype, size):
    flavours = rng.sample(sorted(FLOAT_FLAVOURS), rng.choice([1, 1, 1, 2]))
    special_rate = rng.choice([0.0, 0.0, 0.02, 0.2, 1.0])
    values = []
    for _ in range(size):
        if rng.random() < special_rate:
            value = rng.choice(SPECIALS)
        else:
            value = FLOAT_FLAVOURS[rng.choice(flavours)](rng)
        values.append(to_float32(value) if dtype == "float32" else value)
    return values


def random_int_values(rng, dtype, size):
    low, high = INT_RANGES[dtype]
    flavour = rng.choice(["small", "medium", "full", "extremes"])
    draw = {
        "small": lambda: rng.randint(-10, 10),
        "medium": lambda: rng.randint(-(10**5), 10**5),
        "full": lambda: rng.randint(low, high),
        "extremes": lambda: rng.choice([low, high, 0, -1, 1]),
    }[flavour]
    return [draw() for _ in range(size)]


def random_half_cases(rng):
    """float16 and bfloat16 cases: the float flavours' values as float64, which torch.tensor and
    the driver both round."""
    return [(HALF_DTYPES[i % 2], random_float_values(rng, "float64", random_size(rng)))
            for i in range(NUM_RANDOM_HALF_CASES)]


def random_cases(rng):
    cases = []
    for i in range(NUM_RANDOM_CASES):
        dtype = sorted(FOUR_DTYPES)[i % len(FOUR_DTYPES)]
        size = random_size(rng)
        if dtype in INT_RANGES:
            cases.append((dtype, random_int_values(rng, dtype, size)))
        else:
            cases.append((dtype, random_float_values(rng, dtype, size)))
    return cases


# (dtype, values, device) cases whose device suffix (alone or with a dtype suffix) must wrap the
# way torch wraps it.
DEVICE_CASES = [
    ("int64", [4, 6], "cuda:0"),
    ("float32", [1.5, 2.0], "cuda:1"),
    ("int32", [1, 2], "cuda:0"),
    ("float64", [], "cuda:0"),
    ("int64", [], "cuda:0"),
    ("float32", [], "cuda:0"),
    ("int32", [10] * 13, "cuda:0"),  # the device suffix fits, the dtype one does not
    ("int32", [10] * 10, "cuda:0"),  # both fit
    ("int64", [1] * 20, "cuda:0"),  # the device suffix goes on its own line
    ("float64", [0.5] * 9, "cuda:12"),
    ("int32", [12345] * 9, "cuda:0"),  # the last line is short again: both suffixes fit on it
    ("int64", list(range(2000)), "cuda:3"),
    ("float16", [1.5, 2.0], "cuda:0"),
    ("bfloat16", [], "cuda:0"),
    ("bfloat16", [0.5] * 9, "cuda:0"),
]


def torch_repr_on_device(values, dtype, device):
    """repr() of torch.tensor(values, dtype=dtype) if it lived on `device` (a cuda device)."""
    import torch._tensor_str as tensor_str  # pylint: disable=import-outside-toplevel

    tensor = torch.tensor(values, dtype=dtype)
    suffixes = [f"device='{device}'"]
    if tensor.numel() == 0:
        body = "[]"
        if dtype != torch.get_default_dtype():
            suffixes.append(f"dtype={dtype}")
    else:
        body = tensor_str._tensor_str(tensor, len("tensor("))
        if dtype not in (torch.get_default_dtype(), torch.int64):
            suffixes.append(f"dtype={dtype}")
    return tensor_str._add_suffixes("tensor(" + body, suffixes, len("tensor("), False)


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/tensor_repr_driver")
    cases = [(d, v, None) for d, v in HAND_PICKED + random_cases(random.Random(SEED))]
    cases += [(d, v, None) for d, v in random_half_cases(random.Random(SEED + 1))]
    cases += DEVICE_CASES
    lines = [dtype + (f"@{device}" if device else "") + "".join(" " + repr(v) for v in values)
             for dtype, values, device in cases]
    got = run_driver(sys.argv[1], lines, "\n---\n", "reprs")

    def expected(case):
        dtype, values, device = case
        if device:
            return torch_repr_on_device(values, DTYPES[dtype], device)
        return repr(torch.tensor(values, dtype=DTYPES[dtype]))

    def show(case, want, ours):
        dtype, values, device = case
        shown = " ".join(repr(v) for v in values[:12]) + (" ..." if len(values) > 12 else "")
        print(f"MISMATCH {dtype} on {device or 'cpu'} ({len(values)} values): {shown}")
        print(f"torch:\n{want}\ndist::Tensor:\n{ours}\n")

    return compare(cases, got, expected, show)

if __name__ == "__main__":
    sys.exit(main())
