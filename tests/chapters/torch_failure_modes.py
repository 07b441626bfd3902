#!/usr/bin/env python3
"""What PyTorch 1.13 does with chapter 10's collective mistakes: the claims of its README, tested.

usage: torch_failure_modes.py BIN_DIR TWIN_PY

Runs chapter 10's twin.py under BIN_DIR/ddprun at 2 ranks for each case, without and with
TORCH_DISTRIBUTED_DEBUG=DETAIL, and checks what the chapter says PyTorch does:
  mismatched-op     no error and no warning, with DETAIL too: both ranks end with tensor([1.]),
                    though rank 1 asked for the sum, 1.5 (DETAIL's fingerprint leaves out the
                    reduce op; this library's does not)
  mismatched-size   without DETAIL the job does not end cleanly with equal sums on both ranks;
                    with DETAIL: "Detected mismatch between collectives"
  mismatched-dtype  without DETAIL a rank aborts (gloo::EnforceNotMet, SIGABRT); with DETAIL:
                    "Detected mismatch between collectives"
  partial-collective without DETAIL the ranks fail only after the timeout, saying only that they
                    timed out or lost a peer; with DETAIL: "Detected mismatch between collectives"
  skipped-barrier   monitored_barrier(wait_all_ranks=True) on Gloo: rank 0 fails naming rank 1
                    ("Ranks 1 failed to pass monitoredBarrier in 2000 ms")
Each job has a 60 s deadline. Exit 0 when every claim holds, 1 otherwise.
"""
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

TIMEOUT_S = 3  # the twin's --timeout


def run(bin_dir, twin, case, detail):
    # ddprun runs twin.py as torchrun would, with Debian's Python (PYTHON_EXEC), which has torch.
    env = dict(os.environ, TORCH_DISTRIBUTED_DEBUG="DETAIL" if detail else "OFF",
               PYTHON_EXEC="/usr/bin/python3")
    start = time.monotonic()
    p = ddprun(bin_dir, 2, [twin, case, "--timeout", str(TIMEOUT_S)], deadline=60, env=env)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def results(output):
    return re.findall(r"\[rank (\d)/2\] result: (.*)", output)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    bin_dir, twin = sys.argv[1], sys.argv[2]
    failures, claims = [], []

    def claim(ok, what, output):
        claims.append(what)
        print(("holds:  " if ok else "FAILS:  ") + what)
        if not ok:
            failures.append(what)
            print("  " + output.replace("\n", "\n  "))

    mismatch = "Detected mismatch between collectives"
    code, output, _ = run(bin_dir, twin, "mismatched-op", detail=True)
    claim(code == 0 and mismatch not in output and
          sorted(results(output)) == [("0", "tensor([1.])"), ("1", "tensor([1.])")],
          "mismatched-op with DETAIL: no error; both ranks end with tensor([1.]), though rank 1 "
          "asked for the sum, 1.5", output)
    code, output, _ = run(bin_dir, twin, "mismatched-op", detail=False)
    claim(code == 0 and len(results(output)) == 2,
          "mismatched-op without DETAIL: no error either", output)
    for case in ("mismatched-size", "mismatched-dtype", "partial-collective"):
        code, output, _ = run(bin_dir, twin, case, detail=True)
        claim(code != 0 and mismatch in output, f"{case} with DETAIL: '{mismatch}'", output)
    code, output, _ = run(bin_dir, twin, "mismatched-size", detail=False)
    sums = {value for _, value in results(output)}
    claim(not (code == 0 and len(sums) == 1),
          "mismatched-size without DETAIL: no clean run with one sum on both ranks", output)
    code, output, _ = run(bin_dir, twin, "mismatched-dtype", detail=False)
    claim(code == 134 and "EnforceNotMet" in output,
          "mismatched-dtype without DETAIL: a rank aborts (SIGABRT, gloo::EnforceNotMet)", output)
    code, output, elapsed = run(bin_dir, twin, "partial-collective", detail=False)
    claim(code != 0 and elapsed >= TIMEOUT_S and mismatch not in output,
          f"partial-collective without DETAIL: fails only after the {TIMEOUT_S} s timeout "
          f"(took {elapsed:.1f} s), without naming the calls", output)
    code, output, _ = run(bin_dir, twin, "skipped-barrier", detail=False)
    named = "[rank 0/2] error: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 2000 ms"
    claim(code != 0 and named in output,
          "skipped-barrier: monitored_barrier(wait_all_ranks=True) on rank 0 names rank 1", output)
    print(f"{len(claims) - len(failures)} of {len(claims)} claims hold")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
