#!/usr/bin/env python3
"""Checks that every "expected output" block in a README comes from a real run.

A block is marked in the Markdown like this:

    <!-- expected-output: PROGRAM --nproc N [-- ARGS...] -->
    ```
    [rank 0/2] ...
    ```

The checker runs `BIN/ddprun --standalone --nproc-per-node N BIN/PROGRAM ARGS...` (with the word
`--no-launcher` instead of `--nproc N`: `BIN/PROGRAM ARGS...` alone, for chapter 10's driver, which
starts its own jobs; each `--ddprun FLAG` before `--` adds one of ddprun's own flags, a value
joined with `=`, as in `--ddprun --local-rank-arg=underscore`), and compares the program's
standard output with the block as a multiset of lines: ranks print concurrently, so their lines
may arrive in any order, but every line must be there exactly as many times; the run must exit 0.

usage: check_expected_output.py BIN_DIR README.md [README.md ...]
"""
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

MARKER = re.compile(r"<!-- expected-output: (.+?) -->\s*\n```[a-z]*\n(.*?)```", re.S)


def parse_marker(spec):
    words = shlex.split(spec)
    program, nproc, args, flags = words[0], 1, [], []  # nproc None: PROGRAM without ddprun
    rest = words[1:]
    while rest:
        word = rest.pop(0)
        if word == "--nproc":
            nproc = int(rest.pop(0))
        elif word == "--ddprun":
            flags.append(rest.pop(0))
        elif word == "--no-launcher":
            nproc = None
        elif word == "--":
            args = rest
            break
        else:
            raise SystemExit(f"bad expected-output marker '{spec}': unknown word '{word}'")
    if flags and nproc is None:
        raise SystemExit(f"bad expected-output marker '{spec}': --ddprun without a launcher")
    return program, nproc, args, flags


def check(bin_dir, readme):
    text = open(readme, encoding="utf-8").read()
    blocks = MARKER.findall(text)
    failures = 0
    for spec, block in blocks:
        program, nproc, args, flags = parse_marker(spec)
        cmd = [f"{bin_dir}/{program}", *args]
        if nproc is None:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        else:
            run = ddprun(bin_dir, nproc, cmd, deadline=120, flags=flags)
        got = Counter(run.stdout.splitlines())
        want = Counter(block.splitlines())
        if run.returncode != 0 or got != want:
            failures += 1
            print(f"{readme}: the block for '{spec}' does not match a real run "
                  f"(exit code {run.returncode})")
            for line in sorted((want - got).elements()):
                print(f"  only in the README: {line}")
            for line in sorted((got - want).elements()):
                print(f"  only in the run:    {line}")
            if run.stderr:
                print("  stderr:\n    " + run.stderr.replace("\n", "\n    "))
        else:
            print(f"{readme}: '{spec}' matches a real run ({sum(want.values())} lines)")
    return len(blocks), failures


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    bin_dir, readmes = sys.argv[1], sys.argv[2:]
    total = failed = 0
    for readme in readmes:
        n, f = check(bin_dir, readme)
        total, failed = total + n, failed + f
    if total == 0:
        raise SystemExit("no expected-output blocks found: the check would prove nothing")
    print(f"{total - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
