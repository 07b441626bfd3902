"""Chapter 11's exercises, graded by what the ranks print (./tutorial check 11-ex1, 11-ex2).

A fault-tolerance exercise is right when a job that crashes and is restarted ends with the bits
of the job that never crashed. So each world size runs the program twice: once uninterrupted
(the reference), once with --crash-at-step under `ddprun --max-restarts 1` (the last rank dies
on the first attempt; ddprun starts every rank again), and the judge compares every rank's final
value, bit for bit (hex floats).
"""
import re
import tempfile

from grading import Exercise, Fail, run_ddprun

FINAL = r"final: x = (\S+) after (\d+) steps$"


def crash_and_compare(crash_at_step):
    """A runner: the uninterrupted job, then the crashed and restarted one; returns the second's
    Run with the first's as .reference."""
    def runner(bin_dir, program, world, exercise):
        with tempfile.TemporaryDirectory() as tmp:
            reference = run_ddprun(bin_dir, program, world, ["--snapshot", f"{tmp}/a"],
                                   exercise.deadline_s)
            if reference.returncode != 0:
                raise Fail(f"the job without a crash exited with code {reference.returncode}. "
                           f"{reference.report()}")
            args = ["--snapshot", f"{tmp}/b", "--crash-at-step", str(crash_at_step)]
            crashed = run_ddprun(bin_dir, program, world, args, exercise.deadline_s,
                                 flags=["--max-restarts", "1"])
        crashed.reference = reference
        return crashed
    return runner


def judge_complete_snapshot(run):
    if not re.search(r"crashing on purpose before step 12$", run.stdout, re.M):
        raise Fail(f"rank {run.world - 1} never crashed at step 12",
                   "keep the starter's crash: the last rank dies before --crash-at-step")
    resumed = run.value(0, r"attempt 1: starting at step (\d+)$", int,
                        "attempt 1: starting at step N")
    if resumed != 10:
        raise Fail(f"the restarted job started at step {resumed}; the snapshot of step 10 was "
                   "there to resume from", "keep the starter's snapshot every 5 steps")
    for rank in range(run.world):
        mine = run.value(rank, FINAL, str, "final: x = ... after N steps")
        ref = run.reference.value(rank, FINAL, str, "final: x = ... after N steps")
        if mine != ref:
            raise Fail(f"rank {rank} ends with x = {mine} after the crash and the restart; the "
                       f"uninterrupted job ends with x = {ref}",
                       "a resumed job continues bit for bit only if the snapshot holds "
                       "everything the loop changes, on every rank: what else does the loop "
                       "change besides x?")


def expected_fold(world, samples=42, batch_size=4, epochs=3):
    """Exercise 2's answer, worked out here: DistributedSampler without shuffle (torch 1.13: the
    indices 0..n-1 padded by repeating from the start, rank r taking every W-th from r), batches
    of batch_size, and x = (31 x + the global batch's index sum) mod 1000003 at every step.
    Returns (x, steps)."""
    per_rank = -(-samples // world)
    order = [i % samples for i in range(per_rank * world)]
    shards = [order[r::world] for r in range(world)]
    x, steps = 1, 0
    for _ in range(epochs):
        for start in range(0, per_rank, batch_size):
            x = (31 * x + sum(sum(s[start:start + batch_size]) for s in shards)) % 1000003
            steps += 1
    return x, steps


def judge_exact_position(run):
    want, steps = expected_fold(run.world)
    if not re.search(r"crashing on purpose before step 11$", run.stdout, re.M):
        raise Fail(f"rank {run.world - 1} never crashed at step 11",
                   "keep the starter's crash: the last rank dies before --crash-at-step")
    run.value(0, r"attempt 1: (starting at .*)$", str, "attempt 1: starting at ...")
    for name, job in (("the uninterrupted job", run.reference), ("the restarted job", run)):
        for rank in range(run.world):
            line = job.value(rank, r"(final: .*)$", str, "final: x = X after N steps")
            if line != f"final: x = {want} after {steps} steps":
                raise Fail(f"rank {rank} of {name} says '{line}'; {steps} steps from x = 1 end "
                           f"with x = {want}",
                           "the snapshot of step 10 falls in the middle of an epoch: which "
                           "epoch, and which step within it? No step may be done twice or "
                           "skipped")


EXERCISES = {
    "ex1": Exercise(
        title="a snapshot that holds everything the loop changes",
        judge=judge_complete_snapshot,
        worlds=(1, 2, 3),  # from 2 ranks on, each rank's own generator matters
        runner=crash_and_compare(12),
        hint="save and restore the momentum buffer and every rank's own generator state"),
    "ex2": Exercise(
        title="resume at the exact step, in the middle of an epoch",
        judge=judge_exact_position,
        worlds=(1, 2, 3),  # the snapshot of step 10 falls mid-epoch at each: steps 10, 4 and 2
        runner=crash_and_compare(11),
        hint="start in the epoch of the snapshot, at the step within it"),
}
