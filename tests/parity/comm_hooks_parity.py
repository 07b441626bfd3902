#!/usr/bin/env python3
"""DDP communication hooks: dist's (common/src/parallel/comm_hooks.cpp) against torch 1.13's, on
Gloo at 2 ranks.

Usage: /usr/bin/python3 tests/parity/comm_hooks_parity.py path/to/ddprun path/to/comm_hooks_driver

For each hook, runs the C++ driver (tests/parity/comm_hooks_driver.cpp) and this script's torch
twin (--worker) under ddprun, and compares what rank 0 wrote: the averaged gradients and the
weights after every step, as float32 bits. Both train Linear(16, 12) and Linear(12, 4)'s
parameters on gradients made with torch.randn from fixed seeds (dist::randn draws the same
values), the first bias's scaled into float16's subnormals (2^-20) and the second weight's past
its largest value (2^15), where the order of cast and division shows: the twin's forward is sum(p * G) over the parameters, whose backward gives exactly G, so
any difference is the hook's, not a forward's. Checked:
  * the averaged gradients of every step, bit for bit: allreduce_hook, fp16_compress_hook,
    bf16_compress_hook's replay (below), and powerSGD_hook at rank 1 and 2 (start_powerSGD_iter 2, error feedback, warm start; its random Q, norms, dot products
    and small matrix products summed in torch's order, comm_hooks.cpp);
  * torch's bucket holds the gradients in the order dist's DDP packs them (last parameter first),
    which PowerSGD's layout and random matrices depend on;
  * the weights after each SGD step, bit for bit: torch 1.13's SGD (p.add_(g, alpha=-lr)) is
    one fused multiply-add on a CPU with AVX2, and so is dist::SGD (nn_math.h).
torch 1.13 refuses bf16_compress_hook without CUDA ("BF16 all reduce communication hook required
CUDA 11+ and NCCL 2.10+.") and its Gloo cannot all_reduce bfloat16 ("Invalid scalar type"), so
the twin replays the hook in torch ops: the bucket cast to bfloat16 and divided by the world size
there, every rank's piece gathered (as float32, which holds a bfloat16 exactly), added in rank
order in bfloat16, and cast back.
Exits 1 on any difference.
"""

import os
import subprocess
import sys
import tempfile

STEPS = 6
HOOKS = ["allreduce", "fp16", "bf16", "powersgd1", "powersgd2"]
DEADLINE_S = 120


def worker(hook, steps, out_path):
    """One torch rank: the twin of comm_hooks_driver.cpp."""
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Params(torch.nn.Module):
        def __init__(self):
            super().__init__()
            w1 = np.arange(192, dtype=np.float32) * np.float32(0.01) - np.float32(1.0)
            w2 = np.arange(48, dtype=np.float32) * np.float32(0.01) - np.float32(1.0)
            self.w1 = torch.nn.Parameter(torch.from_numpy(w1).view(12, 16))
            self.b1 = torch.nn.Parameter(torch.zeros(12))
            self.w2 = torch.nn.Parameter(torch.from_numpy(w2).view(4, 12))
            self.b2 = torch.nn.Parameter(torch.zeros(4))

        def forward(self, grads):
            # d/dp sum(p * G) = G, exactly; the terms in parameter order, so that backward
            # produces the last parameter's gradient first, as dist's DDP packs them.
            return sum((p * g).sum() for p, g in zip(self.parameters(), grads))

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = Params()
    ddp = DDP(model)
    orders = []

    def watching(hook_fn):
        def hook(state, bucket):
            orders.append([tuple(p.shape) for p in bucket.parameters()])
            return hook_fn(state, bucket)
        return hook

    def bf16_replay(state, bucket):
        buffer = bucket.buffer()
        world = dist.get_world_size()
        compressed = buffer.to(torch.bfloat16).div_(world)
        pieces = [torch.empty(compressed.shape) for _ in range(world)]
        dist.all_gather(pieces, compressed.float())
        total = pieces[0].to(torch.bfloat16)
        for piece in pieces[1:]:
            total = total + piece.to(torch.bfloat16)
        buffer.copy_(total)
        future = torch.futures.Future()
        future.set_result(buffer)
        return future

    if hook == "allreduce":
        ddp.register_comm_hook(None, watching(default_hooks.allreduce_hook))
    elif hook == "fp16":
        ddp.register_comm_hook(None, watching(default_hooks.fp16_compress_hook))
    elif hook == "bf16":
        ddp.register_comm_hook(None, watching(bf16_replay))
    else:
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=int(hook[-1]), start_powerSGD_iter=2)
        ddp.register_comm_hook(state, watching(powerSGD_hook.powerSGD_hook))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def hex_bits(tensors):
        values = torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().view(np.uint32)
        return "".join(f" {int(v):08x}" for v in values)

    lines = []
    for step in range(steps):
        optimizer.zero_grad()
        grads = []
        for k, p in enumerate(model.parameters()):
            g = torch.Generator()
            g.manual_seed(1000 * step + 100 * rank + k)
            scale = [1.0, 2.0**-20, 2.0**15, 1.0][k]
            grads.append((torch.randn(p.numel(), generator=g) * scale).view(p.shape))
        ddp(grads).backward()
        lines.append(f"grads {step}:" + hex_bits(p.grad for p in model.parameters()))
        optimizer.step()
        lines.append(f"weights {step}:" + hex_bits(model.parameters()))
    # From step 1 on: torch fills its first step's bucket in parameter order and then rebuilds it
    # in the order backward produced the gradients (which is why PowerSGD with error feedback or
    # warm start must start at step 2 or later).
    expected = [(4,), (4, 12), (12,), (12, 16)]
    for step, order in enumerate(orders):
        if step >= 1 and order != expected:
            lines.append(f"bucket order at step {step}: {order}, not {expected}")
    if rank == 0:
        with open(out_path, "w") as out:
            out.write("\n".join(lines) + "\n")
    dist.destroy_process_group()
    # torch 1.13 aborts at interpreter exit after powerSGD_hook ran on Gloo ("terminate called
    # without an active exception"), its work done: leave before that.
    sys.stdout.flush()
    os._exit(0)


def run(ddprun, program, out_path):
    command = [ddprun, "--standalone", "--nproc-per-node", "2", *program, str(STEPS), out_path]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE_S,
                              env={**os.environ, "PYTHON_EXEC": sys.executable})
    except subprocess.TimeoutExpired:
        sys.exit(f"{' '.join(command)} did not finish within {DEADLINE_S} s")
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    with open(out_path) as f:
        return f.read().splitlines()


def main():
    ddprun, driver = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for hook in HOOKS:
            ours = run(ddprun, [driver, hook], os.path.join(tmp, f"{hook}.dist"))
            torch_lines = run(ddprun, [os.path.abspath(__file__), "--worker", hook],
                              os.path.join(tmp, f"{hook}.torch"))
            differ = [(o, t) for o, t in zip(ours, torch_lines) if o != t]
            if len(ours) != len(torch_lines) or differ:
                failures += 1
                print(f"{hook}: {len(differ)} of {len(torch_lines)} lines differ from torch")
                for o, t in differ[:2]:
                    print(f"  torch: {t[:150]}\n  dist:  {o[:150]}")
                extra = torch_lines[len(ours):] + ours[len(torch_lines):]
                for line in extra[:3]:
                    print(f"  unmatched: {line[:150]}")
            else:
                print(f"{hook}: the averaged gradients of {STEPS} steps match torch bit for bit, "
                      f"and so do the weights after each SGD step")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(main())
