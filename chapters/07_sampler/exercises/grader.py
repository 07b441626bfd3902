"""Chapter 07's exercises, graded by what the ranks print (./tutorial check 07-ex1, 07-ex2, 07-ex3).

The judges compute every index themselves: chapter 06's torch_generator.py redraws torch's
randperm and multinomial in plain Python (the same Mersenne Twister, seeded as torch seeds it), and
each sampler is written out below from its Python source: post D's __iter__ (ex1), the one
weighted draw every rank shares (ex2), the naive split and DistributedSampler's padded length
(ex3). So a shard is checked index for index, not by properties a wrong shard could share (every
index covered once, equal sizes): those would pass a sampler that shuffles differently from torch.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "06_seeds", "exercises"))
from grading import Exercise, Fail  # noqa: E402
from torch_generator import TorchGenerator, multinomial_with_replacement, randperm  # noqa: E402

WEIGHTS = [1, 1, 1, 1, 6]  # ex2's weights, as the program has them
PER_RANK = 6               # ex2's --num-samples default


def ceil_div(a, b):
    return -(-a // b)


def count_of(count, one, many):
    return f"{count} {one if count == 1 else many}"


def tensor_values(rank, text):
    m = re.fullmatch(r"tensor\(\[([^\]]*)\]\)", text.strip())
    if not m or not re.fullmatch(r"(\s*-?\d+\s*,)*(\s*-?\d+\s*)?", m.group(1)):  # integers
        raise Fail(f"rank {rank} printed '{text}' where a tensor of integers belongs")
    return [int(v) for v in m.group(1).split(",") if v.strip()]


def post_d_shard(n, world, rank, epoch):
    """Post D's DistributedSampler.__iter__; None where its assert fails."""
    num_samples = ceil_div(n, world)
    total_size = num_samples * world
    indices = randperm(n, TorchGenerator(epoch))
    indices += indices[:total_size - len(indices)]
    if len(indices) != total_size:
        return None
    return indices[rank:total_size:world]


def judge_post_d(run):
    w = run.world
    for rank in range(w):
        for n in range(1, 11):
            for epoch in range(3):
                line = run.value(rank, rf"^n {n}, epoch {epoch}: post D's (.*), the library's",
                                 str, f"n {n}, epoch {epoch}: post D's ...")
                expected = post_d_shard(n, w, rank, epoch)
                got = None if line == "assert fails" else tensor_values(rank, line)
                if got != expected:
                    said = "its assert fails" if got is None else f"rank {rank}'s shard is {got}"
                    should = ("its assert fails" if expected is None
                              else f"post D's sampler gives rank {rank} {expected}")
                    raise Fail(f"with {count_of(n, 'index', 'indices')} in epoch {epoch}, "
                               f"{said}; {should}",
                               "compare with post D's __iter__ line by line: its padding, then "
                               "its subsampling")
    count = run.value(0, r"post D's assert fails on (\d+) of", int, "post D's assert fails on N")
    expected = sum(post_d_shard(n, world, 0, 0) is None
                   for n in range(1, 41) for world in range(1, 9))
    if count != expected:
        raise Fail(f"rank 0 says post D's assert fails on {count} of the 320 pairs; it fails on "
                   f"{expected}", "the assert fails where the padding comes up short")


