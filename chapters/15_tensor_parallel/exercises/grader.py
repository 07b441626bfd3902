"""Chapter 15's exercises, graded by what the ranks print (./tutorial check 15-ex1, 15-ex2).

Both are judged against one process training the unsplit block, recomputed here in plain Python
(doubles, from the same closed-form data and initial weights as tp_exercise.h): Linear(8, 16),
ReLU, Linear(16, 4), mse_loss, SGD at lr 0.1 on 16 rows a step. float32 and tensor parallelism
round differently from this replay, by about 1e-7 of each value; the tolerance, 1e-4, is far
above that and far below what any of the mistakes changes (a factor of T, or a missing sum).

Exercise 1 (f and g by hand): the all_reduces counted in forward and in backward (the flight
recorder's), then the losses and the weights after training, then d loss / d x at step 1 (the
only value f's backward changes).

Exercise 2 (the mesh's groups by hand): every rank's tp and dp groups against the row-major grid,
then the 2-D run's losses.
"""
import re
import struct

from grading import Exercise, Fail, run_ddprun

IN, HIDDEN, OUT, ROWS, LR = 8, 16, 4, 16, 0.1
STEPS = 3
TOLERANCE = 1e-4


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def closed_form(rows, cols, a, b, m, div):
    return [[f32(((a * r + b * c) % m - m // 2) / div) for c in range(cols)] for r in range(rows)]


def batch(first, size):
    xs, ys = [], []
    for i in range(first, first + size):
        row = [((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0 for j in range(IN)]
        xs.append([f32(v) for v in row])
        ys.append([f32(sum(float((3 * k + 5 * j) % 7 - 3) * row[j] for j in range(IN)) / 4.0)
                   for k in range(OUT)])
    return xs, ys


def one_process(steps):
    """One process's training: the losses, d loss / d x at step 1, the final weights."""
    w1, b1 = closed_form(HIDDEN, IN, 31, 17, 23, 20.0), closed_form(1, HIDDEN, 0, 5, 11, 50.0)[0]
    w2, b2 = closed_form(OUT, HIDDEN, 13, 7, 19, 20.0), closed_form(1, OUT, 0, 3, 7, 50.0)[0]
    losses, grad_x0 = [], None
    for step in range(steps):
        xs, ys = batch(step * ROWS, ROWS)
        hs = [[b1[o] + sum(w1[o][i] * x[i] for i in range(IN)) for o in range(HIDDEN)] for x in xs]
        acts = [[max(v, 0.0) for v in h] for h in hs]
        outs = [[b2[k] + sum(w2[k][o] * a[o] for o in range(HIDDEN)) for k in range(OUT)]
                for a in acts]
        n = ROWS * OUT
        losses.append(sum((o - y) ** 2 for out, yr in zip(outs, ys) for o, y in zip(out, yr)) / n)
        gout = [[2 * (o - y) / n for o, y in zip(out, yr)] for out, yr in zip(outs, ys)]
        gact = [[sum(g[k] * w2[k][o] for k in range(OUT)) for o in range(HIDDEN)] for g in gout]
        gh = [[ga[o] if h[o] > 0 else 0.0 for o in range(HIDDEN)] for ga, h in zip(gact, hs)]
        if step == 0:
            grad_x0 = [sum(g[o] * w1[o][i] for o in range(HIDDEN)) for g in gh for i in range(IN)]
        gw2 = [[sum(g[k] * a[o] for g, a in zip(gout, acts)) for o in range(HIDDEN)]
               for k in range(OUT)]
        gb2 = [sum(g[k] for g in gout) for k in range(OUT)]
        gw1 = [[sum(g[o] * x[i] for g, x in zip(gh, xs)) for i in range(IN)] for o in range(HIDDEN)]
        gb1 = [sum(g[o] for g in gh) for o in range(HIDDEN)]
        w2 = [[w - LR * g for w, g in zip(wr, gr)] for wr, gr in zip(w2, gw2)]
        b2 = [b - LR * g for b, g in zip(b2, gb2)]
        w1 = [[w - LR * g for w, g in zip(wr, gr)] for wr, gr in zip(w1, gw1)]
        b1 = [b - LR * g for b, g in zip(b1, gb1)]
    return losses, grad_x0, (w1, b1, w2, b2)


def numbers(run, rank, pattern, what):
    text = run.value(rank, pattern, str, what)
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise Fail(f"rank {rank} printed '{text}' for {what}, not a list of numbers") from None


def close(got, want):
    return len(got) == len(want) and all(
        abs(g - w) <= TOLERANCE * max(1.0, abs(w)) for g, w in zip(got, want))


def first_difference(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if abs(g - w) > TOLERANCE * max(1.0, abs(w)):
            return f"value {i}: {g:.6g}, one process {w:.6g} ({g / w:.3g} times)" if w else \
                f"value {i}: {g:.6g}, one process 0"
    return f"{len(got)} values, one process {len(want)}"


def require_success(run):
    if run.returncode != 0:
        raise Fail(f"the job on {run.world} ranks failed (exit code {run.returncode}). "
                   f"{run.report()}",
                   "every rank must call new_group for every group, members or not, in the same "
                   "order")


# ---- Exercise 1: f and g by hand

def judge_conjugate(run):
    w, h = run.world, HIDDEN // run.world
    losses, grad_x0, (w1, b1, w2, b2) = one_process(STEPS)
    for rank in range(w):
        for step in range(1, STEPS + 1):
            m = re.search(r"all_reduce calls: forward (-?\d+), backward (-?\d+)",
                          next((l for l in run.lines(rank) if l.startswith(f"step {step}:")), ""))
            if not m:
                raise Fail(f"rank {rank} printed no line 'step {step}: loss L; all_reduce calls: "
                           f"forward F, backward B'",
                           "keep the program's print lines as the starter has them: the grader "
                           "reads them")
            fwd, bwd = int(m.group(1)), int(m.group(2))
            if (fwd, bwd) != (1, 1):
                raise Fail(f"rank {rank} made {fwd} all_reduce(s) in forward and {bwd} in "
                           f"backward at step {step}; the block needs one each way",
                           "g all_reduces in forward, f in backward; f's forward and g's backward "
                           "move nothing")
    for rank in range(w):
        got = [numbers(run, rank, rf"^step {k}: loss ([^;]*);", f"step {k}'s loss")[0]
               for k in range(1, STEPS + 1)]
        if not close(got, losses):
            raise Fail(f"rank {rank}'s losses are {', '.join(f'{v:.6g}' for v in got)}; one "
                       f"process's are {', '.join(f'{v:.6g}' for v in losses)}",
                       "g's forward must give every rank the whole output: the sum of the "
                       "partial sums, not their mean")
        first = rank * h
        weights = [
            ("fc1.weight", r"^fc1\.weight rows \d+\.\.\d+: (.*)$",
             [v for r in w1[first:first + h] for v in r]),
            ("fc1.bias", r"^fc1\.bias rows \d+\.\.\d+: (.*)$", b1[first:first + h]),
            ("fc2.weight", r"^fc2\.weight columns \d+\.\.\d+: (.*)$",
             [v for r in w2 for v in r[first:first + h]])]
        if rank == 0:
            weights.append(("fc2.bias", r"^fc2\.bias: (.*)$", b2))
        for what, pattern, want in weights:
            got = numbers(run, rank, pattern, what)
            if not close(got, want):
                raise Fail(f"rank {rank}'s {what} after training differs from one process's "
                           f"slice: {first_difference(got, want)}",
                           "rank r keeps rows (fc1) and columns (fc2) r*16/W to (r+1)*16/W - 1 of "
                           "one process's weights, in the order they have there")
    for rank in range(w):
        got = numbers(run, rank, r"^d loss / d x: (.*)$", "d loss / d x")
        if not close(got, grad_x0):
            raise Fail(f"rank {rank}'s d loss / d x at step 1 differs from one process's: "
                       f"{first_difference(got, grad_x0)}",
                       "f's backward must give every rank the whole gradient: the sum of each "
                       "rank's part, not their mean")


# ---- Exercise 2: the mesh's groups by hand

MESHES = {4: 2, 8: 4}  # world size -> tp: 2 x 2 and 2 x 4
MESH_STEPS = 4


def run_mesh(bin_dir, program, world, exercise):
    return run_ddprun(bin_dir, program, world, ("--tp", str(MESHES[world]), "--steps",
                                                str(MESH_STEPS)), exercise.deadline_s,
                      exercise.env)


def parse_members(text):
    return [int(v) for v in text.strip("[]").split(",") if v.strip()]


def judge_mesh(run):
    world, tp = run.world, MESHES[run.world]
    dp = world // tp
    printed = all(any(line.startswith("tp group: ") for line in run.lines(rank))
                  for rank in range(world))
    if not printed:
        require_success(run)  # a job that failed before every rank had its groups
    for rank in range(world):
        line = run.value(rank, r"^(tp group: .*)$", str, "tp group: [...], dp group: [...]")
        m = re.match(r"^tp group: (\[[^\]]*\]), dp group: (\[[^\]]*\])$", line)
        if not m:
            raise Fail(f"rank {rank} printed '{line}', not 'tp group: [...], dp group: [...]'")
        got_tp, got_dp = parse_members(m.group(1)), parse_members(m.group(2))
        row = [rank // tp * tp + j for j in range(tp)]
        column = [i * tp + rank % tp for i in range(dp)]
        if got_tp != row:
            raise Fail(f"at dp {dp} x tp {tp}, rank {rank}'s tp group is {got_tp}; row-major, "
                       f"its row is {row}",
                       "rank r sits at row r / tp, column r % tp; a tp group is a row")
        if got_dp != column:
            raise Fail(f"at dp {dp} x tp {tp}, rank {rank}'s dp group is {got_dp}; row-major, "
                       f"its column is {column}",
                       "rank r sits at row r / tp, column r % tp; a dp group is a column")
    require_success(run)
    losses = one_process(MESH_STEPS)[0]
    for rank in range(world):
        got = [numbers(run, rank, rf"^step {k}: loss (.*)$", f"step {k}'s loss")[0]
               for k in range(1, MESH_STEPS + 1)]
        if not close(got, losses):
            raise Fail(f"at dp {dp} x tp {tp}, rank {rank}'s 2-D losses are "
                       f"{', '.join(f'{v:.6g}' for v in got)}; one process's are "
                       f"{', '.join(f'{v:.6g}' for v in losses)}",
                       "the layers split over the tp group, the gradients averaged over the dp "
                       "group: keep each in its place")


EXERCISES = {
    "ex1": Exercise(
        title="the conjugate operators f and g by hand",
        judge=judge_conjugate,
        worlds=(2, 4),
        args=("--steps", str(STEPS)),
        hint="g sums the partial outputs in forward, f sums the input's gradient in backward"),
    "ex2": Exercise(
        title="a 2-D mesh's groups by hand with new_group",
        judge=judge_mesh,
        worlds=(4, 8),
        runner=run_mesh,
        any_exit_code=True,  # the judge reads the groups even where a wrong one failed the job
        hint="row-major: rank r is at row r / tp, column r % tp; rows are tp groups, columns dp "
             "groups; every rank makes every group, in the same order"),
}
