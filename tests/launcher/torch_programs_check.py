#!/usr/bin/env python3
"""Real PyTorch programs (gloo, CPU) launched by command lines pasted from torch's launchers.

  torch_programs_check.py DDPRUN PYTHON

PYTHON is the Python with torch (Debian's /usr/bin/python3 with python3-torch); ddprun is told
to use it through PYTHON_EXEC, as torchrun would be. Exit 77 when it cannot import torch.

  - Post C's program (post_c/main.py, made CPU-runnable), launched in the post with
        python -m torch.distributed.launch --nproc_per_node N main.py
    pasted as `ddprun --local-rank-arg=underscore --nproc_per_node N main.py`, at 2 and 3 ranks:
    every rank prints the world size, its tensor (1..N shifted by N * local_rank) and the sum of
    every rank's, worked out here by hand.
  - A torch DDP job that fails once (ddp_fails_once.py), launched with a torchrun line pasted as
        ddprun --standalone --nproc-per-node 2 --max-restarts 1 ddp_fails_once.py
    ddprun restarts it once, every rank runs attempt 1 to the end, and each rank's weight is the
    closed form's (worked out here too).
Every line gets --standalone before the pasted flags, so that tests running side by side do not
meet at port 29500 (the launchers' default). Each run has a 120 s deadline. Exit 0 when all hold.
"""
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEADLINE_S = 120


def launch(ddprun, python, pasted, cwd):
    cmd = [ddprun, "--standalone", *shlex.split(pasted)]
    env = dict(os.environ, PYTHON_EXEC=python)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=DEADLINE_S, check=False)


def tensor_text(values):
    return "tensor([" + ", ".join(str(v) for v in values) + "])"


def post_c_lines(n):
    """What post C's main.py prints at n ranks on one machine (local_rank = rank), by hand."""
    lines = [f"全局进程数:  {n}"] * n
    for rank in range(n):
        lines.append(tensor_text([j + 1 + n * rank for j in range(n)]))
    sums = [sum(j + 1 + n * rank for rank in range(n)) for j in range(n)]
    lines += [tensor_text(sums)] * n
    return lines


def check_post_c(ddprun, python, n):
    pasted = f"--local-rank-arg=underscore --nproc_per_node {n} main.py"
    run = launch(ddprun, python, pasted, HERE / "post_c")
    want, got = Counter(post_c_lines(n)), Counter(run.stdout.splitlines())
    if run.returncode == 0 and want == got:
        print(f"ok: post C at {n} ranks: ddprun {pasted}")
        return []
    return [f"post C at {n} ranks: ddprun {pasted}: exit code {run.returncode}\n"
            f"  missing: {sorted((want - got).elements())}\n"
            f"  unexpected: {sorted((got - want).elements())}\n{run.stderr}"]


def check_fails_once(ddprun, python):
    world, steps, lr, w0 = 2, 4, 0.05, 0.5
    pasted = f"--nproc-per-node {world} --max-restarts 1 ddp_fails_once.py"
    run = launch(ddprun, python, pasted, HERE)
    out = run.stdout
    expected = 3 + (w0 - 3) * (1 - lr * 2 * (world + 1) * (2 * world + 1) / 6) ** steps
    finals = [float(w) for w in re.findall(r"^\[rank \d+/2\] attempt 1: w = (\S+) after 4 steps$",
                                           out, re.M)]
    problems = []
    if run.returncode != 0:
        problems.append(f"exit code {run.returncode}, not 0")
    if "ddprun: attempt 0 has ended; restarting every rank (restart 1" not in run.stderr:
        problems.append("ddprun did not say that it restarted the ranks")
    if "[rank 1/2] attempt 0: failing on purpose at step 2" not in out.splitlines():
        problems.append("the last rank did not fail on the first attempt")
    for rank in range(world):
        for attempt in (0, 1):
            if f"[rank {rank}/2] attempt {attempt}: starting" not in out.splitlines():
                problems.append(f"rank {rank} did not start attempt {attempt}")
    if len(finals) != world or any(abs(w - expected) > 1e-5 for w in finals):
        problems.append(f"the final weights {finals} are not {world} times {expected:.6f}")
    if problems:
        return [f"ddprun {pasted}: " + "; ".join(problems) + f"\n{out}{run.stderr}"]
    print(f"ok: ddprun {pasted}: restarted once, every rank ends with w = {expected:.6f}")
    return []


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    ddprun, python = str(Path(argv[1]).resolve()), argv[2]
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=60,
                           check=False)
    if probe.returncode != 0:
        print(f"skipped: {python} cannot import torch (sudo apt-get install python3-torch)")
        return 77
    failures = check_post_c(ddprun, python, 2) + check_post_c(ddprun, python, 3)
    failures += check_fails_once(ddprun, python)
    for failure in failures:
        print("FAIL:", failure)
    print("OK" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
