"""When do the other ranks hang if rank 0 fails inside post C's torch_distributed_zero_first?

Checked with PyTorch (gloo) on this machine, case by case. Each case starts two ranks by hand
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set for each, as two terminals would), so that no
launcher stops the job for us, except the case that shows what a launcher does. The group's
timeout is 5 s here so that a hang ends quickly; PyTorch's default is 30 minutes.

  exits         rank 0's body raises and rank 0's process exits: rank 1, waiting in barrier(),
                fails as soon as the connection closes ("Connection closed by peer")
  launcher      the same under a launcher (ddprun here; torchrun likewise stops the ranks it
                started when one fails): the job ends at once
  carries_on    rank 0 catches the error and carries on: rank 1 waits in barrier() for the whole
                timeout ("Timed out waiting 5000ms for recv operation to complete")
  next_barrier  rank 0 catches the error, and its next barrier() pairs with the one rank 1 is
                waiting in: rank 1 is let into the body, and finds no data set
  published     the fix, zero_first below (dist::zero_first's protocol): rank 1 is told at once
                that rank 0 failed, and rank 0's own error goes on unchanged

usage: post_c_failures.py DDPRUN          run every case and check it (the test
                                          05_barrier_post_c_failures); exit 0 when all hold
       post_c_failures.py --rank CASE     one rank of one case (started by the above)
"""
import contextlib
import datetime
import os
import subprocess
import sys
import tempfile
import time

# The project's helpers (tools/pylib): a free port, processes with a deadline, ddprun's command.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                "pylib"))
from disttut import processes  # noqa: E402
from disttut.ddprun import ddprun as ddprun_line  # noqa: E402
from disttut.ports import free_port  # noqa: E402

PYTHON = "/usr/bin/python3"
TIMEOUT_S = 5
DEADLINE_S = 60  # for a whole case; nothing here may hang


# ---- What the ranks run -------------------------------------------------------------------------

@contextlib.contextmanager
def torch_distributed_zero_first(rank):
    """Post C's context manager, unchanged."""
    import torch
    if rank not in [-1, 0]:
        torch.distributed.barrier()
    yield
    if rank == 0:
        torch.distributed.barrier()


# The fix: post C's guard with its barrier turned into an all_reduce(MIN) of a status, as
# dist::zero_first does; the twin holds it (a waiting rank learns whether rank 0's body succeeded).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twin import zero_first  # noqa: E402


def rank_main(case):
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    data = os.path.join(os.environ["CASE_DIR"], "dataset.txt")  # never written: the download fails
    # Rank 0 goes on only once rank 1 is out of init_process_group: torch's init ends with a
    # barrier in rank 0's store, and a rank 0 that died before rank 1 left it would break the
    # store under rank 1 ("Connection reset by peer", "Broken pipe"), not show what the guard does.
    ready = os.path.join(os.environ["CASE_DIR"], "rank1.ready")
    if rank == 1:
        open(ready, "w").close()
    else:
        deadline = time.monotonic() + DEADLINE_S
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.01)
    guard = zero_first if case == "published" else torch_distributed_zero_first
    start = time.monotonic()
    try:
        with guard(rank):
            if rank == 0:
                raise OSError("download failed: the mirror answered 404 (on purpose)")
            with open(data) as f:
                f.read()
    except Exception as e:  # noqa: BLE001 (every outcome is reported)
        print(f"rank {rank}: after {time.monotonic() - start:.1f} s: {type(e).__name__}: {e}",
              flush=True)
        if rank != 0 or case in ("exits", "launcher", "published"):
            raise
        # Rank 0 catches its error and carries on with other work: until rank 1 has given up
        # (its report file appears), or, in next_barrier, into its next barrier().
        if case == "next_barrier":
            dist.barrier()
            print("rank 0: its next barrier() went through", flush=True)
        else:
            report = os.path.join(os.environ["CASE_DIR"], "rank1.done")
            deadline = time.monotonic() + DEADLINE_S
            while not os.path.exists(report) and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        if rank == 1:
            open(os.path.join(os.environ["CASE_DIR"], "rank1.done"), "w").close()


