#!/usr/bin/env python3
"""Chapter 11's claim: a job that loses a rank and is restarted ends with the bits of the job that
never crashed.

  fault_tolerance_check.py BIN_DIR [--seed S] [--program NAME]

At 1, 2 and 3 ranks, the uninterrupted run gives the reference: every rank's final weights
(hex floats) and rank 0's fingerprint of the model and the optimizer. Then, each under
`ddprun --max-restarts 1`:
  - a crash before the first snapshot (--crash-at-step 5, snapshots every 10 steps): the restart
    finds no snapshot and starts again from step 0;
  - a crash after it (--crash-at-step 25): the restart resumes at step 20, mid-epoch;
  - a SIGKILL to a random rank at a random moment of the training (--step-delay-ms stretches it;
    the seed of those draws is printed, and --seed S replays them): the restart resumes from
    whatever snapshot was last written whole.
Each must end with the reference bits, say which attempt resumed where, and leave no snapshot
behind. Every job has a 120 s deadline. Exit 0 when every case holds, 1 otherwise.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

DEADLINE_S = 120
EVERY = ["--snapshot-every", "10"]
RESTARTS = ["--max-restarts", "1"]


def result(stdout, world):
    """Every rank's final line and rank 0's fingerprint, or None when a line is missing."""
    finals = sorted(re.findall(r"^\[rank (\d+)/\d+\] final: (.*)$", stdout, re.M))
    prints = re.findall(r"^\[rank 0/\d+\] fingerprint of the model and the optimizer: (\w+)$",
                        stdout, re.M)
    if len(finals) != world or len(prints) != 1:
        return None
    return tuple(finals), prints[0]


def job(bin_dir, program, world, snapshot, args, flags=()):
    run = ddprun(bin_dir, world, [f"{bin_dir}/{program}", "--snapshot", snapshot, *EVERY, *args],
                 deadline=DEADLINE_S, flags=flags)
    return run, result(run.stdout, world)


def killed_job(bin_dir, program, world, snapshot, rng):
    """A restartable job; one of its ranks, drawn at random, is SIGKILLed at a random moment of
    its training (timed from rank 0's "attempt 0:" line, printed once every rank has joined).
    Returns the finished process's output and what was killed when."""
    cmd = ddprun(bin_dir, world, [f"{bin_dir}/{program}", "--snapshot", snapshot, *EVERY,
                                  "--step-delay-ms", "6"], flags=RESTARTS)
    victim, after = rng.randrange(world), rng.uniform(0, 0.15)  # training takes 0.26 s or more
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    lines, training = [], threading.Event()

    def read():
        for line in job.stdout:
            lines.append(line)
            if re.match(r"\[rank 0/\d+\] attempt 0: ", line):
                training.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        if not training.wait(timeout=30):
            raise RuntimeError("rank 0 never said 'attempt 0:' within 30 s")
        ranks = Path(f"/proc/{job.pid}/task/{job.pid}/children").read_text().split()
        time.sleep(after)
        pid = int(ranks[victim])  # ddprun starts the ranks in order of local rank
        os.kill(pid, signal.SIGKILL)  # a rank that has ended is a zombie until ddprun reaps it
        what = f"rank {victim} (pid {pid}) killed {after:.3f} s into the training"
        err = job.stderr.read()
        job.wait(timeout=DEADLINE_S)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        reader.join()
    return subprocess.CompletedProcess(cmd, job.returncode, "".join(lines), err), what


def check(failures, name, run, got, reference, expect):
    """The job passed when it exited 0, printed the reference bits and every line of `expect`."""
    problems = []
    if run.returncode != 0:
        problems.append(f"exit code {run.returncode}")
    if got != reference:
        problems.append(f"ended with {got}, the uninterrupted run with {reference}")
    problems += [f"no line matching '{e}'" for e in expect if not re.search(e, run.stdout, re.M)]
    attempts = len(re.findall(r"^\[rank 0/\d+\] attempt \d+: ", run.stdout, re.M))
    if attempts != 2:
        problems.append(f"{attempts} attempts started, where the failure and one restart make 2")
    if problems:
        failures.append(f"{name}: " + "; ".join(problems) + "\n" + run.stdout + run.stderr)
    else:
        print(f"ok: {name}")


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("bin_dir")
    p.add_argument("--seed", type=int, default=None, help="replays the random kills of a failure")
    p.add_argument("--program", default="ch11_fault_tolerance")
    args = p.parse_args(argv[1:])
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"random kills drawn with --seed {seed}")
    rng = random.Random(seed)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = f"{tmp}/snapshot.bin"
        for world in (1, 2, 3):
            run, reference = job(args.bin_dir, args.program, world, snapshot, [])
            if run.returncode != 0 or reference is None:
                failures.append(f"{world} ranks: the uninterrupted run failed (exit code "
                                f"{run.returncode})\n{run.stdout}{run.stderr}")
                continue
            last = world - 1
            cases = [
                ("crash before the first snapshot", ["--crash-at-step", "5"],
                 [rf"^\[rank {last}/{world}\] crashing on purpose before step 5 \(attempt 0\)$",
                  rf"^\[rank 0/{world}\] attempt 1: no snapshot at .*, starting at step 0 of"]),
                ("crash after the first snapshot", ["--crash-at-step", "25"],
                 [rf"^\[rank {last}/{world}\] crashing on purpose before step 25 \(attempt 0\)$",
                  rf"^\[rank 0/{world}\] attempt 1: resumed from .* at step 20 "]),
            ]
            for name, flags, expect in cases:
                run, got = job(args.bin_dir, args.program, world, snapshot, flags, RESTARTS)
                check(failures, f"{world} ranks, {name}", run, got, reference, expect)
            run, what = killed_job(args.bin_dir, args.program, world, snapshot, rng)
            check(failures, f"{world} ranks, {what}", run, result(run.stdout, world), reference,
                  [rf"^\[rank 0/{world}\] attempt 1: (resumed from|no snapshot at) "])
            if os.path.exists(snapshot):
                failures.append(f"{world} ranks: a finished job left its snapshot behind")
                os.remove(snapshot)
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(f"(replay the random kills with --seed {seed})")
    else:
        print("OK: at 1, 2 and 3 ranks, a crash before and after the first snapshot and a SIGKILL "
              "at a random moment each ended with the uninterrupted run's bits")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
