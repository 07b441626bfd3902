"""Chapter 01's twin: the same lesson with PyTorch (gloo), as a reader of post A would write it.

Run under a launcher that sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py
It prints the same lines as ch01_get_dist_info; tests/chapters/chapter_check.py parity compares them.

Post A calls get_dist_info() a PyTorch function. It is mmcv's (mmcv.runner.get_dist_info, now
mmengine.dist.get_dist_info), and it returns only (rank, world_size); it is defined below as mmcv
defines it. torch 1.13 has no get_local_rank(): LOCAL_RANK comes from the launcher's environment.
"""
import os

import torch
import torch.distributed as dist


def get_dist_info():
    """mmcv's helper: the group's rank and world_size, or (0, 1) outside a job."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def prefix():
    # The C++ library's prefix: the group's identity, else the launcher's RANK/WORLD_SIZE.
    if dist.is_initialized():
        return f"[rank {dist.get_rank()}/{dist.get_world_size()}] "
    return f"[rank {os.environ.get('RANK', '0')}/{os.environ.get('WORLD_SIZE', '1')}] "


def out(text):
    # One write() per line: print() writes the text and the newline separately, and lines of
    # two ranks sharing a pipe would interleave.
    os.write(1, (prefix() + text + "\n").encode())


def rank_and_world(pair):
    return f"(rank {pair[0]}, world_size {pair[1]})"


def main():
    env = os.environ
    ok = True

    # Step 1: before init.
    before = get_dist_info()
    out(f"before init: is_initialized() = {str(dist.is_initialized()).lower()}")
    out(f"before init: get_dist_info() = {rank_and_world(before)}, as mmcv answers outside a job")
    try:
        dist.get_rank()
        refused = False
    except (RuntimeError, ValueError) as e:  # 1.13: RuntimeError; 2.x: ValueError ("Default ...")
        refused = "not been initialized" in str(e)
    out("before init: get_rank() " + ("throws: the default process group has not been initialized"
                                      if refused else "did not throw"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    out(f"before init: get_local_rank() = {local_rank} (LOCAL_RANK, set by the launcher)")
    ok = ok and not dist.is_initialized() and before == (0, 1) and refused

    # Step 2: join the group (env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
    dist.init_process_group(backend="gloo")
    out(f"after init:  is_initialized() = {str(dist.is_initialized()).lower()}")
    ok = ok and dist.is_initialized()

    # Step 3: what the C++ get_dist_info() reports. torch keeps no record of these; the numbers
    # come from the same variables env:// read.
    rank, world = get_dist_info()
    local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    out(f"get_dist_info(): rank {rank}, world_size {world}, local_rank {local_rank}, "
        f"local_world_size {local_world}")
    out(f"get_dist_info(): backend {dist.get_backend()}, init_method env://, "
        f"master {env['MASTER_ADDR']}:$MASTER_PORT")
    ok = ok and rank == int(env["RANK"]) and world == int(env["WORLD_SIZE"])
    ok = ok and 0 <= local_rank < local_world

    # Step 4: the friends.
    out(f"get_rank() = {dist.get_rank()}, get_world_size() = {dist.get_world_size()}, "
        f"get_local_rank() = {local_rank}, get_backend() = {dist.get_backend()}")

    # Step 5: every rank number is taken exactly once.
    present = torch.zeros(world, dtype=torch.int64)
    present[rank] = 1
    dist.all_reduce(present)
    out(f"ranks present: {present!r}")
    ok = ok and torch.equal(present, torch.ones(world, dtype=torch.int64))
    if rank == 0:
        machines = world // local_world
        out(f"the job: {world} {'rank' if world == 1 else 'ranks'} on {machines} "
            f"{'machine' if machines == 1 else 'machines'}, {local_world} per machine")

    # Step 6: one verdict, then leave the group. (Post A calls torch.distributed.finalize():
    # there is no such function.)
    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()

    # Step 7: after destroy.
    after = get_dist_info()
    out(f"after destroy_process_group(): is_initialized() = {str(dist.is_initialized()).lower()}, "
        f"get_dist_info() = {rank_and_world(after)}")
    after_ok = not dist.is_initialized() and after == (0, 1)
    if verdict.item() != 1 or not after_ok:
        if rank == 0 or not after_ok:
            out("MISMATCH: an answer differs from the launcher's variables (see above)")
        return 1
    if rank == 0:
        out("OK: every answer matches the launcher's variables on every rank")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
