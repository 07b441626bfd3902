"""Chapter 08's exercises, graded by what the ranks print (./tutorial check 08-ex1, 08-ex2, 08-ex3).

Each judge works out the right answer itself: the closed forms of exercises 1 and 2, and for
exercise 3 a plain-Python replay of the training (the same samples, batches and SGD steps, in
double precision), at one process and at W ranks, at 4 ranks also where the rule stops holding;
tools/grader/grading.py runs the program at each world size.
"""
import math
import struct

from grading import Exercise, Fail, close, run_command


# ---- Exercise 1: averaged gradients keep every replica's gap to rank 0 as it started

def judge_no_broadcast(run):
    for rank in range(run.world):
        start = 0.25 * rank  # rank r starts at w = -0.5 + 0.25 r
        before = run.value(rank, r"w - rank 0's w = (\S+) at the start", what="... at the start")
        after = run.value(rank, r", (\S+) after 4 epochs", what="..., X after 4 epochs")
        if not close(before, start, abs_=1e-6):
            raise Fail(f"rank {rank} says its gap to rank 0 at the start is {before:g}; it starts "
                       f"at {start:g}",
                       "keep the starter's initial weights: rank r starts at w = -0.5 + 0.25 r")
        if not close(after, start, abs_=1e-4):
            raise Fail(f"rank {rank}'s gap to rank 0 after 4 epochs is {after:g}; with every "
                       f"rank stepping on the same averaged gradient it stays {start:g}",
                       "the replicas stay apart by the same gap only if every rank steps on "
                       "the same gradient: is each parameter's gradient the mean over the "
                       "ranks when the step is taken?")
        ddp = run.value(rank, r"with DistributedDataParallel: w - rank 0's w = (\S+)$",
                        what="with DistributedDataParallel: ...")
        if ddp != 0:
            raise Fail(f"rank {rank}'s gap to rank 0 with DistributedDataParallel is {ddp:g}; "
                       "DDP broadcasts rank 0's weights first, so it is exactly 0",
                       "leave the starter's DistributedDataParallel part as it is")


# ---- Exercise 2: all_reduce(SUM) at lr is the mean at W x lr

LR = 0.01


def judge_sum_not_mean(run):
    w = run.world
    for rank in range(w):
        ddp_lr = run.value(rank, r"mean \(DDP\) at lr (\S+):", what="mean (DDP) at lr X")
        # float(): to 1e-5, not to the printed digit (0.01 is not 0.02)
        if not close(float(ddp_lr), LR * w, rel=1e-5):
            raise Fail(f"rank {rank} trains DDP at learning rate {ddp_lr:g}; the sum of {w} "
                       f"ranks' gradients is {w} times their mean, so DDP needs {LR} x {w} = "
                       f"{LR * w:g}",
                       "how many times larger than their mean is the sum of W gradients?")
        for name in ("w", "b"):
            summed = run.value(rank, rf"SUM at lr \S+: .*\b{name} = ([^,\s]+)", what="SUM ...")
            mean = run.value(rank, rf"mean \(DDP\) at lr \S+: .*\b{name} = ([^,\s]+)",
                             what="mean (DDP) ...")
            if not close(summed, mean, rel=1e-5):
                raise Fail(f"rank {rank}: after training, {name} = {summed:g} with the sum and "
                           f"{mean:g} with DDP; at the right learning rate they agree to float32 "
                           "rounding",
                           "train DDP at the learning rate of the summed gradients")


# ---- Exercise 3: the linear scaling rule, against a replay of the training

SAMPLES, BATCH, EPOCHS, BASE_LR = 240, 8, 6, 0.01


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def sample(i):
    """The program's sample i, rounded to float32 as it computes it."""
    x = f32(-2.0 + f32(f32(4.0 * float((37 * i) % SAMPLES)) / SAMPLES))
    noise = f32(float((7 * i) % 11 - 5) / 50.0)
    return x, f32(f32(f32(3.0 * x) + 2.0) + noise)


