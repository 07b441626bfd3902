"""Chapter 13's exercises, graded by what the ranks print (./tutorial check 13-ex1, 13-ex2).

Exercise 1 (Join by hand) is replayed here in plain Python: the ranks' batches (--counts 7,4,2,
rank r the r-th), each step's gradient w - t(r, s) from the ranks that still have a batch, zeros
from the others, summed and divided by the world size, one SGD step on every rank, until no rank
has a batch. The steps, the ranks' agreement and the final weights are checked, and a wrong
result is compared with the usual mistakes' replays to name the one made.

Exercise 2 (PowerSGD's bytes) is recomputed from the model's shapes: PowerSGD sends (n + m) r
values for a matrix of n x m when (n + m) r * 2 < n m, the whole matrix otherwise, and a bias
whole; 4 bytes a value to each of the W - 1 others.
"""
import re

from grading import Exercise, Fail

# ---- Exercise 1: Join by hand

COUNTS, LR = (7, 4, 2), 0.25
TOLERANCE = 1e-5  # float32 against this double replay: far below the mistakes' effects (> 1e-2)


def target(rank, step):
    return [((rank * 3 + step * 5 + i) % 7 - 3) / 4 for i in range(4)]


def replay(world, divide="world", joined="zeros"):
    """The final w. divide: "world" or "training" (the ranks still training); joined: "zeros" or
    "last" (a rank out of batches repeats its last one)."""
    w, counts = [1.0, 2.0, 3.0, 4.0], COUNTS[:world]
    for step in range(max(counts)):
        total, training = [0.0] * 4, 0
        for rank, count in enumerate(counts):
            if step < count:
                training += 1
                t = target(rank, step)
            elif joined == "last":
                t = target(rank, count - 1)
            else:
                continue
            total = [a + (wi - ti) for a, wi, ti in zip(total, w, t)]
        divisor = world if divide == "world" else training
        w = [wi - LR * a / divisor for wi, a in zip(w, total)]
    return w


def close(xs, ys):
    return len(xs) == len(ys) and all(abs(x - y) <= TOLERANCE * max(1.0, abs(y))
                                      for x, y in zip(xs, ys))


def final(run, rank):
    text = run.value(rank, r"^final: (.*)$", str, "final: v0, v1, v2, v3")
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise Fail(f"rank {rank} printed 'final: {text}', not a list of numbers") from None


def judge_join(run):
    w = run.world
    longest = max(COUNTS[:w])
    for rank in range(w):
        steps = run.value(rank, r"^batches \d+, steps (\d+)$", int, "batches B, steps S")
        if steps != longest:
            raise Fail(f"rank {rank} ran {steps} steps; the job must run as long as its longest "
                       f"rank has batches: {longest} (counts {list(COUNTS[:w])})",
                       "the loop ends when the count of ranks still training is 0, not before")
    finals = [final(run, rank) for rank in range(w)]
    for rank in range(1, w):
        if finals[rank] != finals[0]:
            raise Fail(f"rank {rank}'s weights {finals[rank]} differ from rank 0's {finals[0]}",
                       "a rank that has joined still takes every step's mean: the replicas must "
                       "stay equal")
    want = replay(w)
    if close(finals[0], want):
        return
    if close(finals[0], replay(w, divide="training")):
        raise Fail(f"the ranks end with {finals[0]}: the mean divides by the ranks still "
                   f"training; Join's divides by the world size, {w}, and ends with {want}",
                   "a joined rank's zeros count in the average (divide_by_initial_world_size)")
    if close(finals[0], replay(w, joined="last")):
        raise Fail(f"the ranks end with {finals[0]}: a rank out of batches repeats its last "
                   f"batch; Join shadows with zeros and ends with {want}",
                   "a rank without a batch contributes nothing: zeros")
    raise Fail(f"the ranks end with {finals[0]}; Join's steps end with {want}",
               "each step: the mean of w - t over the ranks with a batch, zeros from the others, "
               "divided by the world size")


# ---- Exercise 2: the bytes of PowerSGD

SHAPES = ((32, 16), (32,), (4, 32), (4,))  # Linear(16, 32), Linear(32, 4): weight, bias


def powersgd_bytes(r, world, rate=2, p_only=False, per_rank=None):
    values = 0
    for shape in SHAPES:
        n = shape[0]
        m = shape[1] if len(shape) > 1 else 1
        if len(shape) > 1 and (n + m) * r * rate < n * m:
            values += n * r if p_only else (n + m) * r
        else:
            values += n * m
    return 4 * values * (per_rank if per_rank is not None else world - 1)


def judge_powersgd(run):
    w = run.world
    for r in range(1, 5):
        m = None
        for line in run.lines(0):
            m = re.match(rf"^rank {r}: predicted (-?\d+) bytes, measured (\d+)$", line) or m
        if m is None:
            raise Fail(f"rank 0 printed no line 'rank {r}: predicted P bytes, measured M'",
                       "keep the program's print lines as the starter has them: the grader reads "
                       "them")
        predicted, measured = int(m.group(1)), int(m.group(2))
        want = powersgd_bytes(r, w)
        if measured != want:
            raise Fail(f"at rank {r} the step measured {measured} bytes; PowerSGD sends {want}: "
                       f"the program's training changed",
                       "keep the training loop as the starter has it")
        if predicted == want:
            continue
        if predicted == powersgd_bytes(r, w, rate=1):
            raise Fail(f"at rank {r} you predict {predicted} bytes, measured {measured}: a matrix "
                       f"was counted compressed that PowerSGD sends whole",
                       "PowerSGD compresses a matrix only when (n + m) r times its "
                       "min_compression_rate, 2, is below n m")
        if predicted == powersgd_bytes(r, w, p_only=True):
            raise Fail(f"at rank {r} you predict {predicted} bytes, measured {measured}: only P "
                       f"was counted", "a compressed matrix travels as P (n x r) and Q (m x r)")
        if predicted == powersgd_bytes(r, w, per_rank=w):
            raise Fail(f"at rank {r} you predict {predicted} bytes, measured {measured}: each "
                       f"value counted {w} times", "a rank sends each value to the others only")
        raise Fail(f"at rank {r} you predict {predicted} bytes, measured {measured}",
                   "count the float32 values of each parameter (compressed or whole), then the "
                   "ranks each is sent to")


EXERCISES = {
    "ex1": Exercise(
        title="Join by hand: a rank out of batches shadows the others' all_reduces with zeros",
        judge=judge_join,
        worlds=(1, 2, 3),
        args=("--counts", ",".join(str(c) for c in COUNTS)),
        hint="every step begins with the count of ranks still training; a rank without a batch "
             "sends zeros, and the mean divides by the world size"),
    "ex2": Exercise(
        title="the bytes of a PowerSGD step, predicted from the shapes, then measured",
        judge=judge_powersgd,
        worlds=(2, 3),
        hint="(n + m) r float32 values for a matrix PowerSGD compresses, the whole of the others, "
             "sent to the W - 1 other ranks"),
}
