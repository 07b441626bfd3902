"""Chapter 12's exercises, graded by what the ranks print (./tutorial check 12-ex1, 12-ex2).

Exercise 1 (ZeRO-1 by hand) is recomputed here in plain Python: the same closed forms for the
parameters and the gradients, SGD with momentum as torch.optim.SGD steps it, the layout of W
chunks of ceil(n / W) values, and the bytes a reduce_scatter and an all_gather of those chunks
send.

Exercise 2 (the stage that fits) runs the program several times at each world size, with budgets
the grader places between its own closed forms, so that every stage that can be the answer is
(and "none", below the smallest): the table of closed forms, the choice, and the model state the
program measures at that stage are each checked against the grader's numbers.
"""
import re

from grading import Exercise, Fail, run_ddprun

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
    """Printed and expected values in one format, to 6 significant digits: a difference that
    shows there is one the grader counts (TOLERANCE), and float32's last digits do not distract."""
    return ", ".join(f"{v:.6g}" for v in values)


def counted(printed, expected):
    """" (12 values, expected 11)" when the lengths differ: the difference to look at first."""
    if len(printed) == len(expected):
        return ""
    return f" ({len(printed)} value{'s' if len(printed) != 1 else ''}, expected {len(expected)})"


def judge_zero1(run):
    w = run.world
    c = -(-NUMEL // w)
    params, grad = zero1(w)
    _, summed_grad = zero1(w, mean=False)
    for rank in range(w):
        first, last = min(rank * c, NUMEL), min((rank + 1) * c, NUMEL)
        line = run.value(rank, r"(my chunk: .*)$", str, "my chunk: values [A, B) of N, ...")
        want = f"my chunk: values [{first}, {last}) of {NUMEL}, a shard of {c} values"
        if line != want:
            raise Fail(f"rank {rank} says '{line}'; with W = {w} chunks of c = ceil({NUMEL} / {w}) "
                       f"= {c} values it is '{want}'" +
                       (" (the last chunk ends in padding)" if c * w > NUMEL else ""),
                       "W chunks of c values cover c * W values, n of them real: which chunk "
                       "is this rank's?")
        state = run.value(rank, r"optimizer state: (\d+) values", int,
                          "optimizer state: N values of momentum")
        if state != c:
            raise Fail(f"rank {rank}'s optimizer keeps momentum for {state} values; ZeRO-1's "
                       f"keeps it for the rank's shard only, {c} values",
                       "which values does this rank's optimizer step?")
        mine = floats(run, rank, "my shard's gradient at the last step")
        want_grad = grad[rank * c:(rank + 1) * c]
        if not same(mine, want_grad):
            why = (" (the sum of the ranks' gradients, not their mean: divide each by W before "
                   "the reduce_scatter, as DDP does)"
                   if w > 1 and same(mine, summed_grad[rank * c:(rank + 1) * c]) else "")
            raise Fail(f"rank {rank}'s shard gradient at the last step is [{shown(mine)}]"
                       f"{counted(mine, want_grad)}{why}; the mean over the ranks of its chunk is "
                       f"[{shown(want_grad)}]",
                       "each rank needs the mean over the ranks of its own chunk only")
        final = floats(run, rank, "final")
        if not same(final, params):
            pad = c * w - NUMEL
            # (A sum for a mean never gets here: the shard gradient's check above names it.)
            if pad and same(final, params + [0.0] * pad):
                why = " (the padding is still at the end)"
            elif pad and same(final, (params + [0.0] * pad)[pad:]):
                why = " (the padding dropped from the front: it is at the end)"
            else:
                why = ""
            raise Fail(f"rank {rank} ends with [{shown(final)}]{counted(final, params)}{why}; "
                       f"ZeRO-1 ends with [{shown(params)}], on every rank",
                       "after the step every rank needs every rank's updated chunk, and the "
                       "padding is not a parameter")
        ddp = run.value(rank, r"DDP's final: (.*)$", str, "DDP's final: ...")
        printed = run.value(rank, r"^final: (.*)$", str, "final: ...")
        # At 1 and 2 ranks the reduce_scatter adds the same two numbers as DDP's all_reduce (a
        # sum of two is the same in either order): the same bits. From 3 on the ring adds each
        # chunk in another order than the all_reduce: float32 rounding apart. Where the division
        # by W happens cannot show here (halving is exact in binary); what shows is any other
        # float32 operation that is not DDP's (a learning rate off in its last bits, say).
        if w <= 2 and printed != ddp:
            raise Fail(f"rank {rank} ends with [{printed}], DDP with [{ddp}]: at {w} rank(s) "
                       "ZeRO-1 gives DDP's bits",
                       "the same float32 operations as DDP's give its bits: the same learning "
                       "rate and momentum, one SGD step per step, on the mean gradient")
        sent = run.value(rank, r"bytes sent by ZeRO-1's group: (\d+)", int,
                         "bytes sent by ZeRO-1's group: B in S steps")
        per_step = 2 * 4 * c * (w - 1)
        if sent != STEPS * per_step:
            raise Fail(f"rank {rank}'s group sent {sent} bytes in {STEPS} steps; a reduce_scatter "
                       f"and an all_gather of {c}-value float32 chunks send 2 * 4 * {c} * "
                       f"({w} - 1) = {per_step} bytes per step (a ring all_reduce's, on the "
                       f"padded vector), {STEPS * per_step} in {STEPS} steps",
                       "a ZeRO-1 step sends what the two halves of a ring all_reduce send, on "
                       "the exercise's group: nothing more")


# ---- Exercise 2: the stage that fits

LAYERS = ((200, 301), (301, 257), (257, 10))  # Linear(in, out): out * in weights + out biases
UNITS = [out * (inp + 1) for inp, out in LAYERS]
MIB = 1 << 20


def model_state_bytes(stage, world, units=UNITS):
    """What one rank holds at its high-water mark in a step, as dist::ShardedDataParallel and
    dist::Adam hold it (float32: 4 bytes a value; Adam's two moments 8)."""
    psi, largest = sum(units), max(units)
    chunks = sum(-(-n // world) for n in units)  # each unit padded to W chunks of ceil(n / W)
    sharded = 16 * chunks                        # each shard, its gradient, Adam's moments of it
    return {0: 16 * psi,                         # DDP: all of it whole (buckets: not counted)
            1: 8 * psi + sharded,                # whole parameters and gradients (shards: copies)
            2: 4 * psi + 4 * largest + sharded,  # one unit's gradient whole, in its backward
            3: 8 * largest + sharded}[stage]     # one unit whole, with its gradient


def lowest_fit(budget, world):
    return next((s for s in range(4) if model_state_bytes(s, world) <= budget), None)


def budgets(world):
    """One budget (bytes) for each answer there is at this world size: below every closed form,
    and halfway between each closed form and the next larger one, and above all."""
    forms = sorted(set(model_state_bytes(s, world) for s in range(4)))
    candidates = [forms[0] // 2] + [(a + b) // 2 for a, b in zip(forms, forms[1:])]
    candidates.append(forms[-1] + MIB)
    chosen = {}
    for budget in candidates:
        chosen.setdefault(lowest_fit(budget, world), budget)
    return sorted(chosen.values())


def each_budget(bin_dir, program, world, exercise):
    """A runner: the program once per budget; returns the first Run, with every (budget, Run) as
    .budgets."""
    runs = []
    for budget in budgets(world):
        text = f"{budget / MIB:.9f}"  # to a thousandth of a byte: budgets stay where placed
        job = run_ddprun(bin_dir, program, world, ["--memory-budget-mib", text],
                         exercise.deadline_s)
        runs.append((float(text) * MIB, job))
    first = runs[0][1]
    first.budgets = runs
    return first


def judge_stage_that_fits(run):
    w = run.world
    for budget, job in run.budgets:
        said = f"with --memory-budget-mib {budget / MIB:.9f}"
        units = job.value(0, r"units of ([\d, ]+) values", str, "units of N, N, N values")
        if [int(n) for n in units.split(",")] != UNITS:
            raise Fail(f"rank 0 says the units hold {units} values; the exercise's model has "
                       f"{', '.join(map(str, UNITS))}", "keep the starter's model")
        for stage in range(4):
            needs = job.value(0, rf"stage {stage}(?: \(DDP\))? needs (\d+) bytes", int,
                              f"stage {stage} needs N bytes")
            want = model_state_bytes(stage, w)
            if needs != want:
                why = ""
                if stage == 3 and needs == want - 8 * max(UNITS):
                    why = (" (without the largest unit gathered whole, with its gradient, while "
                           "its backward runs)")
                elif stage == 2 and needs == want - 4 * max(UNITS):
                    why = " (without the unit whose gradient is whole during its backward)"
                raise Fail(f"rank 0 says stage {stage} needs {needs} bytes{why}; on {w} "
                           f"rank{'s' if w > 1 else ''} it holds {want}",
                           "count parameters, gradients, shards, shard gradients and Adam's "
                           "moments as ShardedDataParallel::memory() and Adam::state_bytes() do; "
                           "the shard of a unit of n values is ceil(n / W) values")
        expected = lowest_fit(budget, w)
        for rank in range(w):
            chosen = job.value(rank, r"chosen stage: (\S+)$", str, "chosen stage: S")
            if chosen != ("none" if expected is None else str(expected)):
                right = ("none fits: the smallest needs "
                         f"{min(model_state_bytes(s, w) for s in range(4))} bytes"
                         if expected is None else
                         f"the lowest that fits is stage {expected}, which needs "
                         f"{model_state_bytes(expected, w)} bytes")
                raise Fail(f"{said}, rank {rank} chose stage {chosen}; {right}",
                           "try the stages from 0 up and take the first whose bytes are at most "
                           "the budget; -1 when none is")
        if expected is None:
            if job.returncode != 2:
                raise Fail(f"{said} no stage fits, and the job exited with code {job.returncode}; "
                           "it should stop with 2 (a configuration that cannot run)",
                           "keep the starter's error for a budget that nothing fits")
            continue
        if job.returncode != 0:
            raise Fail(f"{said} the job exited with code {job.returncode}. "
                       f"{job.report()}")
        for rank in range(w):
            held = job.value(rank, r"model state at most (\d+) bytes", int,
                             "model state at most N bytes")
            if held > budget:
                raise Fail(f"{said}, rank {rank} measured {held} bytes of model state at stage "
                           f"{expected}: over the budget of {budget:.0f}",
                           "keep the starter's training and measurement as they are")
            want = model_state_bytes(expected, w)
            if held != want:
                raise Fail(f"{said}, rank {rank} measured {held} bytes of model state at stage "
                           f"{expected}; that stage holds {want}",
                           "keep the starter's training and measurement as they are")


EXERCISES = {
    "ex1": Exercise(
        title="ZeRO-1 by hand: reduce_scatter, step a shard, all_gather",
        judge=judge_zero1,
        worlds=(1, 2, 3),  # 11 values: padded at 2 and 3 ranks; from 3 on the ring's order shows
        args=("--numel", str(NUMEL), "--steps", str(STEPS)),
        hint="each rank steps its own chunk of the padded vector: its chunk's mean gradient "
             "comes in, and every chunk goes out to every rank"),
    "ex2": Exercise(
        title="the lowest ZeRO stage whose model state fits a budget",
        judge=judge_stage_that_fits,
        worlds=(1, 2, 3, 4),  # 1: only DDP fits; 2: stage 1 saves nothing (its copies); 3, 4: all
        runner=each_budget,
        any_exit_code=True,  # a budget that nothing fits must stop the job: the judge checks how
        hint="write each stage's bytes as the library holds them, then take the lowest that fits"),
}