def replay(world, lr, w=-0.5, b=0.25):
    """DDP on `world` ranks without shuffling: rank r's shard is positions r, r + W, ... of the
    padded order, its batches BATCH of them at a time; each step uses the mean over the ranks of
    their batches' mean gradients. Returns the epochs' losses (over every rank's samples)."""
    data = [sample(i) for i in range(SAMPLES)]
    per_rank = -(-SAMPLES // world)
    order = list(range(SAMPLES)) + list(range(per_rank * world - SAMPLES))
    shards = [order[r::world] for r in range(world)]
    losses = []
    for _ in range(EPOCHS):
        loss_sum = count = 0.0
        for k in range(0, per_rank, BATCH):
            grad_w = grad_b = 0.0
            for shard in shards:
                batch = shard[k:k + BATCH]
                for i in batch:
                    x, y = data[i]
                    err = w * x + b - y
                    loss_sum += err * err
                    count += 1
                    grad_w += 2 * err * x / len(batch) / world
                    grad_b += 2 * err / len(batch) / world
            w -= lr * grad_w
            b -= lr * grad_b
        losses.append(loss_sum / count)
    return losses


def check_scaling(run, base_lr, where=""):
    """Every rank's learning rate is base_lr x W, and rank 0's epochs are the replay's: W ranks at
    that rate, and one process with batches of BATCH at base_lr."""
    w = run.world
    scaled = base_lr * w
    for rank in range(w):
        lr = run.value(rank, r"learning rate (\S+) for", what="learning rate X")
        lr = float(lr)  # to 1e-5, not to the printed digit (0.01 is not 0.02)
        if not close(lr, scaled, rel=1e-5):
            rule = (" (not scaled)" if close(lr, base_lr, rel=1e-5) else
                    " (the square-root rule)" if close(lr, base_lr * math.sqrt(w), rel=1e-5)
                    else "")
            raise Fail(f"{where}rank {rank} trains at learning rate {lr:g}{rule}; global batches "
                       f"of {w} x {BATCH} take {w} times fewer steps an epoch, so the linear "
                       f"scaling rule gives {base_lr:g} x {w} = {scaled:g}",
                       "how many times fewer steps does an epoch take on W ranks?")
    ours, alone = replay(w, scaled), replay(1, base_lr)
    for epoch in range(1, EPOCHS + 1):
        line = f"epoch {epoch}: loss "
        got = run.value(0, rf"^{line}(\S+) on", what=line + "X on ...")
        one = run.value(0, rf"^{line}.*, (\S+) for one process", what=line + "..., one process")
        if not close(one, alone[epoch - 1], rel=1e-4):
            raise Fail(f"{where}rank 0 says one process's epoch-{epoch} loss is {one:g}; it is "
                       f"{alone[epoch - 1]:.6g}",
                       "leave the one process as the starter has it: batches of 8 at the base "
                       "learning rate")
        if not close(got, ours[epoch - 1], rel=1e-4):
            raise Fail(f"{where}rank 0 says the epoch-{epoch} loss on {w} ranks is {got:g}; at "
                       f"learning rate {scaled:g} it is {ours[epoch - 1]:.6g}",
                       "train the DDP replica at the learning rate you print")


# Where the rule stops: at base lr 0.2, 4 ranks step at 0.8, past 2 / 2.67 = 0.75 (2.67 being the
# largest curvature of the mean loss over the 240 samples): the replay's loss grows every epoch,
# from 35.7 to about 2.5e5, while one process at 0.2 settles at 0.0043.
FAR_LR, FAR_WORLD = 0.2, 4


def judge_linear_scaling(run):
    check_scaling(run, BASE_LR)
    if run.world == FAR_WORLD:
        far = run_command(run.command + ["--base-lr", str(FAR_LR)], run.world, 60)
        where = f"with --base-lr {FAR_LR}, where the rule stops holding: "
        if far.returncode != 0:
            raise Fail(f"{where}the job exited with code {far.returncode}. "
                       f"{far.report()}")
        check_scaling(far, FAR_LR, where)


EXERCISES = {
    "ex1": Exercise(
        title="DDP without its broadcast: the replicas never meet",
        judge=judge_no_broadcast,
        worlds=(2, 3),
        hint="without the broadcast the replicas start apart: what must be the same on every "
             "rank for them to keep their gap?"),
    "ex2": Exercise(
        title="summed gradients are DDP at world_size times the learning rate",
        judge=judge_sum_not_mean,
        worlds=(2, 3),
        hint="the sum of W gradients is W times their mean"),
    "ex3": Exercise(
        title="the linear scaling rule: W ranks at W times the lr track one process",
        judge=judge_linear_scaling,
        worlds=(1, 2, 3, 4),
        hint="W ranks take W times fewer steps an epoch, each on a W times larger batch"),
}
