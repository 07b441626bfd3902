"""Chapter 06's exercises, graded by what the ranks print (./tutorial check 06-ex1, 06-ex2).

The judges do not trust the draws a program prints: torch_generator.py redraws them from the
printed seeds, as torch does (Python's `random` is the same Mersenne Twister), so every draw is
checked against its seed. Then the property the exercise asks for is judged on the seeds, which
is exact: two streams are the same exactly when their seeds agree in the low 32 bits the generator
keeps. (Comparing draws alone would only be a likely answer: two different seeds may start alike.)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grading import Exercise, Fail  # noqa: E402
from torch_generator import MASK32, TorchGenerator, randint  # noqa: E402

JOBS, DRAWS, IMAGES, EPOCHS = 8, 6, 1000, 3


def tensor_values(rank, text):
    m = re.fullmatch(r"tensor\(\[([^\]]*)\]\)", text.strip())
    if not m or not re.fullmatch(r"(\s*-?\d+\s*,)*(\s*-?\d+\s*)?", m.group(1)):  # integers
        raise Fail(f"rank {rank} printed '{text}' where a tensor of integers belongs")
    return [int(v) for v in m.group(1).split(",") if v.strip()]


def check_draws(rank, what, seed, printed, expected):
    if printed != expected:
        raise Fail(f"rank {rank}'s {what} are {printed}; a generator seeded with {seed} draws "
                   f"{expected}",
                   "seed the generator with the seed the program prints, and draw nothing else "
                   "from it")


def same_stream(a, b):
    return (a & MASK32) == (b & MASK32)


def why_same(a, b):
    if a == b:
        return f"both seed the generator with {a}"
    return (f"the seeds {a} and {b} have the same low 32 bits, {a & MASK32}, the only bits the "
            "generator keeps")


def judge_seed_collisions(run):
    seeds = {}  # (job, rank) -> seed
    for rank in range(run.world):
        for job in range(JOBS):
            line = run.value(rank, rf"^(job {job}: .*)$", str, f"job {job}: seed S, draws ...")
            m = re.fullmatch(rf"job {job}: seed (\d+), draws (.*)", line)
            if not m:
                raise Fail(f"rank {rank} printed '{line}', not "
                           f"'job {job}: seed S, draws tensor(...)'")
            seed = int(m.group(1))
            check_draws(rank, f"draws in job {job}", seed, tensor_values(rank, m.group(2)),
                        randint(0, IMAGES, DRAWS, TorchGenerator(seed)))
            seeds[job, rank] = seed
    pairs = sorted(seeds.items())  # job by job: job 1 is compared with job 0, not the reverse
    for i, ((job, rank), seed) in enumerate(pairs):
        for (other_job, other_rank), other in pairs[:i]:
            if same_stream(seed, other):
                raise Fail(f"job {job}'s rank {rank} draws what job {other_job}'s rank "
                           f"{other_rank} drew: {why_same(seed, other)}",
                           "two (seed, rank) pairs may share a stream only if they share the "
                           "32 bits the generator keeps: are yours one to one there?")


def judge_shared_and_private(run):
    w = run.world
    orders, private = {}, {}  # (epoch, rank) -> (shared seed, order); rank -> private seed
    for rank in range(w):
        private[rank] = run.value(rank, r"^private seed (\d+)$", int, "private seed P")
        stream = TorchGenerator(private[rank])
        for epoch in range(EPOCHS):
            line = run.value(rank, rf"^(epoch {epoch}: .*)$", str, f"epoch {epoch}: ...")
            m = re.fullmatch(rf"epoch {epoch}: shared seed (\d+), order starts (tensor\(.*?\)), "
                             r"partners (tensor\(.*\))", line)
            if not m:
                raise Fail(f"rank {rank} printed '{line}', not the starter's epoch line")
            seed = int(m.group(1))
            order = tensor_values(rank, m.group(2))
            check_draws(rank, f"first images in epoch {epoch}", seed, order,
                        randint(0, IMAGES, 4, TorchGenerator(seed)))
            check_draws(rank, f"partners in epoch {epoch}", private[rank],
                        tensor_values(rank, m.group(3)), randint(0, IMAGES, 3, stream))
            orders[epoch, rank] = (seed, order)
    for epoch in range(EPOCHS):
        for rank in range(1, w):
            if orders[epoch, rank][1] != orders[epoch, 0][1]:
                raise Fail(f"in epoch {epoch} rank {rank}'s order starts {orders[epoch, rank][1]}, "
                           f"rank 0's {orders[epoch, 0][1]}: the shared order must agree",
                           "what in the shared seed differs from rank to rank?")
        if epoch and same_stream(orders[epoch, 0][0], orders[epoch - 1, 0][0]):
            raise Fail(f"epoch {epoch}'s order repeats epoch {epoch - 1}'s: "
                       f"{why_same(orders[epoch, 0][0], orders[epoch - 1, 0][0])}",
                       "a new shared seed each epoch, as DistributedSampler's set_epoch gives")
    for rank in range(w):
        for other in range(rank):
            if same_stream(private[rank], private[other]):
                raise Fail(f"ranks {other} and {rank} draw the same partners: "
                           f"{why_same(private[rank], private[other])}",
                           "the private seed must depend on the rank")
        for epoch in range(EPOCHS):
            if same_stream(private[rank], orders[epoch, 0][0]):
                raise Fail(f"rank {rank}'s private stream replays the shared order of epoch "
                           f"{epoch}: {why_same(private[rank], orders[epoch, 0][0])}",
                           "a private seed and a shared one must never share their low 32 bits: "
                           "exercise 1 shows how seed + epoch and seed + rank meet")


EXERCISES = {
    "ex1": Exercise(
        title="per-rank seeds that never collide across jobs",
        judge=judge_seed_collisions,
        worlds=(2, 3),
        hint="the generator keeps only the seed's low 32 bits: two pairs that agree there draw "
             "alike"),
    "ex2": Exercise(
        title="a shared stream per epoch and a private one per rank",
        judge=judge_shared_and_private,
        worlds=(2, 3),
        hint="the shared stream agrees across ranks and changes each epoch; a private one "
             "belongs to one rank and never meets a shared one"),
}
