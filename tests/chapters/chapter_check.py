#!/usr/bin/env python3
"""Runs a chapter the way a reader does, and checks it (the `chapter` and `parity` tests).

  chapter_check.py run BIN_DIR PROGRAM CASE...
      Each CASE is "--nproc N [-- ARGS...]". Runs BIN_DIR/PROGRAM under ddprun with N ranks and
      checks that it exits 0 and that rank 0 printed its "OK" line (every chapter checks its own
      result against a closed form and prints OK or MISMATCH).

  chapter_check.py parity BIN_DIR PROGRAM TWIN_PY CASE...
      Runs the C++ chapter and its PyTorch twin (Debian's /usr/bin/python3 with python3-torch,
      gloo backend) with the same CASE, both under ddprun, and compares their standard output as
      multisets of lines: ranks print concurrently, so the order of lines may differ, but every
      line must be the same, as many times. The twin prints what a reader of the seeds would
      compute with PyTorch; equal lines mean equal values, tensor for tensor.

Each run has a 120 s deadline. Exit 0 when every case passes, 1 otherwise.
"""
import shlex
import subprocess
import sys
from collections import Counter

PYTHON = "/usr/bin/python3"


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


def launch(bin_dir, nproc, command):
    cmd = [f"{bin_dir}/ddprun", "--standalone", "--nproc-per-node", str(nproc), *command]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def show(title, run):
    print(f"--- {title}: exit code {run.returncode}")
    print(run.stdout + run.stderr)


def check_run(bin_dir, program, cases):
    failures = 0
    for case in cases:
        nproc, args = parse_case(case)
        run = launch(bin_dir, nproc, [f"{bin_dir}/{program}", *args])
        ok_line = any(line.startswith(f"[rank 0/{nproc}] OK") for line in run.stdout.splitlines())
        if run.returncode == 0 and ok_line:
            print(f"ok: {program} {case}")
            continue
        failures += 1
        print(f"FAIL: {program} {case}: exit code {run.returncode}, OK line printed: {ok_line}")
        show(program, run)
    return failures


def check_parity(bin_dir, program, twin, cases):
    failures = 0
    for case in cases:
        nproc, args = parse_case(case)
        ours = launch(bin_dir, nproc, [f"{bin_dir}/{program}", *args])
        theirs = launch(bin_dir, nproc, [PYTHON, twin, *args])
        got, want = Counter(ours.stdout.splitlines()), Counter(theirs.stdout.splitlines())
        if ours.returncode == 0 and theirs.returncode == 0 and got == want and got:
            print(f"ok: {program} == {twin} for {case} ({sum(got.values())} lines)")
            continue
        failures += 1
        print(f"FAIL: {program} and its twin differ for {case}")
        for line in sorted((want - got).elements())[:20]:
            print(f"  only PyTorch printed: {line}")
        for line in sorted((got - want).elements())[:20]:
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
