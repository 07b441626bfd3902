#!/usr/bin/env python3
"""Checks dist::randn and dist::NumpyRandomState (common/src/data/seed.cpp) against torch.randn
and numpy.random.RandomState, bit for bit.

Usage: /usr/bin/python3 tests/unit/randn_parity.py path/to/randn_driver

torch.randn on the CPU takes two roads (ATen's normal_kernel): fewer than 16 values are float64
Box-Muller pairs, the second of each pair kept in the generator for the next call; 16 or more
are float32 Box-Muller over runs of 16 uniforms, with the last 16 redrawn when 16 does not divide
the count. The cases cover both, their boundary (15, 16, 17, 31, 32, 33), odd counts that leave a
cached value for the next call, and several seeds; NumPy's randint covers the bound PowerSGD uses
(1_000_000_000) and others whose masks differ. Exits 1 on any difference.
"""

import struct
import sys

import numpy as np
import torch

from parity_harness import compare, run_driver  # noqa: E402  (beside this file)

SIZES = [[1], [2], [3, 1], [5, 4, 7], [15], [16], [17], [31], [32], [33], [48, 3], [100], [1, 16, 1],
         [7, 40], [250], [20000]]
SEEDS = [0, 1, 42, 2147483647, 123456789012] + list(range(100, 120))


def torch_bits(seed, sizes):
    g = torch.Generator()
    g.manual_seed(seed)
    calls = []
    for n in sizes:
        values = torch.randn(n, generator=g).tolist()
        calls.append(" ".join(struct.pack("<f", v)[::-1].hex() for v in values))
    return ";".join(calls)


def numpy_ints(seed, high, count):
    state = np.random.RandomState(seed)
    return " ".join(str(int(state.randint(high))) for _ in range(count))


def main():
    driver = sys.argv[1]
    cases = [("randn", seed, tuple(sizes)) for seed in SEEDS for sizes in SIZES]
    cases += [("numpy", seed, high, 20) for seed in [0, 1, 7, 4294967295]
              for high in [1, 2, 3, 1000, 1_000_000_000, 2**31, 2**32]]
    lines = [f"randn {c[1]} " + " ".join(map(str, c[2])) if c[0] == "randn"
             else f"numpy {c[1]} {c[2]} {c[3]}" for c in cases]
    answers = run_driver(driver, lines, "\n", "lines")

    def expected(case):
        return torch_bits(case[1], case[2]) if case[0] == "randn" else numpy_ints(*case[1:])

    def show(case, want, ours):
        print(f"{case}:\n  torch/numpy: {want[:200]}\n  ours:        {ours[:200]}")

    return compare(cases, answers, expected, show,
                   f"torch {torch.__version__}, numpy {np.__version__}")


if __name__ == "__main__":
    sys.exit(main())
