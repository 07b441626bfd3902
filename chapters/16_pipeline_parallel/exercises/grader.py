"""Chapter 16's exercises, graded by what the ranks print (./tutorial check 16-ex1, 16-ex2).

Exercise 1 (1F1B by hand): each rank prints the order it ran, its peak stash, the fingerprint of
its weights after training and that of one process's on the same micro-batches. The judge checks
the order is a schedule (every micro-batch forwarded once, in order, then backwarded once, in
order, never before its forward), that the job ended (an order that waits for a message no stage
sends stops at the --timeout), that the stash peaked at 1F1B's min(p - s, m), worked out here,
and that the weights are one process's.

Exercise 2 (the bubble): rank 0 prints every stage's spans of one GPipe step; the judge works out
the window, each stage's idle time and the bubble from those same spans, and the fewest
micro-batches whose closed-form bubble (p - 1)/(m + p - 1) is under the target, and compares.
"""
import re

from grading import Exercise, Fail

# ---- Exercise 1: the 1F1B order by hand

M = 3  # below p at 4 ranks, above it at 2: min(p - s, m) takes both sides


def parse_order(run, rank):
    text = run.value(rank, r"^order:((?: [FB]\d+)*)$", str, "order: F0 F1 ... B0 ...")
    return [(step[0], int(step[1:])) for step in text.split()]


def check_schedule(rank, order, m):
    forwards = [i for kind, i in order if kind == "F"]
    backwards = [i for kind, i in order if kind == "B"]
    if forwards != list(range(m)) or backwards != list(range(m)):
        raise Fail(f"stage {rank} runs F {forwards} and B {backwards}; a step runs each of the "
                   f"{m} micro-batches' forward once and backward once, each in order 0..{m - 1}",
                   "count the forwards and the backwards your order emits")
    done = set()
    for kind, i in order:
        if kind == "F":
            done.add(i)
        elif i not in done:
            raise Fail(f"stage {rank} runs B{i} before F{i}: a backward needs its forward's stash",
                       "in the steady state a stage runs a forward, then a backward")


def judge_one_f_one_b(run):
    w = run.world
    orders = [parse_order(run, r) for r in range(w)]
    for rank, order in enumerate(orders):
        check_schedule(rank, order, M)
    if run.returncode != 0:
        raise Fail(f"the job exited with code {run.returncode}: a stage waited for a message no "
                   f"stage sent (a deadlock, stopped by the --timeout). {run.report()}",
                   "stage s receives micro-batch i's activations only after stage s - 1 ran F i: "
                   "the warm-up is longest on the first stage, shortest on the last")
    for rank in range(w):
        peak = run.value(rank, r"^peak stash: (\d+)$", int, "peak stash: N")
        want = min(w - rank, M)
        if peak != want:
            raise Fail(f"stage {rank} of {w} held {peak} micro-batches at once; 1F1B holds "
                       f"min(p - s, m) = {want}",
                       "the warm-up is min(p - s - 1, m) forwards: then each forward is followed "
                       "by a backward")
    for rank in range(w):
        mine = run.value(rank, r"^weights: ([0-9a-f]{16})$", str, "weights: <16 hex digits>")
        ref = run.value(rank, r"^one process: ([0-9a-f]{16})$", str,
                        "one process: <16 hex digits>")
        if mine != ref:
            raise Fail(f"stage {rank}'s weights (fingerprint {mine}) differ from one process's "
                       f"on the same micro-batches ({ref})",
                       "the gradients of the m micro-batches add up, then are divided by m once")


# ---- Exercise 2: the bubble, read from a trace

TARGET = 0.2


def judge_bubble(run):
    w = run.world
    spans = {}
    for line in run.lines(0):
        m = re.match(r"^span: stage (\d+) ([FB]\d+) (\S+) (\S+)$", line)
        if m:
            spans.setdefault(int(m.group(1)), []).append((float(m.group(3)), float(m.group(4))))
    if sorted(spans) != list(range(w)):
        raise Fail(f"rank 0 printed spans of stages {sorted(spans)}; the step ran {w}",
                   "keep the program's print lines as the starter has them: the grader reads them")
    start = min(b for stage in spans.values() for b, _ in stage)
    end = max(e for stage in spans.values() for _, e in stage)
    window = end - start
    idle = [window - sum(e - b for b, e in spans[s]) for s in range(w)]
    for s in range(w):
        got = run.value(0, rf"^idle: stage {s} (\S+) us$", float, f"idle: stage {s} X us")
        if abs(got - idle[s] * 1e6) > 0.1:
            raise Fail(f"stage {s}'s idle time is {got:.3f} us; from its spans it is "
                       f"{idle[s] * 1e6:.3f} us (a window of {window * 1e6:.3f} us)",
                       "the window is the whole step's, from the first span's start on any stage "
                       "to the last span's end on any stage, the same for every stage")
    bubble = sum(idle) / (w * window)
    got = run.value(0, r"^bubble: (\S+)$", float, "bubble: X")
    if abs(got - bubble) > 1e-4:
        raise Fail(f"the bubble is printed as {got:.6f}; from the spans it is {bubble:.6f}",
                   "the bubble is every stage's idle time over p windows")
    want = 1
    while (w - 1) / (want + w - 1) >= TARGET:
        want += 1
    got = run.value(0, r"^microbatches for a bubble under \S+: (\d+)$", int,
                    "microbatches for a bubble under T: N")
    if got != want:
        raise Fail(f"{got} micro-batches on {w} stages give a bubble of "
                   f"{(w - 1) / (got + w - 1):.4f}; the fewest under {TARGET} are {want}",
                   "(p - 1)/(m + p - 1) must be under the target, not equal to it")


EXERCISES = {
    "ex1": Exercise(
        title="the 1F1B order by hand",
        judge=judge_one_f_one_b,
        worlds=(2, 4),
        args=("--microbatches", str(M), "--timeout", "5"),
        any_exit_code=True,
        hint="min(p - s - 1, m) forwards, then a forward and a backward in turn, then the "
             "backwards left"),
    "ex2": Exercise(
        title="the bubble read from a trace, and the micro-batches that bring it under 20%",
        judge=judge_bubble,
        worlds=(2, 4),
        args=("--target", str(TARGET)),
        hint="the window is the whole step's; the bubble is the idle time over p windows"),
}
