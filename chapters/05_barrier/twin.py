"""Chapter 05's twin: the same lesson with PyTorch (gloo), as a reader of post C would write it.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py [--no-barrier]
It prints the same lines as ch05_barrier; tests/chapters/chapter_check.py parity compares them.

zero_first below is post C's torch_distributed_zero_first with its barrier turned into an
all_reduce(MIN) of a status, as dist::zero_first does in C++ (common/include/dist/zero_first.h).
Post C's version, unchanged, skips rank 0's barrier() when rank 0's body raises: if rank 0's
process then exits, the others fail at once (Gloo sees the connection close; a launcher stops the
job), but if rank 0 catches the error and carries on, they wait in barrier() until the group's
timeout (torch's default: 30 minutes on Gloo; on NCCL for ever in 1.13 unless NCCL_BLOCKING_WAIT
or NCCL_ASYNC_ERROR_HANDLING is set, 10 minutes from 2.2). post_c_failures.py shows each case.
"""
import argparse
import contextlib
import os
import time

import torch
import torch.distributed as dist


def out(text):
    # One write() per line, so that the ranks' lines never tear each other. RANK and WORLD_SIZE
    # from the launcher, so it still works after destroy_process_group().
    os.write(1, f"[rank {os.environ['RANK']}/{os.environ['WORLD_SIZE']}] {text}\n".encode())


def out0(text):
    if os.environ["RANK"] == "0":
        out(text)


@contextlib.contextmanager
def zero_first(rank: int):
    """Rank 0 runs the block first, the others after it; rank 0's failure reaches them at once."""
    fine = torch.iinfo(torch.int32).max

    def publish(status):
        t = torch.tensor([status], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return t.item()

    if rank > 0:
        failed = publish(fine)  # waits until rank 0 has published
        if failed != fine:
            raise RuntimeError(f"rank {failed} failed inside zero_first")
    try:
        yield
    except BaseException:
        if rank == 0:
            publish(0)  # tell the waiting ranks, then let rank 0's own error go on
        raise
    if rank == 0:
        publish(fine)


def do_a(work_ms, use_barrier):
    out(f"A: rank 0 works for {work_ms} ms"
        + (" while the other ranks wait at the barrier" if use_barrier else ", nobody waits"))
    time.sleep(work_ms / 1000)
    out("A: done")
    return time.monotonic_ns()


def count_early_bs(my_reading):
    """Each rank sends one clock reading (rank 0: A's end; others: B's start)."""
    world = dist.get_world_size()
    readings = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(readings, torch.tensor([my_reading], dtype=torch.int64))
    if int(os.environ.get("LOCAL_WORLD_SIZE", world)) != world:
        return None  # clocks of different machines are not comparable
    return sum(1 for r in range(1, world) if readings[r].item() < readings[0].item())


def write_file_atomically(path, text):
    temp = f"{path}.tmp-{os.uname().nodename}-{os.getpid()}"
    with open(temp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


def download(path, records, download_ms):
    out(f"data set: not there, downloading it ({download_ms} ms)")
    time.sleep(download_ms / 1000)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_file_atomically(path, "".join(f"{i}\n" for i in range(1, records + 1)))


def prepare_data_set(path, records, download_ms, use_barrier):
    guard = zero_first(dist.get_rank()) if use_barrier else contextlib.nullcontext()
    downloaded = False
    with guard:
        if not os.path.exists(path):
            download(path, records, download_ms)
            downloaded = True
        else:
            out("data set: found, nothing to download")
        with open(path) as f:
            values = [int(line) for line in f]
        out(f"data set: read {len(values)} records, sum {sum(values)}")
    return len(values), sum(values), downloaded


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--barrier", dest="barrier", action="store_true", default=True)
    parser.add_argument("--no-barrier", dest="barrier", action="store_false")
    parser.add_argument("--work-ms", type=int, default=200)
    parser.add_argument("--download-ms", type=int, default=200)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data_dir = args.data_dir or f"/tmp/dist-ch05-{os.getuid()}-port{os.environ['MASTER_PORT']}"
    path = os.path.join(data_dir, "dataset.txt")
    out0(("with the barriers" if args.barrier else "without the barriers (--no-barrier)")
         + f": A takes {args.work_ms} ms, the download {args.download_ms} ms, "
         f"{args.records} records")

    # Post C: if rank == 0: do_A(); barrier()  else: barrier(); do_B()
    if rank == 0:
        reading = do_a(args.work_ms, args.barrier)
        if args.barrier:
            dist.barrier()
    else:
        if args.barrier:
            dist.barrier()
        reading = time.monotonic_ns()
        out("B: starts")
    early_bs = count_early_bs(reading)
    if world == 1:
        out0("order: only 1 rank, so there is no B to order")
    elif early_bs is None:
        out0("order: not checked (ranks on different machines read different clocks)")
    elif early_bs == 0:
        out0("order: every B started after A ended (clock readings from every rank)")
    else:
        out0(f"order: B started before A ended on {early_bs} of the {world - 1} other rank"
             + ("" if world == 2 else "s"))

    records, total, downloaded = prepare_data_set(path, args.records, args.download_ms,
                                                  args.barrier)

    read_all = records == args.records and total == args.records * (args.records + 1) // 2
    tally = torch.tensor([1 if downloaded else 0, 1 if read_all else 0], dtype=torch.int64)
    dist.all_reduce(tally)
    downloads, all_read = int(tally[0]), int(tally[1]) == world

    if rank == 0 and not args.keep:
        os.remove(path)
        with contextlib.suppress(OSError):
            os.rmdir(data_dir)
        out0("data set: removed (--keep with a --data-dir keeps it for the next run)")
    elif rank == 0:
        out0(f"data set: kept in {path}")
    dist.destroy_process_group()

    counts = (f"{downloads} download{'' if downloads == 1 else 's'} for {world} "
              f"rank{'' if world == 1 else 's'}")
    reads = f"every rank read {args.records} records"
    early = f"{early_bs or 0} of {world - 1}" + (" (not checked)" if early_bs is None else "")
    if args.barrier and all_read and downloads <= 1 and (early_bs or 0) == 0:
        out0(f"OK: A ended before every B began, {counts}, {reads}")
        return 0
    if not args.barrier and all_read and world == 1:
        out0("OK: with 1 rank nothing can race; run with --nproc 2 or more")
        return 0
    if not args.barrier and all_read:
        race_showed = downloads > 1 and (early_bs is None or early_bs > 0)
        out0("OK: without the barriers "
             + ("the race showed" if race_showed
                else "nothing ordered the ranks, though this run did not show the whole race")
             + f": B began before A ended on {early}, {counts}; the atomic writes still gave "
             "every rank a whole file")
        return 0
    out0(f"MISMATCH: {counts}, early Bs: {early}, every rank read everything: "
         f"{'yes' if all_read else 'no'}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
