"""A torch DDP job (gloo, CPU) that fails once and then succeeds: what --max-restarts is for.

tests/launcher/torch_programs_check.py runs it as the torchrun line
    torchrun --nproc-per-node 2 --max-restarts 1 ddp_fails_once.py
pasted into ddprun (with --standalone). Each rank trains y = w x (one weight, no bias, w = 0.5
at first) for 4 SGD steps on one sample of its own, x = RANK + 1 and y = 3 x, under
DistributedDataParallel. On the first attempt (TORCHELASTIC_RESTART_COUNT 0) the last rank exits with code 3 at step 2; the
launcher stops the others and starts every rank again, and the second attempt trains all 4 steps.

Every rank prints its attempt and its final w. With the mean squared error, DDP's averaged gradient
is mean_r 2 x_r^2 (w - 3), so after S steps at rate lr
    w = 3 + (0.5 - 3) * (1 - lr * 2 * (W + 1)(2W + 1) / 6) ** S        (W ranks)
Each rank checks its w against that and prints OK, or MISMATCH and exits 1.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, FAIL_AT_STEP, LR, W0 = 4, 2, 0.05, 0.5


def main():
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def say(text):  # one write() per line, so that the ranks' lines do not interleave
        os.write(1, f"[rank {rank}/{world}] {text}\n".encode())

    say(f"attempt {attempt}: starting")
    linear = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        linear.weight.fill_(W0)
    model = DDP(linear)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x = torch.tensor([[float(rank + 1)]])
    y = 3 * x
    for step in range(STEPS):
        if attempt == 0 and rank == world - 1 and step == FAIL_AT_STEP:
            say(f"attempt {attempt}: failing on purpose at step {step}")
            sys.exit(3)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    w = linear.weight.item()
    expected = 3 + (W0 - 3) * (1 - LR * 2 * (world + 1) * (2 * world + 1) / 6) ** STEPS
    say(f"attempt {attempt}: w = {w:.6f} after {STEPS} steps")
    ok = abs(w - expected) <= 1e-5
    say(f"OK: w is the closed form's {expected:.6f}" if ok else f"MISMATCH: expected {expected}")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
