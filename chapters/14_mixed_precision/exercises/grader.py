"""Chapter 14's exercises, graded by what the ranks print (./tutorial check 14-ex1, 14-ex2).

Exercise 1 (GradScaler's rule by hand) is replayed here in plain Python: the same closed-form
gradients, scaled and rounded to float16 (struct's "e" format rounds to nearest even; 65520 and
beyond are inf), averaged over the ranks, unscaled, and GradScaler's rule (backoff 0.5, growth 2,
growth_interval clean steps). Each step's scale and verdict are checked on every rank, then the
final values.

Exercise 2 (bfloat16 by hand) is recomputed from the bits: every value the program rounds is
rounded here too (the float32's top 16 bits, rounded to nearest even on the 16 dropped; any NaN
becomes 0x7fc0), and the first wrong one is named with its kind (a NaN, below half-way, above
half-way, a tie).
"""
import math
import re
import struct

from grading import Exercise, Fail

# ---- Exercise 1: GradScaler's rule by hand

STEPS, INTERVAL, SCALE, LR = 16, 4, 8192.0, 0.5
TOLERANCE = 1e-5  # float32 against this double replay: far below the mistakes' effects (> 1e-2)


def half(x):
    """x rounded to float16, as a float (inf from 65520 on, where float16 rounds to inf)."""
    if math.isnan(x) or abs(x) >= 65520:
        return math.copysign(math.inf, x) if not math.isnan(x) else x
    return struct.unpack("<e", struct.pack("<e", x))[0]


def gradient(rank, world, step):
    g = [(step + 1 + rank + i) / 64 for i in range(4)]
    if step % 4 == 3 and rank == step % world:
        g = [v * 64 for v in g]
    return g


def replay(world, unscale=True):
    """[(scale before, scale after, skipped)] per step, and the final values."""
    w, scale, tracker, rows = [1.0, 2.0, 3.0, 4.0], SCALE, 0, []
    for step in range(STEPS):
        mean = [sum(half(gradient(r, world, step)[i] * scale) for r in range(world)) / world
                for i in range(4)]
        found = any(math.isinf(v) or math.isnan(v) for v in mean)
        before = scale
        if not found:
            w = [p - LR * (g / scale if unscale else g) for p, g in zip(w, mean)]
            tracker += 1
            if tracker == INTERVAL:
                scale, tracker = scale * 2, 0
        else:
            scale, tracker = scale * 0.5, 0
        rows.append((before, scale, found))
    return rows, w


def step_line(run, rank, step):
    pattern = rf"^step {step}: scale (\S+) -> (\S+), (skipped|stepped)$"
    for line in run.lines(rank):
        m = re.match(pattern, line)
        if m:
            try:
                return float(m.group(1)), float(m.group(2)), m.group(3) == "skipped"
            except ValueError:
                break
    raise Fail(f"rank {rank} printed no line 'step {step}: scale A -> B, skipped|stepped'",
               "keep the program's print lines as the starter has them: the grader reads them")


