#!/usr/bin/env python3
"""Chapter 12's training on PyTorch, for bench/run.py: DDP with Adam, or DDP with Adam sharded by
ZeroRedundancyOptimizer (ZeRO stage 1: each rank keeps the Adam state of its share of the
parameters only), on the gloo backend.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 /usr/bin/python3 bench/torch_sharding.py --zero --throughput

The same run as ch12_sharding's: chapter 09's Fashion-MNIST (14x14, the same files), the MLP
196-512-512-512-10 with chapter 09's uniform initial weights (rank 0's, which DDP broadcasts),
Adam, DistributedSampler's batches, and DDP buckets of --bucket-mb (ch12's default, 1 MiB, not
torch's 25). torch computes in its own order, so its losses are close to ch12's, not the same bits.

Prints the epochs, then with --throughput "throughput: N samples/s (...)" (the training steps only,
the slowest rank's time) and "Adam state: N bytes on the largest rank". ZeroRedundancyOptimizer
gives each rank whole parameters, largest first to the rank with the fewest values so far, so its
shares can be uneven: the largest rank is the one that counts for memory. The run checks itself:
"OK: ..." when every rank ends with the same parameters, bit for bit, and "MISMATCH: ..." and
exit 1 otherwise.

PyTorch 1.13 has no ZeRO stage 2 or 3 on CPU: FullyShardedDataParallel (its stage 3, and its
SHARD_GRAD_OP stage 2) stops at its first forward with "FSDP does not support CPU only execution"
(it runs on CUDA streams), and its gloo backend has no reduce_scatter.
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chapters",
                                "09_ddp_classifier"))
from fashion_data import (PIXELS, add_training_flags, join_and_read, out0,  # noqa: E402
                          print_throughput, test_shard, uniform_init)
WIDTHS = (PIXELS, 512, 512, 512, 10)


def evaluate(ddp, images, labels):
    """Each rank its shard of the test set, without the sampler's padding; one all_reduce adds up."""
    kept = test_shard(len(labels))
    correct = 0
    with torch.no_grad():
        for b in BatchSampler(kept, 250, drop_last=False):
            correct += (ddp.module(images[b]).argmax(1) == labels[b]).sum().item()
    counts = torch.tensor([correct, len(kept)])
    dist.all_reduce(counts)
    return counts.tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zero", action="store_true",
                   help="shard Adam's state with ZeroRedundancyOptimizer (default: plain Adam)")
    add_training_flags(p, train_samples=4000, test_samples=1000, epochs=2, lr=1e-3)
    p.add_argument("--bucket-mb", type=float, default=1.0, help="DDP's bucket_cap_mb (ch12's 1)")
    p.add_argument("--throughput", action="store_true",
                   help="also print the training steps' samples per second and the Adam state")
    args = p.parse_args()

    rank, world, train_x, train_y, test_x, test_y = join_and_read(args)

    layers = []
    for i in range(len(WIDTHS) - 1):
        layers += [nn.Linear(WIDTHS[i], WIDTHS[i + 1]), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    g = torch.Generator()
    g.manual_seed(args.seed + rank)
    for layer in model[::2]:
        uniform_init(layer, g)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)  # every rank now holds rank 0's weights
    if args.zero:
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam,
                                            lr=args.lr)
    else:
        optimizer = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    out0(f"MLP {'-'.join(map(str, WIDTHS))}: {sum(t.numel() for t in model.parameters()):,} "
         f"parameters, DDP + " + ("ZeroRedundancyOptimizer(Adam): ZeRO stage 1" if args.zero
                                  else "Adam: nothing sharded"))
    criterion = nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(train_y)), seed=args.seed)
    batch_sampler = BatchSampler(sampler, args.batch_size, drop_last=False)
    training_seconds, trained = 0.0, 0  # the training steps only (--throughput)
    for epoch in range(args.epochs):
        started = time.perf_counter()
        sampler.set_epoch(epoch)
        batches = list(batch_sampler)
        loss_sum = 0.0
        for b in batches:
            optimizer.zero_grad()
            loss = criterion(ddp(train_x[b]), train_y[b])
            loss.backward()
            optimizer.step()  # ZeRO: steps this rank's share, then every share is broadcast
            loss_sum += loss.item()
        training_seconds += time.perf_counter() - started
        trained += sum(len(b) for b in batches)
        mean_loss = torch.tensor([loss_sum / len(batches)], dtype=torch.float64)
        dist.all_reduce(mean_loss)
        correct, counted = evaluate(ddp, test_x, test_y)
        out0(f"epoch {epoch + 1}/{args.epochs}: train loss {mean_loss.item() / world:.4f}, "
             f"test accuracy {100 * correct / counted:.2f}%")

    if args.throughput:
        print_throughput(training_seconds, trained, world)
        local = optimizer.optim if args.zero else optimizer  # ZeRO: this rank's own Adam
        state = torch.tensor([sum(v.numel() * v.element_size() for s in local.state.values()
                                  for v in s.values() if torch.is_tensor(v) and v.dim() > 0)])
        dist.all_reduce(state, op=dist.ReduceOp.MAX)
        out0(f"Adam state: {state.item():,} bytes on the largest rank (exp_avg and exp_avg_sq)")

    mine = torch.cat([t.detach().flatten() for t in model.parameters()])
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine)
    identical = all(torch.equal(t, mine) for t in everyone)
    dist.destroy_process_group()
    if not identical:
        out0("MISMATCH: the ranks' parameters differ after training")
        leave(1 if rank == 0 else 0)
    out0("OK: every rank ends with the same parameters, bit for bit")
    leave(0)


def leave(code):
    """Ends the process without tearing DDP down: in torch 1.13 the Reducer's destructor can
    deadlock with a gloo worker thread waiting for the GIL (chapters/09_ddp_classifier/twin.py)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
