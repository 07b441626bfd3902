"""Chapter 05's exercises, graded by what the ranks print (./tutorial check 05-ex1, 05-ex2).

Ranks print concurrently, so the order in which their lines reach the terminal proves nothing; the
judges read what the ranks recorded instead: the log file's lines as rank 0 read them back (ex1),
and what each rank saw and after how long (ex2). tools/grader/grading.py runs the programs.
"""
from grading import Exercise, Fail

TIMEOUT_S = 10  # the group's timeout in 05-ex2: a waiting rank that is told "at once" is far below


def judge_take_turns(run):
    w = run.world
    lines = [line for line in run.lines(0) if line.startswith("log line ")]
    if not lines:
        raise Fail("rank 0 printed no 'log line N: ...' lines",
                   "keep the starter's reading of the log after the TODO part")
    written = [line.partition(": ")[2] for line in lines]
    expected = [f"rank {r}" for r in range(w)]
    if sorted(written) != sorted(expected):
        raise Fail(f"rank 0 read the log back as {', '.join(written)}; every rank writes one "
                   f"line, so it should hold {', '.join(expected)} (in some order)",
                   "each rank appends its line once, in its own turn")
    if written != expected:
        raise Fail(f"rank 0 read the log back as {', '.join(written)}; in turns it is "
                   f"{', '.join(expected)}",
                   "a barrier holds a rank only until every rank has called it: does every "
                   "rank, writer or not, call the same barriers?")


def judge_rank0_fails(run):
    w = run.world
    for rank in range(w):
        line = next((x for x in run.lines(rank) if x.startswith("ran the download: ")), None)
        if line is None:
            raise Fail(f"rank {rank} never said what it saw: it was still waiting when the job "
                       f"ended. {run.report()}",
                       "rank 0's exception skipped the barrier that releases the others: they "
                       "can only wait. How do they learn that rank 0 failed?")
        ran = line.split(";")[0].endswith("yes")
        waited, _, seen = line.partition("after ")[2].partition(" ms saw: ")
        if rank == 0:
            if not ran or "404" not in seen:
                raise Fail(f"rank 0 says '{line}'; it runs the download first and sees its own "
                           "error, the mirror's 404",
                           "rank 0 should see its own exception: where is it caught?")
            continue
        if ran:
            raise Fail(f"rank {rank} ran the download although rank 0's had failed ('{line}'): "
                       "rank 0's failure never reached it",
                       "zero_first tells the other ranks only what comes out of its lambda: "
                       "does the failure get out?")
        if "rank 0 failed inside zero_first" not in seen:
            raise Fail(f"rank {rank} saw '{seen}'; it should be told that rank 0 failed inside "
                       "zero_first",
                       "with post C's guard, rank 0's exception skips the barrier that releases "
                       "the others: they learn nothing until rank 0 goes away or the timeout "
                       "ends")
        if int(waited) > TIMEOUT_S * 1000 // 2:
            raise Fail(f"rank {rank} learnt of rank 0's failure after {waited} ms, near the "
                       f"{TIMEOUT_S} s timeout; it should know at once")


EXERCISES = {
    "ex1": Exercise(
        title="ranks take turns, using only barrier()",
        judge=judge_take_turns,
        worlds=(2, 3, 4),
        deadline_s=30,
        args=("--timeout", "10"),
        hint="a rank may write only once every rank before it has written, and barrier() is "
             "the only way to wait; every rank must make the same calls"),
    "ex2": Exercise(
        title="rank 0 fails inside zero_first; the others are told at once",
        judge=judge_rank0_fails,
        worlds=(2, 3),
        deadline_s=30,
        args=("--timeout", str(TIMEOUT_S)),
        # The judge reads what each rank reports, whatever the exit code: a version that lets an
        # error end a rank is told which rank said nothing, rather than only "exit code 1".
        any_exit_code=True,
        hint="the waiting ranks must learn of rank 0's failure without waiting for their "
             "timeout"),
}
