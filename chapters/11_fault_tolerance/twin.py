"""Chapter 11's twin: the same fault-tolerant training with PyTorch (DDP on gloo).

Run it as torchrun runs it (torch 2.x), or with ddprun, since Debian's torch 1.13 cannot run
torchrun on Python 3.11 (it fails at start):
    ddprun --standalone --nproc-per-node 2 --max-restarts 1 twin.py [flags of ch11_fault_tolerance]
    torchrun --standalone --nproc-per-node 2 --max-restarts 1 twin.py [...]
The launcher starts the ranks and tells each its attempt (TORCHELASTIC_RESTART_COUNT); when one
fails it stops the others and starts them all again. The snapshot follows main.cpp's rule: every
--snapshot-every steps each machine's LOCAL_RANK 0 writes it, with every rank's generator state
(all-gathered); at start LOCAL_RANK 0 reads its machine's copy, the ranks agree on the newest one
(all_reduce MAX of the steps done), and the lowest rank that holds it sends it to all
(broadcast_object_list). The ranks print the lines main.cpp prints;
tests/chapters/fault_tolerance_parity.py compares them, and checks that the twin's crashed job
ends with the bits of its uninterrupted one.
"""
import argparse
import os
import socket
import sys

# Post B's data and initial weights, and the rank-prefixed lines, as chapter 08's twin has them
# (main.cpp likewise compiles ../08_ddp_linear/post_b_data.cpp).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "08_ddp_linear"))
from post_b_data import PREFIX, STEPS, initial_weights, make_dataset, out, out0  # noqa: E402


