#!/usr/bin/env python3
"""Checks the README blocks that show ddprun's own flags at work against a real run.

tests/readme/check_expected_output.py checks blocks run as `ddprun --standalone --nproc-per-node N
PROGRAM ARGS`. A block that shows a launcher flag (such as --local-rank-arg) is marked instead

    <!-- launcher-output: DDPRUN_FLAGS... PROGRAM [ARGS...] -->
    ```
    [rank 0/2] ...
    ```

and runs `BIN/ddprun --standalone DDPRUN_FLAGS... BIN/PROGRAM ARGS...`: the words before PROGRAM
are ddprun's (those that take a value, such as --nproc-per-node 2, take the next word), PROGRAM is
the first word that is not a flag. As in check_expected_output.py, the program's standard output
must equal the block as a multiset of lines (ranks print in any order), and the run must exit 0.

usage: check_launcher_blocks.py BIN_DIR README.md    exit 0 when every block matches, 1 otherwise
"""
import re
import shlex
import subprocess
import sys
from collections import Counter

MARKER = re.compile(r"<!-- launcher-output: (.+?) -->\s*\n```[a-z]*\n(.*?)```", re.S)
TAKES_VALUE = {"--nproc-per-node", "--nproc_per_node", "--grace-period", "--grace_period"}
DEADLINE_S = 120


def command(bin_dir, spec):
    words = shlex.split(spec)
    flags = []
    while words and words[0].startswith("-"):
        flag = words.pop(0)
        flags.append(flag)
        if flag in TAKES_VALUE:
            flags.append(words.pop(0))
    if not words:
        raise SystemExit(f"launcher-output marker '{spec}' names no PROGRAM")
    program, args = words[0], words[1:]
    return [f"{bin_dir}/ddprun", "--standalone", *flags, f"{bin_dir}/{program}", *args]


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    bin_dir, readme = argv[1], argv[2]
    blocks = MARKER.findall(open(readme, encoding="utf-8").read())
    if not blocks:
        print(f"{readme}: no launcher-output blocks: the check would prove nothing")
        return 1
    failures = 0
    for spec, block in blocks:
        cmd = command(bin_dir, spec)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S, check=False)
        got, want = Counter(run.stdout.splitlines()), Counter(block.splitlines())
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
    print(f"{len(blocks) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
