"""Chapter 10's exercises, graded by what the ranks, the library and ddprun print (./tutorial check
10-ex1, 10-ex2, 10-ex3).

These jobs go wrong on purpose: a rank comes late to a barrier, ranks call all_reduce differently,
a rank names another root. Each judge knows what the library must say about the mistake, and
which rank must say it, and checks that the job still ends as it should, within its deadline.
"""
import re

from grading import Exercise, Fail, run_ddprun

# ---- Exercise 1: a straggler at monitored_barrier


def judge_straggler(run):
    w, straggler = run.world, run.world - 1
    verdict = f"rank {straggler} did not arrive within 1 s"
    for rank in range(w):
        told = run.value(rank, r"barrier 1: (.*)$", str, "barrier 1: ...")
        if w > 1 and verdict not in told:
            said = ("was told nothing at barrier 1 (a plain barrier(), or none, says nothing "
                    "of a straggler)" if told == "told nothing" else
                    f"was told '{told.removeprefix('told: ')}' at barrier 1")
            raise Fail(f"rank {rank} {said}. Rank {straggler} came 1.5 s late for a barrier that "
                       f"waits 1 s: monitored_barrier tells every rank, the straggler too, "
                       f"'{verdict}'",
                       "a plain barrier waits without a word; which barrier names the rank "
                       "that is late, and how does it tell you?")
    times = {}
    for rank in range(w):
        line = run.value(rank, r"barrier 2: (.*)$", str, "barrier 2: ...")
        m = re.fullmatch(r"arrived at (\d+) ms, left at (\d+) ms, (.*)", line)
        if not m:
            raise Fail(f"rank {rank} printed 'barrier 2: {line}', not the starter's line",
                       "keep the program's print lines as the starter has them: the grader reads "
                       "them")
        if m.group(3) != "told nothing":
            said = m.group(3).removeprefix("told: ")
            raise Fail(f"rank {rank} was told '{said}' at barrier 2; a monitored_barrier of 5 s "
                       "lets a rank that is 1.5 s late through",
                       "the second barrier must wait long enough for a rank that is 1.5 s "
                       "late")
        times[rank] = int(m.group(1)), int(m.group(2))
    last_in = max(arrived for arrived, _ in times.values())
    for rank, (_, left) in times.items():
        if left < last_in:
            raise Fail(f"rank {rank} left barrier 2 {last_in - left} ms before rank {straggler} "
                       f"arrived at it: there was no barrier there",
                       "step 2 needs a barrier that every rank calls")


# ---- Exercise 2: DIST_DEBUG=DETAIL's check by hand


def lines_of_step(run, step):
    """{rank: what it printed after "STEP: "}. A rank may be missing only from a job that failed:
    once one rank exits with an error, ddprun stops the others, perhaps before they print."""
    printed = {}
    for rank in range(run.world):
        found = [line[len(step) + 2:] for line in run.lines(rank) if line.startswith(step + ": ")]
        if found:
            printed[rank] = found[0]
        elif run.returncode == 0:
            raise Fail(f"rank {rank} of {run.world} printed no line '{step}: ...'",
                       "keep the program's print lines as the starter has them: the grader reads "
                       "them")
    if not printed:
        raise Fail(f"the job exited with code {run.returncode} before any rank printed "
                   f"'{step}: ...'. {run.report()}")
    return printed


def judge_fingerprint(run):
    w = run.world
    ones = ", ".join(f"{w}." for _ in range(4))
    for rank, got in lines_of_step(run, "same call").items():
        if got != f"summed tensor([{ones}])":
            raise Fail(f"rank {rank}'s same call on every rank gave '{got}'; it should sum to "
                       f"'summed tensor([{ones}])'",
                       "when every rank's call is the same, go on with the all_reduce")
    # Step 2: rank r reduces 2 + r elements; step 3: rank 0 asks for MAX, the others for SUM.
    cases = [("sizes differ", "sizes", [f"{2 + r} elements, torch.float32, SUM" for r in range(w)]),
             ("ops differ", "reduce ops",
              [f"2 elements, torch.float32, {'MAX' if r == 0 else 'SUM'}" for r in range(w)])]
    for step, what, calls in cases:
        for rank, got in lines_of_step(run, step).items():
            if w == 1:
                if got != "summed tensor([1., 1.])":
                    raise Fail(f"rank 0 alone printed '{step}: {got}'; one rank cannot disagree "
                               "with itself, so it should sum to tensor([1., 1.])")
                continue
            if not got.startswith("refused: "):
                raise Fail(f"rank {rank} let through the all_reduce whose {what} differ from rank "
                           f"to rank ('{step}: {got}'); every rank must refuse it",
                           "which parts of a call must agree on every rank? Compare each one")
            missing = [f"rank {r}: {call}" for r, call in enumerate(calls)
                       if f"rank {r}: {call}" not in got]
            if missing:
                own = (" It is the library's own error from inside all_reduce, which compares "
                       "sizes and ops too, but then closes the group."
                       if "the ranks called it" in got else "")
                said = got[len("refused: "):]
                said = said if len(said) <= 160 else said[:157] + "..."
                raise Fail(f"rank {rank} refused the all_reduce whose {what} differ, but its "
                           f"error does not name '{missing[0]}' (it says '{said}').{own}",
                           "the error must name every rank's call, so every rank needs every "
                           "other rank's before anyone enters the all_reduce")
    for rank, got in lines_of_step(run, "afterwards").items():
        if got != f"tensor([{w}.])":
            raise Fail(f"rank {rank}'s all_reduce after the refused calls gave '{got}', not "
                       f"tensor([{w}.])", "throw before the all_reduce, on every rank alike")
    if run.returncode != 0:
        raise Fail(f"the job exited with code {run.returncode}. {run.report()}",
                   "a refused call must leave the group usable: refuse it before the all_reduce")


