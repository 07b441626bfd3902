"""Chapter 09's exercises, graded by what the ranks print (./tutorial check 09-ex1, 09-ex2, 09-ex3).

Each judge works out the right answer itself: exercise 1 from torch's padding rule, exercise 2 by
replaying the bigger batch's training in plain Python (double precision), exercise 3 from the
trace files the ranks wrote; tools/grader/grading.py runs the program at each world size.
"""
import json
import os
import re
import shutil
import struct
import tempfile

from grading import Exercise, Fail, close, run_ddprun


# ---- Exercise 1: the sampler's padding, counted and left out

def padded_order(n, world):
    """torch 1.13's DistributedSampler without shuffling: range(n), then its first indices again
    (repeated as often as needed) up to ceil(n / W) * W positions."""
    total = -(-n // world) * world
    order = list(range(n))
    while len(order) < total:
        order += list(range(n))[: total - len(order)]
    return order


def counts(n, world):
    right = [i % 3 == 0 for i in padded_order(n, world)]
    return sum(right), len(right), sum(right[:n]), n


def judge_padded_evaluation(run):
    w = run.world
    for n in range(1, 11):
        line = run.value(0, rf"^(n = {n}: .*)$", str, f"n = {n}: ...")
        want = counts(n, w)
        want_text = (f"n = {n}: counting every position {want[0]}/{want[1]}, without the padding "
                     f"{want[2]}/{want[3]}")
        every = line.partition(", without")[0]
        if every != want_text.partition(", without")[0]:
            raise Fail(f"rank 0 printed '{line}'; counting every position it is "
                       f"{want[0]}/{want[1]}",
                       "leave the counting of every position as the starter has it")
        if line != want_text:
            raise Fail(f"rank 0 printed '{line}'; without the padding each image counts "
                       f"once: {want[2]}/{want[3]}",
                       "which position of the padded order is position k of this rank's "
                       "shard, and which positions are padding?")
    skewed = sum(a * d != c * b for a, b, c, d in (counts(n, w) for n in range(1, 51)))
    said = run.value(0, r"skewed the accuracy in (\d+)$", int, "... skewed the accuracy in N")
    if said != skewed:
        raise Fail(f"rank 0 says counting the padding skewed {said} of the 50 sizes; it skews "
                   f"{skewed}")


# ---- Exercise 2: no_sync() accumulation takes the bigger batch's steps

MICRO, BATCH, STEPS, LR = 4, 8, 10, 0.05


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def sample(rank, step, i):
    """The program's sample, in float32 as it computes it: 3 inputs, 2 targets."""
    t = f32(f32(((rank * 131 + step * 17 + i * 7) % 29) / f32(7.0)) - 2)
    return [t, f32(f32(t * t) / 4), f32(1 - f32(t / 3))], [f32(2 * t - 1), f32(0.5 - t)]


def one_batch_training(world, scale=1.0):
    """Linear(3, 2) trained by DDP on batches of MICRO * BATCH samples per rank: each step the
    mean over the ranks of each rank's mean-squared-error gradient (times `scale`: the mistakes
    that scale it wrongly), then SGD."""
    weight = [[0.1, -0.2, 0.3], [0.0, 0.25, -0.1]]
    bias = [0.0, 0.5]
    for step in range(STEPS):
        grad_w = [[0.0] * 3 for _ in range(2)]
        grad_b = [0.0, 0.0]
        for rank in range(world):
            count = MICRO * BATCH
            for i in range(count):
                x, y = sample(rank, step, i)
                for o in range(2):
                    out = sum(weight[o][j] * x[j] for j in range(3)) + bias[o]
                    g = scale * 2 * (out - y[o]) / (count * 2) / world
                    grad_b[o] += g
                    for j in range(3):
                        grad_w[o][j] += g * x[j]
        for o in range(2):
            bias[o] -= LR * grad_b[o]
            for j in range(3):
                weight[o][j] -= LR * grad_w[o][j]
    return {"w[0]": weight[0][0], "w[5]": weight[1][2], "b[1]": bias[1]}


def judge_accumulation(run):
    want = one_batch_training(run.world)
    # Each micro-batch's gradient counted whole (K times the mean), and divided by W as well.
    summed = one_batch_training(run.world, MICRO)
    halved = one_batch_training(run.world, 1.0 / run.world) if run.world > 1 else None
    for rank in range(run.world):
        for name, value in want.items():
            pattern = rf"\b{name[0]}\[{name[2]}\] = ([^,\s]+)"
            big = run.value(rank, r"one batch of \d+: .*?" + pattern, what=f"one batch ... {name}")
            if not close(big, value, rel=1e-4):
                raise Fail(f"rank {rank}'s one-batch model has {name} = {big:g}; it should be "
                           f"{value:.6g}",
                           "leave the one-batch model as the starter has it")
            mine = run.value(rank, r"micro-batches: .*?" + pattern,
                             what=f"accumulated ... {name}")
            if not close(mine, value, rel=1e-4):
                if close(mine, summed[name], rel=1e-4):
                    why = (f" (the steps of the sum of the {MICRO} micro-batches' gradients, "
                           f"{MICRO} times their mean)")
                    hint = "what should one micro-batch's gradient count for in the step?"
                elif halved and close(mine, halved[name], rel=1e-4):
                    why = (f" (the steps of the mean divided by {run.world} once more: DDP's "
                           "all_reduce already averages over the ranks)")
                    hint = "the all_reduce already takes the mean over the ranks"
                else:
                    why, hint = "", None
                raise Fail(f"rank {rank}'s accumulated model has {name} = {mine:g} after "
                           f"{STEPS} steps{why}; the bigger batch's steps give {value:.6g}", hint)
        syncs = run.value(rank, r"all_reduces with accumulation: (\d+)", int,
                          "all_reduces with accumulation: N")
        guards = run.value(rank, r"NoSync guards made: (\d+)", int, "NoSync guards made: N")
        if syncs == MICRO * STEPS and guards == 0:
            raise Fail(f"rank {rank} made {syncs} all_reduces in {STEPS} steps, one for every "
                       f"micro-batch, and no NoSync: average_gradients() sent every time. With "
                       f"no_sync() on all but the last micro-batch it makes {STEPS}, one per step",
                       "which micro-batches must keep their gradients local, and what keeps "
                       "them local?")
        if syncs == MICRO * STEPS:
            raise Fail(f"rank {rank} made {guards} NoSync guards, yet {syncs} all_reduces in "
                       f"{STEPS} steps, one for every micro-batch: none was alive when "
                       f"average_gradients() ran. With no_sync() on all but the last "
                       f"micro-batch it makes {STEPS}, one per step",
                       "here the all_reduce is made by average_gradients(), not by backward: a "
                       "NoSync changes something only if it is still alive when "
                       "average_gradients() runs (one scoped around backward alone has ended)")
        if syncs != STEPS:
            raise Fail(f"rank {rank} made {syncs} all_reduces in {STEPS} steps; with no_sync() "
                       f"on all but the last micro-batch it makes {STEPS}, one per step",
                       "every step needs exactly one synchronised micro-batch, its last"
                       if syncs < STEPS else
                       "count the micro-batches whose average_gradients() runs outside a NoSync")


# ---- Exercise 3: each bucket's all_reduce against backward, from the ranks' own traces

TRACE_STEPS = 5


def run_with_traces(bin_dir, program, world, exercise):
    """ddprun with --trace-dir in a fresh folder; the run keeps every rank's trace (run.traces,
    by rank: the parsed JSON, or None for a file that is missing or not JSON)."""
    folder = tempfile.mkdtemp(prefix="ch09-ex3-")
    try:
        run = run_ddprun(bin_dir, program, world,
                         [*exercise.args, "--trace-dir", folder, "--steps", str(TRACE_STEPS)],
                         exercise.deadline_s, exercise.env)
        run.traces = {}
        for rank in range(world):
            try:
                with open(os.path.join(folder, f"rank{rank}.json")) as f:
                    run.traces[rank] = json.load(f)
            except (OSError, ValueError):
                run.traces[rank] = None
        return run
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def buckets_from_trace(trace):
    """bucket -> (all_reduces, microseconds, microseconds during backward, steps that overlapped):
    each "all_reduce bucket B" span against every span named "backward ...", by intervals."""
    spans = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
             if e.get("ph") == "X"]
    backward = [(start, end) for name, start, end in spans if name.startswith("backward")]
    found = {}
    for name, start, end in spans:
        m = re.match(r"all_reduce bucket (\d+) ", name)
        if not m:
            continue
        during = sum(max(0, min(end, b_end) - max(start, b_start)) for b_start, b_end in backward)
        count, total, overlapped, steps = found.get(int(m.group(1)), (0, 0, 0, 0))
        found[int(m.group(1))] = (count + 1, total + end - start, overlapped + during,
                                  steps + (during > 0))
    return found


