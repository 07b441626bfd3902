"""Chapter 12's exercises, graded by what the ranks print (./tutorial check 12-ex1, 12-ex2).

Exercise 1 (ZeRO-1 by hand) is recomputed here in plain Python: the same closed forms for the
parameters and the gradients, SGD with momentum as torch.optim.SGD steps it, the layout of W
chunks of ceil(n / W) values, and the bytes a reduce_scatter and an all_gather of those chunks
send.
"""
import re

from grading import Exercise, Fail, Mutation

# ---- Exercise 1: ZeRO-1 by hand

NUMEL, STEPS, LR, MOMENTUM = 11, 3, 0.1, 0.9  # 11: padded at 2, 3 and 4 ranks

# The program computes in float32 and prints 9 significant digits; this recomputes in double. A
# few float32 operations on values of order 1 differ from double by well under 1e-6, while each
# mistake named below moves some value by more than 1e-2: 1e-5 (relative, for values above 1)
# tells them apart with room on both sides.
TOLERANCE = 1e-5


def same(printed, expected):
    return len(printed) == len(expected) and all(
        abs(a - b) <= TOLERANCE * max(1.0, abs(b)) for a, b in zip(printed, expected))


def zero1(world, mean=True, n=NUMEL, steps=STEPS):
    """The whole vector after `steps` steps, and the mean gradient (the sum with mean=False) of
    the last step, padded to W chunks: what every rank's ZeRO-1 computes, rank r printing chunk
    r of the second."""
    chunk = -(-n // world)
    params = [1 - i / 8 for i in range(n)]
    momentum = None
    for t in range(steps):
        # Rank r's gradient of value i at step t: ((r + 1) (i mod 5 - 2) + t) / 4.
        grad = [sum(((r + 1) * (i % 5 - 2) + t) / 4 for r in range(world)) / (world if mean else 1)
                for i in range(n)]
        # torch.optim.SGD: the first step's buffer is the gradient, then momentum * buf + grad.
        momentum = grad if momentum is None else [MOMENTUM * b + g for b, g in zip(momentum, grad)]
        params = [p - LR * b for p, b in zip(params, momentum)]
    return params, grad + [0.0] * (chunk * world - n)


def floats(run, rank, label):
    text = run.value(rank, rf"^{re.escape(label)}: (.*)$", str, f"{label}: v0, v1, ...")
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise Fail(f"rank {rank} printed '{label}: {text}', not a list of numbers") from None


def shown(values):
    return ", ".join(f"{v:.9g}" for v in values)


def judge_zero1(run):
    w = run.world
    c = -(-NUMEL // w)
    params, grad = zero1(w)
    summed_params, summed_grad = zero1(w, mean=False)
    for rank in range(w):
        first, last = min(rank * c, NUMEL), min((rank + 1) * c, NUMEL)
        line = run.value(rank, r"(my chunk: .*)$", str, "my chunk: values [A, B) of N, ...")
        want = f"my chunk: values [{first}, {last}) of {NUMEL}, a shard of {c} values"
        if line != want:
            raise Fail(f"rank {rank} says '{line}'; with W = {w} chunks of c = ceil({NUMEL} / {w}) "
                       f"= {c} values it is '{want}'" +
                       (" (the last chunk ends in padding)" if c * w > NUMEL else ""),
                       "pad the parameters to c * W values and give rank r values "
                       "[r * c, (r + 1) * c) as its shard")
        state = run.value(rank, r"optimizer state: (\d+) values", int,
                          "optimizer state: N values of momentum")
        if state != c:
            raise Fail(f"rank {rank}'s optimizer keeps momentum for {state} values; ZeRO-1's "
                       f"keeps it for the rank's shard only, {c} values",
                       "give the optimizer the shard (a Parameter of c values), not the whole "
                       "vector")
        mine = floats(run, rank, "my shard's gradient at the last step")
        want_grad = grad[rank * c:(rank + 1) * c]
        if not same(mine, want_grad):
            why = (" (the sum of the ranks' gradients, not their mean: divide each by W before "
                   "the reduce_scatter, as DDP does)"
                   if w > 1 and same(mine, summed_grad[rank * c:(rank + 1) * c]) else "")
            raise Fail(f"rank {rank}'s shard gradient at the last step is [{shown(mine)}]{why}; "
                       f"the mean over the ranks of its chunk is [{shown(want_grad)}]",
                       "reduce_scatter_tensor the gradient divided by W, padded with zeros to "
                       "c * W values, into shard.grad")
        final = floats(run, rank, "final")
        if not same(final, params):
            pad = c * w - NUMEL
            if w > 1 and same(final, summed_params):
                why = " (stepped with the sum of the gradients, not their mean)"
            elif pad and same(final, (params + [0.0] * pad)[pad:]):
                why = " (the padding dropped from the front: it is at the end)"
            else:
                why = ""
            raise Fail(f"rank {rank} ends with [{shown(final)}]{why}; ZeRO-1 ends with "
                       f"[{shown(params)}], on every rank",
                       "after optimizer.step(), all_gather_into_tensor every rank's shard into "
                       "c * W values and keep the first n")
        ddp = run.value(rank, r"DDP's final: (.*)$", str, "DDP's final: ...")
        printed = run.value(rank, r"^final: (.*)$", str, "final: ...")
        # At 1 and 2 ranks the reduce_scatter adds the same two numbers as DDP's all_reduce (a
        # sum of two is the same in either order): the same bits. From 3 on the ring adds each
        # chunk in another order than the all_reduce: float32 rounding apart.
        if w <= 2 and printed != ddp:
            raise Fail(f"rank {rank} ends with [{printed}], DDP with [{ddp}]: at {w} rank(s) "
                       "ZeRO-1 gives DDP's bits",
                       "divide the gradient by W before the reduce_scatter, as DDP's does")
        sent = run.value(rank, r"bytes sent by ZeRO-1's group: (\d+)", int,
                         "bytes sent by ZeRO-1's group: B in S steps")
        per_step = 2 * 4 * c * (w - 1)
        if sent != STEPS * per_step:
            raise Fail(f"rank {rank}'s group sent {sent} bytes in {STEPS} steps; a reduce_scatter "
                       f"and an all_gather of {c}-value float32 chunks send 2 * 4 * {c} * "
                       f"({w} - 1) = {per_step} bytes per step (what DDP's ring all_reduce sends), "
                       f"{STEPS * per_step} in {STEPS} steps",
                       "one group->reduce_scatter_tensor and one group->all_gather_into_tensor "
                       "per step, on the exercise's group")


EXERCISES = {
    "ex1": Exercise(
        title="ZeRO-1 by hand: reduce_scatter, step a shard, all_gather",
        judge=judge_zero1,
        worlds=(1, 2, 3),  # 11 values: padded at 2 and 3 ranks; from 3 on the ring's order shows
        args=("--numel", str(NUMEL), "--steps", str(STEPS)),
        hint="pad to W chunks of ceil(n / W), reduce_scatter the gradient divided by W, step the "
             "shard, all_gather the shards and drop the padding",
        mutation=Mutation(find="flat.assign_slice(0, grad / world);",
                          replace="flat.assign_slice(0, grad);",
                          expect="not their mean")),
}