def judge_weighted(run):
    w = run.world
    draws = {}
    for epoch in range(2):
        everyone = multinomial_with_replacement(WEIGHTS, PER_RANK * w, TorchGenerator(epoch))
        draws[epoch] = everyone
        for rank in range(w):
            got = tensor_values(rank, run.value(rank, rf"^epoch {epoch} draws: (.*)$", str,
                                                f"epoch {epoch} draws: ..."))
            expected = everyone[rank::w]
            if got == expected:
                continue
            why = ""
            # Draws a rank might make alone: seeded with its rank too, of its own length or the
            # whole one's, kept whole, as a prefix, or striding.
            own = [multinomial_with_replacement(WEIGHTS, size, TorchGenerator(epoch + shift))
                   for shift in {rank, rank + 1} for size in (PER_RANK, PER_RANK * w)]
            if epoch and got == draws[0][rank::w]:
                why = " (epoch 0's draw again: the epoch is not in the seed)"
            elif len(got) != PER_RANK:
                why = f" ({len(got)} indices; each rank keeps {PER_RANK})"
            elif w > 1 and got == everyone[rank * PER_RANK:(rank + 1) * PER_RANK]:
                why = (" (a block of the draw in a row: DistributedSampler's share is every "
                       "W-th index from the rank on)")
            elif w > 1 and any(got in (d[:PER_RANK], d[rank::w]) for d in own):
                why = (" (a draw of this rank's own, its seed holding the rank: the ranks' draws "
                       "then differ, so their parts are not one draw's and may repeat each "
                       "other's indices)")
            raise Fail(f"rank {rank}'s draws in epoch {epoch} are {got}{why}; its share of the "
                       f"one weighted draw of {PER_RANK * w} (seed + epoch = {epoch}) is "
                       f"{expected}",
                       "the ranks' shares are parts of one draw that every rank makes alike: "
                       "do your ranks draw the same, and take their parts as "
                       "DistributedSampler does?")


def judge_equal_steps(run):
    w = run.world
    pattern = re.compile(r"^n (\d+), batch (\d+): naive (\d+) steps \(ranks (\d+) to (\d+)\), "
                         r"DistributedSampler (\d+) \(ranks (\d+) to (\d+)\)$")
    for rank in range(w):
        seen = 0
        for line in run.lines(rank):
            m = pattern.match(line)
            if not m:
                continue
            seen += 1
            n, batch, naive, lo, hi, padded, plo, phi = map(int, m.groups())
            steps = [ceil_div(n * (r + 1) // w - n * r // w, batch) for r in range(w)]
            where = f"with {count_of(n, 'index', 'indices')} and batches of {batch}"
            if naive != steps[rank]:
                raise Fail(f"{where}, rank {rank} says it takes "
                           f"{count_of(naive, 'step', 'steps')}; its "
                           f"range [{n * rank // w}, {n * (rank + 1) // w}) takes "
                           f"{count_of(steps[rank], 'step', 'steps')}",
                           "how many indices does this rank's range hold, and how many batches "
                           "do they make?")
            if (lo, hi) != (min(steps), max(steps)):
                raise Fail(f"{where}, rank {rank} says the naive step counts run from {lo} to "
                           f"{hi}; over the ranks ({steps}) the fewest is {min(steps)} and the "
                           f"most {max(steps)}",
                           "the fewest and the most over the ranks: each rank knows only its "
                           "own count")
            even = ceil_div(ceil_div(n, w), batch)  # the padded shard's batches, on every rank
            if (padded, plo, phi) != (even, even, even):
                raise Fail(f"{where}, rank {rank} says DistributedSampler gives "
                           f"{count_of(padded, 'step', 'steps')} "
                           f"(ranks {plo} to {phi}); it gives every rank {even}",
                           "keep the starter's DistributedSampler lines; min_max serves both")
        if seen != 48:
            raise Fail(f"rank {rank} printed {seen} of the 48 'n N, batch B: ...' lines",
                       "keep the starter's loops and print line")


EXERCISES = {
    "ex1": Exercise(
        title="post D's DistributedSampler against PyTorch 1.13's",
        judge=judge_post_d,
        worlds=(2, 3),  # on 3 ranks one index is too few: the assert fails (W > 2n)
        hint="post D's __iter__, line for line"),
    "ex2": Exercise(
        title="a distributed WeightedRandomSampler",
        judge=judge_weighted,
        worlds=(2, 3),
        hint="one weighted draw, the same on every rank and new each epoch, shared out as "
             "DistributedSampler shares its indices"),
    "ex3": Exercise(
        title="why pad: the same number of steps on every rank",
        judge=judge_equal_steps,
        worlds=(2, 3, 4),
        hint="each rank knows only its own number of steps; the fewest and the most are over "
             "every rank"),
}