# ---- The cases, checked ---------------------------------------------------------------------------

def by_hand(case, case_dir):
    """Two ranks started by hand; returns [(exit code, output)] per rank."""
    port = free_port()
    ranks = {}
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), CASE_DIR=case_dir)
        ranks[rank] = processes.start([PYTHON, __file__, "--rank", case], env,
                                      stderr=subprocess.STDOUT)
    try:
        return [(code, out) for code, out, _ in processes.finish(ranks, DEADLINE_S).values()]
    except processes.DeadlinePassed as late:
        return [(code, out + ("\n(stopped at the deadline)" if rank in late.late else ""))
                for rank, (code, out, _) in late.results.items()]


def under_ddprun(ddprun, case_dir):
    env = dict(os.environ, CASE_DIR=case_dir, PYTHON_EXEC=PYTHON)  # as torchrun runs a script
    run = ddprun_line(os.path.dirname(os.path.abspath(ddprun)), 2, [__file__, "--rank", "launcher"],
                      deadline=DEADLINE_S, env=env)
    return run.returncode, run.stdout + run.stderr


def last_line(text, rank):
    lines = [line for line in text.splitlines() if line.startswith(f"rank {rank}:")]
    return lines[-1] if lines else "(no report)"


def main(argv):
    if len(argv) == 3 and argv[1] == "--rank":
        rank_main(argv[2])
        return 0
    if len(argv) != 2:
        print(__doc__)
        return 2
    ddprun = argv[1]
    failures = 0

    def verdict(case, holds, what, evidence):
        nonlocal failures
        failures += 0 if holds else 1
        print(f"{case}: {'' if holds else 'NOT '}{what}\n    {evidence}")

    with tempfile.TemporaryDirectory() as scratch:
        def fresh(case):
            path = os.path.join(scratch, case)
            os.makedirs(path)
            return path

        (code0, out0), (code1, out1) = by_hand("exits", fresh("exits"))
        verdict("exits", code0 != 0 and code1 != 0 and "Connection closed by peer" in out1
                and "Timed out" not in out1,
                "rank 1 failed as soon as rank 0's process was gone, no timeout",
                last_line(out1, 1))

        start = time.monotonic()
        code, out = under_ddprun(ddprun, fresh("launcher"))
        took = time.monotonic() - start
        verdict("launcher", code != 0 and "first failure: rank 0" in out and "Timed out" not in out,
                "the launcher ended the job when rank 0 failed, no timeout",
                f"ddprun exited {code} after {took:.1f} s: "
                + next((line for line in out.splitlines() if "first failure" in line), out[-200:]))

        (code0, out0), (code1, out1) = by_hand("carries_on", fresh("carries_on"))
        verdict("carries_on", code0 == 0 and code1 != 0
                and f"Timed out waiting {TIMEOUT_S * 1000}ms for recv operation to complete" in out1,
                f"rank 1 waited in barrier() for the whole timeout ({TIMEOUT_S} s here)",
                last_line(out1, 1))

        (code0, out0), (code1, out1) = by_hand("next_barrier", fresh("next_barrier"))
        verdict("next_barrier", code0 == 0 and code1 != 0 and "FileNotFoundError" in out1,
                "rank 0's next barrier() let rank 1 into the body, which found no data set",
                last_line(out1, 1))

        (code0, out0), (code1, out1) = by_hand("published", fresh("published"))
        verdict("published", code0 != 0 and "OSError: download failed" in out0 and code1 != 0
                and "RuntimeError: rank 0 failed inside zero_first" in out1
                and "Timed out" not in out1,
                "rank 1 was told at once that rank 0 failed; rank 0 kept its own error",
                last_line(out1, 1))

    print("OK: post C's guard hangs the others only where rank 0 lives on; publishing the status "
          "tells them at once" if not failures else f"MISMATCH: {failures} case(s) did not hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
