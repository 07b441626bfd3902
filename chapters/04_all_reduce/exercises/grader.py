"""Chapter 04's exercises, graded by what the ranks print (./tutorial check 04-ex1, 04-ex2).

Each judge works out the right answer itself, from the exercise's closed form, and compares it
with every rank's line; tools/grader/grading.py runs the program at each world size.
"""
import re

from grading import Exercise, Fail, close


def judge_weighted_mean(run):
    w = run.world
    expected = 10.0 * (2 * w + 1) / 3  # sum_r 10 (r + 1)^2 / sum_r (r + 1)
    means = []
    for rank in range(w):
        count = run.value(rank, r"samples: (\S+),", what="samples: N")
        if count != rank + 1:
            raise Fail(f"rank {rank} says it holds {count:g} samples; it holds {rank + 1}",
                       "keep the starter's count and value: rank r holds r + 1 samples")
        means.append(run.value(rank, r"global mean: (\S+)$", what="global mean: X"))
    wrong = [r for r in range(w) if not close(means[r], expected)]
    if wrong:
        rank = wrong[0]
        # The mistakes a participant makes, each recognised by what every rank prints.
        own = [10.0 * (r + 1) for r in range(w)]
        per_rank = sum(own) / w                             # the mean of the per-rank means
        unweighted = sum(own) / sum(r + 1 for r in range(w))  # each rank's value counted once
        if all(close(m, o) for m, o in zip(means, own)):
            why, hint = (" (its own samples' mean: nothing came from the other ranks)",
                         "the other ranks' samples reach this rank only through a collective")
        elif all(close(m, per_rank) for m in means):
            why, hint = (" (the mean of the per-rank means: each rank weighed alike)",
                         "a rank with 4 samples must weigh 4 times as much as a rank with 1")
        elif all(close(m, unweighted) for m in means):
            why, hint = (f" (the sum of the ranks' values, {sum(own):g}, over the number of "
                         f"samples, {sum(r + 1 for r in range(w))}: each rank's value counted "
                         "once, not once for each of its samples)",
                         "what is the sum of the values of all the samples a rank holds?")
        elif any(not close(m, means[0]) for m in means):
            why, hint = (f" and rank 0 says {means[0]:g}: the ranks disagree",
                         "every rank must end with the same number")
        else:
            why, hint = "", None
        raise Fail(f"rank {rank} says the global mean is {means[rank]:g}{why}; over all samples "
                   f"it is {expected:g}", hint)
    if w == 1:
        return  # one rank needs no collective: the count is judged from 2 ranks on
    for rank in range(w):
        made = run.value(rank, r"collectives made: (.*)$", str, "collectives made: N (...)")
        if made != "1 (all_reduce)":
            count, _, ops = made.partition(" ")
            calls = ("no collective" if count == "0" else
                     f"{count} collective{'s' if count != '1' else ''} {ops}".rstrip())
            raise Fail(f"rank {rank} made {calls} to get the mean; the task asks for a single "
                       "all_reduce",
                       "one all_reduce reduces every element of its tensor: a tensor can carry "
                       "more than one number")


def tensor_values(text):
    m = re.fullmatch(r"tensor\(\[([^\]]*)\]\)", text.strip())
    if not m or not re.fullmatch(r"(\s*-?\d+\s*,)*(\s*-?\d+\s*)?", m.group(1)):  # integers
        raise ValueError(text)
    return [int(v) for v in m.group(1).split(",") if v.strip()]


def judge_sum_from_all_gather(run):
    w = run.world
    # Rank r holds arange(W) + 1 + W r: element i sums to W (i + 1) + W * W (W - 1) / 2.
    expected = [w * (i + 1) + w * w * (w - 1) // 2 for i in range(w)]
    for rank in range(w):
        line = run.value(rank, r"(sum from all_gather: .*)$", str, "sum from all_gather: ...")
        m = re.fullmatch(r"sum from all_gather: (tensor\(.*?\)), from all_reduce: (tensor\(.*\))",
                         line)
        if not m:
            raise Fail(f"rank {rank} printed '{line}', not two tensors")
        try:
            by_hand, by_library = tensor_values(m.group(1)), tensor_values(m.group(2))
        except ValueError as bad:
            raise Fail(f"rank {rank} printed '{bad}' where a tensor of integers belongs") from None
        if by_library != expected:
            raise Fail(f"rank {rank}'s all_reduce gave {by_library}, not {expected}",
                       "leave the starter's all_reduce as it is")
        if by_hand != expected:
            raise Fail(f"rank {rank}'s sum from all_gather is {by_hand}; the sum over every rank "
                       f"is {expected}",
                       "which ranks' tensors went into your sum? all_gather brings every rank's")
        received = run.value(rank, r"elements received by all_gather: (\S+)$", int,
                             "elements received by all_gather: N")
        if received != (w - 1) * w:
            raise Fail(f"rank {rank} says all_gather brought it {received} elements; it brought "
                       f"the {w - 1} other ranks' tensors of {w} elements each, {(w - 1) * w}",
                       "count what came from the other ranks, not this rank's own tensor")


EXERCISES = {
    "ex1": Exercise(
        title="the mean over all samples when ranks hold different counts",
        judge=judge_weighted_mean,
        worlds=(1, 2, 3, 4),  # with 1 rank any mean is right; from 2 on, the weights matter
        hint="the mean over all samples is the sum of every sample's value over the number of "
             "samples, and each rank holds a part of both"),
    "ex2": Exercise(
        title="SUM from all_gather, compared with all_reduce",
        judge=judge_sum_from_all_gather,
        worlds=(1, 2, 3),
        hint="the all_reduce line shows the sum to reach: every rank's tensor, added up here"),
}
