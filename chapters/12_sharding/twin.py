"""Chapter 12's twin: the same Fashion-MNIST MLP trained with Adam, as PyTorch 1.13 on Gloo can
shard it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py --stage 1
It takes the flags of ch12_sharding that change what is computed (--stage, --epochs,
--train-samples, --test-samples, --batch-size, --lr, --seed) and prints the same lines where
torch can say the same thing. The data, the initial weights and the sampler's order are the same
bits as in main.cpp (chapter 09's IDX files shrunk the same way, the same torch.randint draws, the
same DistributedSampler); torch then computes in float32 in its own order, so
tests/chapters/chapter_check.py parity compares the numbers within a tolerance.

  --stage 0  DistributedDataParallel + torch.optim.Adam.
  --stage 1  DistributedDataParallel + ZeroRedundancyOptimizer(optimizer_class=torch.optim.Adam):
             torch's ZeRO-1. Each rank keeps Adam's state for whole parameters only (a sorted-greedy
             partition, not the program's even flat shards) and broadcasts them after its step, so
             the state each rank holds and the bytes it sends differ from the program's; the
             weights do not.
  --stage 2, --stage 3  torch 1.13's FullyShardedDataParallel refuses to run without CUDA ("FSDP
             does not support CPU only execution", in its lazy init), so the twin checks what these
             stages compute, not how: each rank replays the whole global batch alone. At each step
             it takes the W ranks' batches (each rank's DistributedSampler indices), computes each
             one's gradient of its mean loss, averages the W gradients (what DDP's all_reduce and
             FSDP's reduce_scatter make of them), and makes one Adam step on the whole model, from
             rank 0's initial weights.

FSDP runs on the CPU with Gloo from torch 2.2 (pytorch #112145), given
device_id=torch.device("cpu"). FSDP2, torch.distributed.fsdp.fully_shard (2.6;
torch.distributed._composable.fsdp in 2.4 and 2.5), needed CUDA at first ("FSDP requires CUDA for
streams") and takes a CPU device mesh since pytorch #136843 and #145935 (early 2025). Stage 3
with one unit per Linear layer, as the program shards it, would read:

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # one unit: its weight and bias, gathered together
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # steps each rank's shards

(With reshard_after_forward=False, each unit stays whole from its forward to its backward and is
gathered once a step: stage 2's traffic, though its parameters are still sharded between steps.)

--prefetch, --check, --bucket-mb, --throughput and --data-dir are accepted. --bucket-mb is DDP's
bucket_cap_mb at stages 0 and 1. --throughput (stages 0 and 1; bench/run.py reads it) prints the
training steps' samples per second, as the program's flag does, and the Adam state of the largest
rank. With --check (the default) the twin checks at stage 1 that
ZeroRedundancyOptimizer ends with DDP + Adam's weights bit for bit, and at stages 2 and 3 that the
replay ends with them bit for bit at 1 and 2 ranks, training DDP from the same start. From 3
ranks on the replay adds the ranks' gradients in another order than Gloo's all_reduce, and Adam
magnifies the last bit by an amount that grows with --lr (1.7e-5 at --lr 0.01 on 3 ranks), so
no tolerance fixed in advance holds: there the twin prints the largest difference and does not
judge it (the program compares bit for bit, against DDP adding in its stages' order). --prefetch
and --data-dir change nothing here (the twin reads the IDX files itself). The model-state table
is a closed form, recomputed here; what a rank measures (model state, bytes sent) is the
program's own. So is --mixed-precision's table (ZeRO's 2 + 2 + 12 bytes a value) and its line for
this run: torch's way to train so is FSDP's mixed_precision=MixedPrecision(param_dtype=...,
reduce_dtype=...), which in 1.13 needs CUDA as FSDP does; the twin trains in fp32 either way.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler
from torch.utils.data.distributed import DistributedSampler

# Chapter 09's data and initial weights, as its twin reads and draws them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "09_ddp_classifier"))
from fashion_data import (CLASSES, PIXELS, add_training_flags, join_and_read, out0,  # noqa: E402
                          print_throughput, test_shard, uniform_init)

WIDTHS = (PIXELS, 512, 512, 512, CLASSES)
STAGES = {
    0: "stage 0: nothing sharded (DDP)",
    1: "stage 1: optimizer state sharded (ZeRO-1)",
    2: "stage 2: optimizer state and gradients sharded (ZeRO-2)",
    3: "stage 3: optimizer state, gradients and parameters sharded (ZeRO-3, FSDP)",
}


def make_model(seed):
    """196 -> Linear -> ReLU -> Linear -> ReLU -> Linear -> ReLU -> Linear -> 10 logits, its layers
    drawn in order from one generator seeded with `seed`."""
    layers = []
    for i, (a, b) in enumerate(zip(WIDTHS, WIDTHS[1:])):
        layers.append(nn.Linear(a, b))
        if i + 2 < len(WIDTHS):
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    g = torch.Generator()
    g.manual_seed(seed)
    for layer in model:
        if isinstance(layer, nn.Linear):
            uniform_init(layer, g)
    return model


def unit_numels():
    return [a * b + b for a, b in zip(WIDTHS, WIDTHS[1:])]


def closed_form(stage, world):
    """Per-rank bytes for parameters + gradients + Adam's two moments, fp32: ZeRO's closed forms,
    with Ψ values in all and c = Σ⌈n_u/W⌉ (each layer cut into W equal chunks, the last padded)."""
    psi = sum(unit_numels())
    c = sum(-(-n // world) for n in unit_numels())
    parameters = 4 * (c if stage == 3 else psi)
    gradients = 4 * (c if stage >= 2 else psi)
    state = 8 * (psi if stage == 0 else c)
    return parameters + gradients + state


def mixed_form(stage, world):
    """ZeRO's mixed-precision accounting (section 3.1): fp16/bf16 parameters and gradients, 2 + 2
    bytes a value, fp32 master weights and Adam's two moments, 12; sharded as the stage says."""
    psi = sum(unit_numels())
    c = sum(-(-n // world) for n in unit_numels())
    return (2 * (c if stage == 3 else psi) + 2 * (c if stage >= 2 else psi)
            + 12 * (psi if stage == 0 else c))


def print_mixed_table(stage, world):
    out0("mixed precision, ZeRO's section 3.1: fp16/bf16 parameters and gradients (2 + 2 bytes a "
         "value), fp32 master weights and Adam's two moments (12): still 16Ψ unsharded; each "
         "stage shards more of it:")
    out0("  stage      half params half grads master+Adam" + "".join(
        f"{'W=' + str(w):>12}" for w in (1, 2, 4)))
    forms = ["2Ψ          2Ψ         12Ψ", "2Ψ          2Ψ         12c",
             "2Ψ          2c         12c", "2c          2c         12c"]
    for s in range(4):
        cells = "".join(f"{mixed_form(s, w):>12,}" for w in (1, 2, 4))
        out0(f"  {(str(s) + (' (DDP)' if s == 0 else '')):<11}{forms[s]:<33}{cells}")
    psi, passes = sum(unit_numels()), 3 if stage == 3 else 2
    out0(f"mixed precision at stage {stage}, W={world}: {mixed_form(stage, world):,} bytes of "
         f"model state per rank (fp32: {closed_form(stage, world):,}); {passes}Ψ(W-1)/W values "
         f"sent per step, 2 bytes each: {2 * passes * psi * (world - 1) // world:,} bytes (fp32: "
         f"{4 * passes * psi * (world - 1) // world:,})")


def print_table():
    out0("per-rank bytes of model state, fp32 Adam, ZeRO's closed forms (Ψ values, "
         "c = Σ⌈n_u/W⌉ ≈ Ψ/W; stage 3 also holds one layer whole during its turn):")
    out0("  stage      parameters  gradients  Adam state" + "".join(
        f"{'W=' + str(w):>12}" for w in (1, 2, 4)))
    forms = ["4Ψ          4Ψ         8Ψ", "4Ψ          4Ψ         8c",
             "4Ψ          4c         8c", "4c          4c         8c"]
    for stage in range(4):
        cells = "".join(f"{closed_form(stage, w):>12,}" for w in (1, 2, 4))
        out0(f"  {(str(stage) + (' (DDP)' if stage == 0 else '')):<11}{forms[stage]:<33}{cells}")


def count_correct(model, images, labels, indices):
    correct = 0
    with torch.no_grad():
        for b in BatchSampler(indices, 250, drop_last=False):
            correct += (model(images[b]).argmax(1) == labels[b]).sum().item()
    return correct


def train_distributed(args, stage, data, report, timing=None):
    """Stages 0 and 1: DDP from rank 0's initial weights (DDP's constructor broadcasts them), and
    Adam, whole (stage 0) or as ZeroRedundancyOptimizer (stage 1). Returns the model. With a
    `timing` dict (--throughput), adds the training steps' seconds and samples to it, and the
    bytes of this rank's Adam state."""
    train_x, train_y, test_x, test_y = data
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model(args.seed + rank)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    if stage == 1:
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam,
                                            lr=args.lr)
    else:
        optimizer = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(train_y)), seed=args.seed)
    batch_sampler = BatchSampler(sampler, args.batch_size, drop_last=False)
    for epoch in range(args.epochs):
        started = time.perf_counter()
        sampler.set_epoch(epoch)
        batches = list(batch_sampler)
        loss_sum = 0.0
        for b in batches:
            optimizer.zero_grad()
            loss = criterion(ddp(train_x[b]), train_y[b])
            loss.backward()  # DDP: every gradient is the ranks' mean
            optimizer.step()  # ZeRO: each rank steps its parameters, then broadcasts them
            loss_sum += loss.item()
        if timing is not None:  # the training steps only, not the evaluation below
            timing["seconds"] += time.perf_counter() - started
            timing["samples"] += sum(len(b) for b in batches)
        mean_loss = torch.tensor([loss_sum / len(batches)], dtype=torch.float64)
        dist.all_reduce(mean_loss)
        kept = test_shard(len(test_y))  # each image once, on one rank
        counts = torch.tensor([count_correct(model, test_x, test_y, kept), len(kept)])
        dist.all_reduce(counts)
        report(epoch, mean_loss.item() / world, *counts.tolist())
    if timing is not None:
        local = optimizer.optim if stage == 1 else optimizer  # ZeRO: this rank's own Adam
        timing["state_bytes"] = sum(v.numel() * v.element_size() for s in local.state.values()
                                    for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
    return model


def train_replayed(args, data, report):
    """Stages 2 and 3, replayed: this rank alone computes every rank's batch of each step, from
    rank 0's initial weights, and steps the whole model on the mean of the ranks' gradients."""
    train_x, train_y, test_x, test_y = data
    world = dist.get_world_size()
    model = make_model(args.seed)  # rank 0's draws: the weights every rank starts from
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    samplers = [DistributedSampler(range(len(train_y)), num_replicas=world, rank=r, seed=args.seed)
                for r in range(world)]
    for epoch in range(args.epochs):
        for sampler in samplers:
            sampler.set_epoch(epoch)
        steps = list(zip(*(BatchSampler(s, args.batch_size, drop_last=False) for s in samplers)))
        loss_sum = 0.0
        for batches in steps:  # one batch per rank
            # Each rank's gradient of its mean loss, each times 1/W and added up, as DDP's
            # all_reduce makes the mean (torch's DDP scales each rank's gradient by 1/W, then sums).
            mean = [torch.zeros_like(p) for p in params]
            for b in batches:
                loss = criterion(model(train_x[b]), train_y[b])
                for m, g in zip(mean, torch.autograd.grad(loss, params)):
                    m.add_(g * (1 / world))
                loss_sum += loss.item() / world
            for p, m in zip(params, mean):
                p.grad = m
            optimizer.step()
        correct = count_correct(model, test_x, test_y, list(range(len(test_y))))
        report(epoch, loss_sum / len(steps), correct, len(test_y))
    return model


def flat(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stage", type=int, choices=range(4), default=3)
    add_training_flags(p, train_samples=4000, test_samples=1000, epochs=2, lr=1e-3)
    p.add_argument("--bucket-mb", type=float, default=1.0, help="DDP's bucket_cap_mb")
    p.add_argument("--data-dir", default="data", help="accepted; the twin reads the IDX files")
    p.add_argument("--prefetch", action=argparse.BooleanOptionalAction, default=True,
                   help="accepted; stage 3 is replayed here, not overlapped")
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                   help="also train DDP + Adam from the same start and compare the weights")
    p.add_argument("--mixed-precision", action="store_true",
                   help="also print ZeRO's model state and traffic for fp16/bf16 training")
    p.add_argument("--throughput", action="store_true",
                   help="also print the training steps' samples per second and the Adam state "
                   "(stages 0 and 1; for bench/run.py)")
    args = p.parse_args()
    if args.throughput and args.stage >= 2:
        p.error("--throughput: stages 0 and 1 only (stages 2 and 3 are replayed here, each rank "
                "computing every rank's batch: their time says nothing)")

    rank, world, train_x, train_y, test_x, test_y = join_and_read(args)
    data = (train_x, train_y, test_x, test_y)
    prefetch = ("" if args.stage != 3 else
                ", with prefetch" if args.prefetch else ", without prefetch")
    out0(f"MLP 196-512-512-512-10: Ψ = {sum(unit_numels()):,} values in 4 layers, Adam (lr "
         f"{args.lr:g}); {STAGES[args.stage]}{prefetch}")
    if args.stage >= 2:
        out0(f"replay: torch 1.13's FSDP needs CUDA; each rank computes stage {args.stage}'s steps "
             f"alone, the {world} ranks' batches at a time")

    def report(epoch, loss, correct, counted):
        out0(f"epoch {epoch + 1}/{args.epochs}: train loss {loss:.4f}, test accuracy "
             f"{100 * correct / counted:.2f}%")
        report.counted = counted

    if args.stage <= 1:
        timing = {"seconds": 0.0, "samples": 0} if args.throughput else None
        model = train_distributed(args, args.stage, data, report, timing)
        if timing is not None:
            print_throughput(timing["seconds"], timing["samples"], world)
            state = torch.tensor([timing["state_bytes"]])
            dist.all_reduce(state, op=dist.ReduceOp.MAX)
            out0(f"Adam state: {state.item():,} bytes on the largest rank (exp_avg and exp_avg_sq)")
    else:
        model = train_replayed(args, data, report)
    print_table()
    if args.mixed_precision:
        print_mixed_table(args.stage, world)

    # The twin's own checks: every rank holds the same weights, every test image was counted once,
    # and, with --check, the weights are DDP + Adam's: bit for bit for torch's ZeRO-1, whose
    # gradients are DDP's all-reduced ones, and for the replay at 1 and 2 ranks (a + b is b + a).
    # At 3 and more the replay adds the ranks' gradients in rank order, where Gloo's ring adds
    # each segment in its own order, and Adam magnifies the last bit more at a larger --lr: the
    # difference is printed, not judged.
    mine = flat(model)
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine)
    identical = all(torch.equal(t, mine) for t in everyone)
    once = report.counted == len(test_y)
    compared = "weights not compared: --no-check or stage 0"
    same = True
    if args.check and args.stage != 0:
        reference = flat(train_distributed(args, 0, data, lambda *_: None))
        largest = (mine - reference).abs().max().item()
        if args.stage == 1:
            same = torch.equal(mine, reference)
            compared = "ZeroRedundancyOptimizer ends with DDP's weights, bit for bit"
        elif world <= 2:
            same = torch.equal(mine, reference)
            compared = "the replay ends with DDP's weights, bit for bit"
        else:
            compared = (f"the replay ends {largest:.1e} at most from DDP's weights (not judged: "
                        f"the sums add in another order from 3 ranks on)")
        if not same:
            compared = f"the weights differ from DDP's (largest difference {largest:.1e})"
    dist.destroy_process_group()
    if not (identical and once and same):
        out0(f"MISMATCH: ranks identical {'yes' if identical else 'no'}, every test image counted "
             f"once {'yes' if once else 'no'}; {compared}")
        leave(1 if rank == 0 else 0)
    out0(f"OK: {compared}; every rank holds the same weights, every test image was counted once")
    leave(0)


def leave(code):
    """Ends the process without tearing DDP down: in torch 1.13 the teardown can deadlock (the last
    reference to the Gloo group goes with DDP's Reducer, whose destructor joins the group's worker
    threads while holding the GIL that a worker waits for; chapter 09's twin.py says more). The
    output is flushed first; the group is already destroyed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
