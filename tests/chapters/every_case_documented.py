#!/usr/bin/env python3
"""Every case of chapter 10's driver has an expected-output block in the chapter's README.

usage: every_case_documented.py BIN_DIR README.md

Asks BIN_DIR/ch10_failure_modes --list for its cases and looks in the README for a block marked
`<!-- expected-output: ch10_failure_modes --no-launcher -- CASE -->` for each (the test
10_failure_modes_readme then checks each block against a real run). Exit 1 naming the cases left
out, or a block for a case the driver does not have.
"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    bin_dir, readme = sys.argv[1], sys.argv[2]
    listing = subprocess.run([f"{bin_dir}/ch10_failure_modes", "--list"], capture_output=True,
                             text=True, check=True, timeout=30).stdout
    cases = [line.split("\t")[0] for line in listing.splitlines() if line]
    text = open(readme, encoding="utf-8").read()
    blocks = re.findall(r"<!-- expected-output: ch10_failure_modes --no-launcher -- (\S+) -->", text)
    missing = [c for c in cases if c not in blocks]
    unknown = [b for b in blocks if b not in cases]
    for c in missing:
        print(f"{readme}: no expected-output block for case '{c}'")
    for b in unknown:
        print(f"{readme}: a block for '{b}', which ch10_failure_modes --list does not name")
    if not cases:
        print("ch10_failure_modes --list named no case: the check would prove nothing")
    print(f"{len(cases)} cases, {len(blocks)} blocks")
    sys.exit(1 if missing or unknown or not cases else 0)


if __name__ == "__main__":
    main()