# ---- Exercise 3: a broadcast with another root on one rank
# The job runs twice per world size, both times with DIST_DEBUG=DETAIL and a short --timeout:
# with --mistake it must fail, with the library's table of each rank's call; without, succeed.

DETAIL = {"DIST_DEBUG": "DETAIL"}


def run_with_and_without_mistake(bin_dir, program, world, exercise):
    args = ["--timeout", "5"]
    broken = run_ddprun(bin_dir, program, world, ["--mistake", *args], exercise.deadline_s, DETAIL)
    fixed = run_ddprun(bin_dir, program, world, args, exercise.deadline_s, DETAIL)
    fixed.broken = broken
    return fixed


def judge_broadcast_root(run):
    w, last = run.world, run.world - 1
    broken, fixed = run.broken, run
    text = broken.stdout + broken.stderr
    shown = {int(r): int(src) for r, src in
             re.findall(r"^\s*rank (\d+): broadcast\(src (\d+),", text, re.M)}
    if broken.returncode == 0:
        roots = [broken.value(r, r"broadcast from root (\d+):", int) for r in range(w)]
        same = len(set(roots)) == 1
        raise Fail("with --mistake the job succeeded (exit code 0): "
                   + (f"every rank called broadcast from root {roots[0]}, the same call on every "
                      "rank, which no check can call a mistake" if same else
                      f"the ranks' roots were {roots}"),
                   "with --mistake, make only the last rank name another root (its own rank)")
    if "the ranks' calls differ" not in text or not shown:
        raise Fail(f"with --mistake the job failed (exit code {broken.returncode}), but without "
                   f"DIST_DEBUG=DETAIL's table of the ranks' calls. {broken.report()}",
                   "make the mistake in broadcast's root only: every rank still calls broadcast, "
                   "with the same tensor")
    expected = {r: (last if r == last else 0) for r in range(w)}
    for r in range(w):
        if shown.get(r) != expected[r]:
            said = "no call" if r not in shown else f"broadcast(src {shown[r]}, ...)"
            raise Fail(f"with --mistake, DIST_DEBUG=DETAIL shows {said} for rank {r}; it should "
                       f"show broadcast(src {expected[r]}, ...): only the last rank, {last}, "
                       f"names another root, its own rank",
                       "with --mistake, the last rank and only it sets root to its own rank")
    # The exit code before the lines: a rank that fails after it printed may stop the others
    # (ddprun ends the job at the first failure) before they print theirs.
    if fixed.returncode != 0:
        raise Fail(f"without --mistake the job exited with code {fixed.returncode}. "
                   f"{fixed.report()}", "without --mistake, every rank keeps root 0")
    weights = "tensor([0.2500, 0.2500, 0.2500, 0.2500])"
    for r in range(w):
        got = fixed.value(r, r"(broadcast from root .*)$", str, "broadcast from root ...")
        if got != f"broadcast from root 0: weights {weights}":
            raise Fail(f"without --mistake rank {r} printed '{got}'; every rank should receive "
                       f"rank 0's weights: 'broadcast from root 0: weights {weights}'",
                       "without --mistake, every rank keeps root 0")


EXERCISES = {
    "ex1": Exercise(
        title="a straggler named by monitored_barrier, then let through",
        judge=judge_straggler,
        worlds=(2, 3),  # one rank cannot be late for itself
        hint="which barrier says who is late, and what does every rank read from it?"),
    "ex2": Exercise(
        title="DIST_DEBUG=DETAIL's check by hand, for one all_reduce",
        judge=judge_fingerprint,
        worlds=(1, 2, 3),
        any_exit_code=True,  # the judge reads the starter's lines first, then the exit code
        args=("--timeout", "5"),
        hint="every rank must know every rank's call before any rank enters the all_reduce"),
    "ex3": Exercise(
        title="a broadcast with another root on one rank, and what DIST_DEBUG=DETAIL says",
        judge=judge_broadcast_root,
        worlds=(2, 3),  # one rank has no other rank to disagree with
        runner=run_with_and_without_mistake,
        any_exit_code=True,  # the run with --mistake must fail; the judge looks at both
        deadline_s=30,
        hint="with --mistake, the last rank and only it calls broadcast with its own rank as root"),
}
