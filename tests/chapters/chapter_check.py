#!/usr/bin/env python3
"""Runs a chapter the way a reader does, and checks it (the `chapter` and `parity` tests).

  chapter_check.py run BIN_DIR PROGRAM CASE...
      Each CASE is "--nproc N [-- ARGS...]". Runs BIN_DIR/PROGRAM under ddprun with N ranks and
      checks that it exits 0 and that rank 0 printed its "OK" line (every chapter checks its own
      result against a closed form and prints OK or MISMATCH).

  chapter_check.py parity BIN_DIR PROGRAM TWIN_PY [--rtol R] [--ignore REGEX] CASE...
      Runs the C++ chapter and its PyTorch twin (gloo backend) with the same CASE, both under
      ddprun as a reader starts them (`ddprun ... twin.py`; PYTHON_EXEC picks Debian's
      /usr/bin/python3 with python3-torch), and compares their standard output as
      multisets of lines: ranks print concurrently, so the order of lines may differ, but every
      line must be the same, as many times. The twin prints what a reader of the source posts would
      compute with PyTorch; equal lines mean equal values, tensor for tensor.
      With --rtol (chapters that train in float32, where torch sums in another order), each
      rank's lines are compared in order instead: the words must be equal, integers too, and each
      decimal number must be printed with the same digits after the point (and exponent) and be
      within R relative of the twin's, or differ by at most one unit in its last printed digit.

Each run has a 120 s deadline. Exit 0 when every case passes, 1 otherwise.
"""
import os
import re
import shlex
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

PYTHON = "/usr/bin/python3"  # the Python ddprun runs the twins with (PYTHON_EXEC)
DEADLINE_S = 120


def parse_case(case):
    words = shlex.split(case)
    nproc, args = 1, []
    while words:
        word = words.pop(0)
        if word == "--nproc":
            nproc = int(words.pop(0))
        elif word == "--":
            args = words
            break
        else:
            raise SystemExit(f"bad case '{case}': unknown word '{word}'")
    return nproc, args


def show(title, run):
    print(f"--- {title}: exit code {run.returncode}")
    print(run.stdout + run.stderr)


def check_run(bin_dir, program, cases):
    failures = 0
    for case in cases:
        nproc, args = parse_case(case)
        run = ddprun(bin_dir, nproc, [f"{bin_dir}/{program}", *args], deadline=DEADLINE_S)
        ok_line = any(line.startswith(f"[rank 0/{nproc}] OK") for line in run.stdout.splitlines())
        if run.returncode == 0 and ok_line:
            print(f"ok: {program} {case}")
            continue
        failures += 1
        print(f"FAIL: {program} {case}: exit code {run.returncode}, OK line printed: {ok_line}")
        show(program, run)
    return failures


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
RANK_PREFIX = re.compile(r"^\[rank \d+/\d+\] ")


def last_digit(number):
    """The value of one unit in the last printed digit: 0.01 for 1.25, 1e-7 for 2.5e-05."""
    mantissa, _, exponent = number.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def close(ours, theirs, rtol):
    """Equal words and integers; decimals printed alike, within rtol or one unit of the last
    printed digit."""
    if NUMBER.sub("#", ours) != NUMBER.sub("#", theirs):
        return False
    for a, b in zip(NUMBER.findall(ours), NUMBER.findall(theirs)):
        if a == b:
            continue
        if "." not in a or "." not in b or last_digit(a) != last_digit(b):
            return False  # integers must be equal, and both sides must print alike
        x, y = float(a), float(b)
        if abs(x - y) > max(rtol * max(abs(x), abs(y)), last_digit(a) * 1.000001):
            return False
    return True


def by_rank(text):
    """Each rank's lines, in the order that rank printed them."""
    ranks = {}
    for line in text.splitlines():
        m = RANK_PREFIX.match(line)
        ranks.setdefault(m.group(0) if m else "", []).append(line)
    return ranks


def differences(ours, theirs, rtol):
    """Lines only one side printed: (only_theirs, only_ours)."""
    if rtol is None:
        got, want = Counter(ours.splitlines()), Counter(theirs.splitlines())
        return sorted((want - got).elements()), sorted((got - want).elements())
    mine, twins = by_rank(ours), by_rank(theirs)
    only_theirs, only_ours = [], []
    for prefix in sorted(set(mine) | set(twins)):
        a, b = mine.get(prefix, []), twins.get(prefix, [])
        for x, y in zip(a, b):
            if not close(x, y, rtol):
                only_ours.append(x)
                only_theirs.append(y)
        only_ours += a[len(b):]
        only_theirs += b[len(a):]
    return only_theirs, only_ours


def check_parity(bin_dir, program, twin, cases):
    failures = 0
    rtol, ignore = None, None
    while cases[:1] in (["--rtol"], ["--ignore"]):
        if cases[0] == "--rtol":
            rtol = float(cases[1])
        else:
            ignore = re.compile(cases[1])
        cases = cases[2:]
    kept = lambda text: "\n".join(l for l in text.splitlines() if not (ignore and ignore.search(l)))
    for case in cases:
        nproc, args = parse_case(case)
        ours = ddprun(bin_dir, nproc, [f"{bin_dir}/{program}", *args], deadline=DEADLINE_S)
        theirs = ddprun(bin_dir, nproc, [twin, *args], deadline=DEADLINE_S,
                        env=dict(os.environ, PYTHON_EXEC=PYTHON))
        only_theirs, only_ours = differences(kept(ours.stdout), kept(theirs.stdout), rtol)
        lines = len(kept(ours.stdout).splitlines())
        if ours.returncode == 0 and theirs.returncode == 0 and not only_theirs and not only_ours \
                and lines:
            within = f", numbers within rtol {rtol}" if rtol is not None else ""
            print(f"ok: {program} == {twin} for {case} ({lines} lines{within})")
            continue
        failures += 1
        print(f"FAIL: {program} and its twin differ for {case}")
        for line in only_theirs[:20]:
            print(f"  only PyTorch printed: {line}")
        for line in only_ours[:20]:
            print(f"  only C++ printed:     {line}")
        if ours.returncode != 0:
            show(program, ours)
        if theirs.returncode != 0:
            show(twin, theirs)
    return failures


def main(argv):
    if len(argv) >= 4 and argv[1] == "run":
        failures = check_run(argv[2], argv[3], argv[4:])
    elif len(argv) >= 5 and argv[1] == "parity":
        failures = check_parity(argv[2], argv[3], argv[4], argv[5:])
    else:
        raise SystemExit(__doc__)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