def flags(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--snapshot", default="ch11_snapshot.pt")
    p.add_argument("--snapshot-every", type=int, default=10)
    p.add_argument("--crash-at-step", type=int, default=-1)
    p.add_argument("--crash-rank", type=int, default=-1)
    return p.parse_args(argv)


# ---- One rank -------------------------------------------------------------------------------

def jittered_batch(torch, data, batch, jitter):
    """Each sample's x moved by up to +-0.05, one draw of this rank's generator per sample."""
    k = torch.randint(0, STEPS, (len(batch),), generator=jitter).tolist()
    x = [data[0][i] + (d / STEPS - 0.5) * 0.1 for i, d in zip(batch, k)]
    y = [data[1][i] for i in batch]
    return (torch.tensor(x, dtype=torch.float32).reshape(-1, 1),
            torch.tensor(y, dtype=torch.float32).reshape(-1, 1))


def hexf(v):
    """printf's %a for a float32 value: 0x1.85d488p+1."""
    mantissa, _, exponent = float(v).hex().partition("p")
    return f"{mantissa.rstrip('0').rstrip('.')}p{exponent}"


def fingerprint(tensors):
    """dist::fingerprint: FNV-1a over the float32 bytes of each tensor, in order."""
    h = 14695981039346656037
    for t in tensors:
        for byte in t.detach().contiguous().numpy().tobytes():
            h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import BatchSampler
    from torch.utils.data.distributed import DistributedSampler

    # Step 1: join the group, and learn which attempt this is
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    PREFIX.update(rank=rank, world=world)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    crash_rank = world - 1 if args.crash_rank < 0 else args.crash_rank
    x, y = make_dataset(args.samples, args.seed)
    data = (x.flatten().tolist(), y.flatten().tolist())

    # Step 2: the model, the optimizer (momentum is state), this rank's generator, the sampler
    model = nn.Linear(1, 1)
    initial_weights(model, args.seed, rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    jitter = torch.Generator()
    jitter.manual_seed(args.seed + 1000 + rank)
    sampler = DistributedSampler(range(args.samples), seed=args.seed)
    steps_per_epoch = -(-len(sampler) // args.batch_size)
    total = steps_per_epoch * args.epochs

    # Step 3: resume from the newest snapshot any machine holds, if there is one
    done = 0
    resumed = resume(torch, dist, args, rank, world)
    if resumed is not None:
        snapshot, holder = resumed
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        jitter.set_state(snapshot["generators"][rank])
        done = snapshot["steps_done"]
        out0(f"attempt {attempt}: resumed from {args.snapshot} at step {done} (epoch "
             f"{done // steps_per_epoch}, step {done % steps_per_epoch} of {steps_per_epoch}), "
             f"rank {holder}'s copy")
    else:
        out0(f"attempt {attempt}: no snapshot at {args.snapshot}, starting at step 0 of {total}")
    resumed_at = done

    # Step 4: wrap it (rank 0's weights everywhere)
    ddp = DDP(model)
    criterion = nn.MSELoss()

    # Step 5: train from the exact sample the snapshot left off at
    epoch, step = divmod(done, steps_per_epoch)
    while epoch < args.epochs:
        sampler.set_epoch(epoch)
        batches = list(BatchSampler(sampler, args.batch_size, drop_last=False))
        for batch in batches[step:]:
            if attempt == 0 and done == args.crash_at_step and rank == crash_rank:
                out(f"crashing on purpose before step {done} (attempt {attempt})")
                os._exit(1)
            x, y = jittered_batch(torch, data, batch, jitter)
            optimizer.zero_grad()
            criterion(ddp(x), y).backward()
            optimizer.step()
            done += 1
            if done % args.snapshot_every == 0:
                save_snapshot(torch, dist, args, done, model, optimizer, jitter)
        epoch, step = epoch + 1, 0

    # Step 6: the final weights, bit for bit
    w, b = model.weight.item(), model.bias.item()
    out(f"final: w = {hexf(w)} ({w:.6f}), b = {hexf(b)} ({b:.6f})")
    buffers = [optimizer.state[p]["momentum_buffer"] for p in model.parameters()
               if "momentum_buffer" in optimizer.state[p]]
    out0(f"fingerprint of the model and the optimizer: "
         f"{fingerprint([model.weight, model.bias, *buffers])}")
    loss = sum((w * xi + b - yi) ** 2 for xi, yi in zip(*data)) / len(data[0])
    out0(f"loss on all {args.samples} samples: {loss:.6g}")

    # Step 7: the replicas' check, then close the job and its snapshot
    mine = torch.tensor([w, b], dtype=torch.float32)
    everyone = [torch.empty(2) for _ in range(world)]
    dist.all_gather(everyone, mine)
    ok = torch.tensor([int(all(torch.equal(t, mine) for t in everyone) and done == total)])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if int(os.environ["LOCAL_RANK"]) == 0 and os.path.exists(args.snapshot):
        os.remove(args.snapshot)  # every machine's copy
    if rank == 0:
        if ok.item() == 1:
            out0(f"OK: the replicas are bit-identical, and the job resumed at its snapshot's step "
                 f"({resumed_at})")
        else:
            out0("MISMATCH: the replicas differ, or the job did not reach its last step")
    dist.destroy_process_group()
    return 0 if ok.item() == 1 or rank != 0 else 1


def save_snapshot(torch, dist, args, done, model, optimizer, jitter):
    """Every rank all-gathers the generator states (a collective); each machine's LOCAL_RANK 0
    writes the file whole or not at all: torch.save to a temporary name, then os.replace over the
    old one."""
    state = jitter.get_state()
    states = [torch.empty_like(state) for _ in range(dist.get_world_size())]
    dist.all_gather(states, state)
    if int(os.environ["LOCAL_RANK"]) != 0:
        return
    temporary = f"{args.snapshot}.tmp.{socket.gethostname()}.{os.getpid()}"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "generators": states, "steps_done": done}, temporary)
    os.replace(temporary, args.snapshot)


def resume(torch, dist, args, rank, world):
    """(the newest snapshot any machine holds, the rank that sent it), or None when none holds
    one. Every rank calls it (collectives)."""
    mine = None
    if int(os.environ["LOCAL_RANK"]) == 0 and os.path.exists(args.snapshot):
        mine = torch.load(args.snapshot)
    newest = torch.tensor([mine["steps_done"] if mine is not None else -1])
    dist.all_reduce(newest, op=dist.ReduceOp.MAX)
    if newest.item() < 0:
        return None
    holds = mine is not None and mine["steps_done"] == newest.item()
    holder = torch.tensor([rank if holds else world])
    dist.all_reduce(holder, op=dist.ReduceOp.MIN)
    box = [mine]
    dist.broadcast_object_list(box, src=holder.item())
    return box[0], holder.item()


def main():
    return worker(flags(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