def judge_scaler(run):
    w = run.world
    rows, final = replay(w)
    since = 0  # clean steps since the last growth or backoff, in the replay
    for k, (before, after, found) in enumerate(rows, start=1):
        for rank in range(w):
            a, b, skipped = step_line(run, rank, k)
            if skipped != found:
                raise Fail(f"rank {rank} {'skipped' if skipped else 'took'} step {k}; its mean "
                           f"gradient, scaled by {before:g}, "
                           f"{'holds an inf' if found else 'is finite'}, so GradScaler "
                           f"{'skips' if found else 'takes'} it",
                           "an inf or a NaN anywhere in the averaged gradient skips the step; "
                           "inf is not NaN: look for both")
            if a != before:
                raise Fail(f"rank {rank}'s scale at step {k} is {a:g}; GradScaler's is {before:g}",
                           "the scale changes only in update(), once a step")
            if b != after:
                if found:
                    why = (f"after the inf at step {k} the scale is {b:g}; GradScaler backs off "
                           f"from {before:g} to {after:g} (x0.5)")
                elif b > before:
                    why = (f"the scale grows to {b:g} at step {k}, after only {since + 1} clean "
                           f"step(s) since the last growth or backoff; GradScaler grows after "
                           f"{INTERVAL}")
                else:
                    why = (f"the scale stays {b:g} at step {k}, the {since + 1}th clean step since "
                           f"the last growth or backoff; GradScaler grows to {after:g} at the "
                           f"{INTERVAL}th")
                raise Fail(f"rank {rank}: {why}",
                           "count clean steps from the last change of scale: a backoff starts the "
                           "count over, and the growth comes at the interval's last step, not after")
        since = 0 if after != before or found else since + 1
    for rank in range(w):
        text = run.value(rank, r"^final: (.*)$", str, "final: v0, v1, v2, v3")
        try:
            got = [float(v) for v in text.split(",")]
        except ValueError:
            raise Fail(f"rank {rank} printed 'final: {text}', not a list of numbers") from None
        close = lambda xs, ys: len(xs) == len(ys) and all(  # noqa: E731
            abs(x - y) <= TOLERANCE * max(1.0, abs(y)) for x, y in zip(xs, ys))
        if close(got, final):
            continue
        if not all(math.isfinite(v) for v in got):
            raise Fail(f"rank {rank} ends with [{text}]: a step was taken with an inf or NaN "
                       f"gradient; GradScaler's steps end with "
                       f"[{', '.join(f'{v:.6g}' for v in final)}]",
                       "a skipped step must leave the weights as they were")
        if close(got, replay(w, unscale=False)[1]):
            raise Fail(f"rank {rank} ends with [{text}]: the steps used the scaled gradient, S "
                       f"times too large (not unscaled)",
                       "divide the gradient by the scale before the optimizer steps")
        raise Fail(f"rank {rank} ends with [{text}]; GradScaler's steps end with "
                   f"[{', '.join(f'{v:.6g}' for v in final)}]",
                   "unscale the averaged gradient by this step's scale, then one SGD step")


# ---- Exercise 2: bfloat16 by hand

def bf16_bits(bits):
    """torch's float32 -> bfloat16: round to nearest even on the 16 dropped bits; NaN -> 0x7fc0."""
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def kind(bits):
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return "a NaN"
    low = bits & 0xFFFF
    if low == 0x8000:
        return "a tie (exactly half-way: to the even neighbour)"
    return "below half-way (rounds down)" if low < 0x8000 else "above half-way (rounds up)"


KIND_ORDER = ["below half-way (rounds down)", "above half-way (rounds up)",
              "a tie (exactly half-way: to the even neighbour)", "a NaN"]


def judge_bfloat16(run):
    w = run.world
    wrong = {}
    seen = []
    for rank in range(w):
        for line in run.lines(rank):
            m = re.match(r"^round (\d+): ([0-9a-f]{8}) -> ([0-9a-f]+)$", line)
            if not m:
                if line.startswith("round "):
                    raise Fail(f"rank {rank} printed '{line}', not 'round I: XXXXXXXX -> YYYY'")
                continue
            seen.append(int(m.group(1)))
            bits, got = int(m.group(2), 16), int(m.group(3), 16)
            want = bf16_bits(bits)
            if got != want:
                wrong.setdefault(kind(bits), (rank, bits, got, want))
    count = run.value(0, r"values: (\d+)", int, "values: N")
    if sorted(seen) != list(range(count)):
        raise Fail(f"the ranks printed {len(seen)} rounded values, {len(set(seen))} of them "
                   f"distinct; the program rounds {count}, each on one rank",
                   "keep the starter's split of the values over the ranks")
    for k in KIND_ORDER:
        if k in wrong:
            rank, bits, got, want = wrong[k]
            value = struct.unpack("<f", struct.pack("<I", bits))[0]
            raise Fail(f"rank {rank} rounds {bits:08x} ({value!r}), {k}, to {got:04x}; "
                       f"bfloat16 holds {want:04x}",
                       "keep the top 16 bits, add one when the 16 dropped are more than half, or "
                       "exactly half and the kept last bit is odd; a NaN stays a NaN")


EXERCISES = {
    "ex1": Exercise(
        title="GradScaler's rule by hand: skip on inf/NaN, back off, grow",
        judge=judge_scaler,
        worlds=(1, 2, 3),
        args=("--steps", str(STEPS), "--growth-interval", str(INTERVAL), "--init-scale",
              f"{SCALE:g}", "--lr", f"{LR:g}"),
        hint="skip the step when the averaged gradient holds an inf or a NaN; the scale halves "
             "then, and doubles after growth_interval clean steps in a row"),
    "ex2": Exercise(
        title="float32 to bfloat16 by hand, from the bits",
        judge=judge_bfloat16,
        worlds=(1, 2),
        hint="bfloat16 is a float32's top 16 bits, rounded to nearest even on the 16 it drops"),
}