def judge_read_timeline(run):
    printed = re.compile(r"^bucket (\d+) \([^)]*\): (\d+) all_reduces, (\d+) us, (-?\d+) us of it "
                         r"during backward, in (-?\d+) of (\d+) steps$")
    for rank in range(run.world):
        if run.traces.get(rank) is None:
            raise Fail(f"rank {rank} wrote no readable trace rank{rank}.json in --trace-dir",
                       "keep the starter's timeline.write(path)")
        want = buckets_from_trace(run.traces[rank])
        if sorted(want) != list(range(len(want))) or any(
                v[0] != TRACE_STEPS for v in want.values()):
            raise Fail(f"rank {rank}'s trace holds all_reduces of buckets "
                       f"{ {b: v[0] for b, v in sorted(want.items())} }; every bucket is "
                       f"all-reduced once in each of the {TRACE_STEPS} steps",
                       "leave the training loop as the starter has it")
        said = {}
        for line in run.lines(rank):
            m = printed.match(line)
            if m:
                said[int(m.group(1))] = tuple(int(v) for v in m.group(2, 3, 4, 5))
        for bucket, (count, total, overlapped, steps) in sorted(want.items()):
            if bucket not in said:
                raise Fail(f"rank {rank} printed no line for bucket {bucket}",
                           "keep the program's print lines as the starter has them")
            got = said[bucket]
            if got[:2] != (count, total):
                raise Fail(f"rank {rank} says bucket {bucket} made {got[0]} all_reduces in "
                           f"{got[1]} us; its trace says {count} in {total} us",
                           "leave the counting of the all_reduces as the starter has it")
            if got[2] != overlapped:
                raise Fail(f"rank {rank} says {got[2]} us of bucket {bucket}'s all_reduces ran "
                           f"during backward; its trace says {overlapped} us",
                           "two spans share the time from the later start to the earlier end, "
                           "and nothing when they never met")
            if got[3] != steps:
                raise Fail(f"rank {rank} says bucket {bucket} overlapped backward in {got[3]} "
                           f"steps; its trace says {steps}")


EXERCISES = {
    "ex1": Exercise(
        title="what the sampler's padding does to an evaluation",
        judge=judge_padded_evaluation,
        worlds=(2, 3, 4),  # 1 rank has no padding; 4 pads some sizes by 3
        hint="the padding repeats the first images: each image must count once"),
    "ex2": Exercise(
        title="gradient accumulation with no_sync() is a bigger batch",
        judge=judge_accumulation,
        worlds=(1, 2, 3),
        hint="a step is the mean over its K micro-batches, with one all_reduce: which "
             "micro-batches must not send, and what does each one's gradient count for?"),
    "ex3": Exercise(
        title="read a timeline: how much of each bucket's all_reduce overlapped backward",
        judge=judge_read_timeline,
        worlds=(2, 3),  # 1 rank all-reduces nothing
        hint="two spans share the time between the later start and the earlier end, if any",
        runner=run_with_traces),
}
