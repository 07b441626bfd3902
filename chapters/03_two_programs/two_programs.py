#!/usr/bin/env python3
"""Starts chapter 03's two programs as two separate processes, as two terminals would.

  two_programs.py run BIN_DIR [--first rank0|rank1] [--delay S] [--port P] [--twin]
      Starts ch03_rank1 and ch03_rank0 (with --twin: twin_rank1.py and twin_rank0.py under
      /usr/bin/python3), the second one S seconds (default 1) after the first, on port P (default:
      a free one), and lets them print to this terminal.

  two_programs.py check BIN_DIR README.md [--twin]
      The chapter test: runs both start orders, rank 1 first and rank 0 first, and checks that
      each program exits 0 and prints exactly the lines of its block in README.md (the blocks
      marked <!-- two-programs-output: ch03_rank0 --> and ... ch03_rank1 -->), with the README's
      port 29501 replaced by the free port the test used. The twins must print the same lines.

  two_programs.py check-timeout BIN_DIR
      Starts each program alone with --timeout 2: each must exit 1 within 20 s, with an error that
      names its missing partner and the address it waited at.

Every wait has a deadline: a program still running after it is killed and the check fails.
"""
import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tools" / "pylib"))
# Free when we look; rank 0 binds it a moment later. Another program could take it in between:
# rank 0 then says "already in use", and the check tries again on another port.
from disttut.ports import free_port  # noqa: E402
PYTHON = "/usr/bin/python3"
RUN_DEADLINE_S = 90  # for a pair that should meet at once; their own --timeout is 60 s
README_PORT = "29501"


def command(bin_dir, which, twin, *args):
    if twin:
        return [PYTHON, str(HERE / f"twin_{which}.py"), *args]
    return [str(Path(bin_dir) / f"ch03_{which}"), *args]


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def run_pair(bin_dir, first, delay, port, twin, capture):
    """Starts `first`, then the other `delay` seconds later; returns {which: (code, out, err)}.

    Both are watched together: when one fails, the other is stopped at once instead of waiting
    out its own timeout for a partner that is gone. Output goes to temporary files (capture) or
    to this terminal."""
    order = [first, "rank1" if first == "rank0" else "rank0"]
    procs, files = {}, {}
    try:
        for i, which in enumerate(order):
            if i:
                time.sleep(delay)
            if capture:
                files[which] = (tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))
            out, err = files.get(which, (None, None))
            procs[which] = subprocess.Popen(
                command(bin_dir, which, twin, "--master-port", str(port)),
                stdout=out, stderr=err, text=True)
        deadline = time.monotonic() + RUN_DEADLINE_S
        notes = {}
        while any(p.poll() is None for p in procs.values()):
            failed = [w for w, p in procs.items() if p.poll() not in (None, 0)]
            late = time.monotonic() > deadline
            if failed or late:
                for which, proc in procs.items():
                    if proc.poll() is None:
                        stop(proc)
                        notes[which] = (f"still running after {RUN_DEADLINE_S} s; killed" if late
                                        else f"stopped: its partner {failed[0]} had failed")
                break
            time.sleep(0.05)
        results = {}
        for which, proc in procs.items():
            out, err = "", ""
            if capture:
                for f in files[which]:
                    f.seek(0)
                out, err = files[which][0].read(), files[which][1].read()
            code = None if which in notes else proc.returncode
            results[which] = (code, out, err + notes.get(which, ""))
        return results
    finally:
        for proc in procs.values():
            stop(proc)
        for pair in files.values():
            for f in pair:
                f.close()


def readme_blocks(readme):
    text = Path(readme).read_text(encoding="utf-8")
    blocks = dict(re.findall(r"<!-- two-programs-output: ch03_(rank[01]) -->\s*\n```[a-z]*\n(.*?)```",
                             text, re.S))
    if set(blocks) != {"rank0", "rank1"}:
        raise SystemExit(f"{readme}: expected one two-programs-output block for ch03_rank0 and one "
                         f"for ch03_rank1, found {sorted(blocks)}")
    return {which: block.splitlines() for which, block in blocks.items()}


def check_orders(bin_dir, readme, twin):
    expected = readme_blocks(readme)
    failures = 0
    for first in ("rank1", "rank0"):
        for attempt in range(3):
            port = free_port()
            results = run_pair(bin_dir, first, 1.0, port, twin, capture=True)
            if "already in use" not in results["rank0"][2] or attempt == 2:
                break
            print(f"port {port} was taken before rank 0 could bind it; trying another")
        label = f"{'twins' if twin else 'ch03'}, {first} first, port {port}"
        for which in ("rank0", "rank1"):
            code, out, err = results[which]
            want = [line.replace(f":{README_PORT} ", f":{port} ") for line in expected[which]]
            got = out.splitlines()
            if code == 0 and got == want:
                print(f"ok: {label}: {which} exited 0 and printed its {len(want)} README lines")
                continue
            failures += 1
            print(f"FAIL: {label}: {which} exited {code}")
            print("  expected:\n    " + "\n    ".join(want))
            print("  got:\n    " + "\n    ".join(got))
            if err:
                print("  stderr:\n    " + err.replace("\n", "\n    "))
    return failures


def check_timeout(bin_dir):
    failures = 0
    cases = {  # program -> what its error must say about the partner that never came
        "rank1": "rank 0 has not started",
        "rank0": "rank 1 of world_size 2 never joined",
    }
    for which, partner in cases.items():
        port = free_port()
        start = time.monotonic()
        try:
            run = subprocess.run(command(bin_dir, which, False, "--master-port", str(port),
                                         "--timeout", "2"),
                                 capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            failures += 1
            print(f"FAIL: ch03_{which} alone with --timeout 2 was still running after 20 s")
            continue
        took = time.monotonic() - start
        address = f"127.0.0.1:{port}"
        if run.returncode == 1 and partner in run.stderr and address in run.stderr:
            print(f"ok: ch03_{which} alone: exit 1 after {took:.1f} s, naming the partner and "
                  f"{address}")
            continue
        failures += 1
        print(f"FAIL: ch03_{which} alone: exit {run.returncode} after {took:.1f} s; expected exit 1 "
              f"and an error containing '{partner}' and '{address}'")
        print("  stderr:\n    " + run.stderr.replace("\n", "\n    "))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run")
    run.add_argument("bin_dir")
    run.add_argument("--first", choices=["rank0", "rank1"], default="rank1")
    run.add_argument("--delay", type=float, default=1.0)
    run.add_argument("--port", type=int)
    run.add_argument("--twin", action="store_true")
    check = sub.add_parser("check")
    check.add_argument("bin_dir")
    check.add_argument("readme")
    check.add_argument("--twin", action="store_true")
    timeout = sub.add_parser("check-timeout")
    timeout.add_argument("bin_dir")
    args = parser.parse_args()

    if args.mode == "run":
        if not 0 <= args.delay <= 60:
            raise SystemExit("--delay must be between 0 and 60 seconds")
        port = args.port or free_port()
        other = "rank0" if args.first == "rank1" else "rank1"
        print(f"starting {args.first}, then {other} {args.delay:g} s later, on port {port}",
              file=sys.stderr, flush=True)
        results = run_pair(args.bin_dir, args.first, args.delay, port, args.twin, capture=False)
        codes = {which: result[0] for which, result in results.items()}
        for which, result in results.items():
            if result[2]:
                print(f"{which}: {result[2]}", file=sys.stderr)
        return 0 if all(code == 0 for code in codes.values()) else 1
    if args.mode == "check":
        failures = check_orders(args.bin_dir, args.readme, args.twin)
    else:
        failures = check_timeout(args.bin_dir)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
