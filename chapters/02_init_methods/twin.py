"""Chapter 02's twin: the same five initialisations with PyTorch (gloo), as post B writes them.

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, e.g.
    ddprun --standalone --nproc-per-node 2 twin.py
It prints the same lines as ch02_init_methods; tests/chapters/chapter_check.py parity compares them.

Two places where torch 1.13 differs from the dist library, and what this twin does about them:
  * tcp:// and file:// never read RANK and WORLD_SIZE from the environment ("rank parameter
    missing"), and arguments never mix with a query (AssertionError): the twin passes them in one
    place, the URL's query or the arguments, as the C++ program does. torch_rule.py runs the
    cases where the two differ.
  * Re-initialising on the same port is not reliable: torch keeps no generations, so a rank that
    re-initialises quickly can reach rank 0's previous store (and fail with "Connection reset by
    peer"), or find its old keys there and wait forever. The C++ program reuses MASTER_PORT for
    (b) and (d); the twin gives (b) and (d) fresh ports, picked by rank 0 and broadcast in (a).
"""
import os
import random
import socket
import tempfile

import torch
import torch.distributed as dist


def out(text):
    # One write() per line, with the C++ prefix: the group's identity (rank 0 of 1 in case (c)).
    prefix = f"[rank {dist.get_rank()}/{dist.get_world_size()}] " if dist.is_initialized() else (
        f"[rank {os.environ.get('RANK', '0')}/{os.environ.get('WORLD_SIZE', '1')}] ")
    os.write(1, (prefix + text + "\n").encode())


def rank_world(rank, world):
    return f"rank={rank} world_size={world}"


def met_as(what, want_rank, want_world, row):
    """Who init made this process, checked, with an all_reduce of rank + 1 = W(W+1)/2."""
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(t)
    out(f"{what} -> rank {rank} of {world}; all_reduce(rank + 1) = {t.item()}")
    row.append(f"rank {rank} of {world}")
    return rank == want_rank and world == want_world and t.item() == world * (world + 1) // 2


def free_ports(host, count):
    """Ports nobody listens on now (bound together, so they differ). Only rank 0 calls this."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def file_url(token, suffix):
    return "file://" + os.path.join(tempfile.gettempdir(), f"ch02_init_methods-{token:x}-{suffix}")


def remove_if_left(url):
    path = url[len("file://"):]
    if os.path.exists(path):
        os.remove(path)


def main():
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    addr = env["MASTER_ADDR"]
    env_text = f"RANK={rank} WORLD_SIZE={world}"
    rows, ok = [], True
    pad = lambda text, width: text.ljust(width)

    if rank == 0:
        # The C++ program's rule is the dist library's; torch's is narrower (torch_rule.py runs
        # it). Every case below lies where the two agree, so the twin prints the same lines.
        out("where this library takes rank and world_size from (the first that gives one):")
        out("  1. arguments    rank=R, world_size=W passed to init_process_group")
        out("  2. URL query    tcp://HOST:PORT?rank=R&world_size=W (torch: not together with 1.)")
        out("  3. environment  RANK, WORLD_SIZE (torch: env:// only)")

    # (a) the environment alone. Rank 0 also draws the token for the file names and two fresh
    # ports, and broadcasts them.
    dist.init_process_group(backend="gloo")
    rows.append(["(a)", "env://", "-", "-", env_text])
    ok = met_as(f"(a) env://, {env_text} from the launcher", rank, world, rows[-1]) and ok
    shared = torch.tensor([random.getrandbits(52), *free_ports(addr, 2)] if rank == 0 else [0, 0, 0],
                          dtype=torch.int64)
    dist.broadcast(shared, src=0)
    token, port_b, port_d = shared.tolist()
    dist.destroy_process_group()

    # (b) explicit arguments alone: RANK and WORLD_SIZE removed from the environment.
    saved = {name: env.pop(name) for name in ("RANK", "WORLD_SIZE")}
    saved_port, env["MASTER_PORT"] = env["MASTER_PORT"], str(port_b)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world)
    rows.append(["(b)", "env://", rank_world(rank, world), "-", "unset"])
    ok = met_as(f"(b) env://, RANK and WORLD_SIZE unset, {rank_world(rank, world)} passed",
                rank, world, rows[-1]) and ok
    dist.destroy_process_group()
    env.update(saved)
    env["MASTER_PORT"] = saved_port

    # (c) both: the call's world_size=1 wins over WORLD_SIZE; each process alone, on its own file.
    solo = file_url(token, f"solo-{rank}")
    dist.init_process_group(backend="gloo", init_method=solo, rank=0, world_size=1)
    rows.append(["(c)", "file:// (own)", rank_world(0, 1), "-", env_text])
    ok = met_as(f"(c) file:// of its own, {env_text} set, {rank_world(0, 1)} passed", 0, 1,
                rows[-1]) and ok
    dist.destroy_process_group()
    remove_if_left(solo)

    # (d) tcp:// with rank and world_size in the query (torch's tcp:// requires them).
    query = f"?rank={rank}&world_size={world}"
    dist.init_process_group(backend="gloo", init_method=f"tcp://{addr}:{port_d}{query}")
    rows.append(["(d)", "tcp://", "-", query[1:], env_text])
    ok = met_as(f"(d) tcp://{addr}:PORT{query}", rank, world, rows[-1]) and ok
    dist.destroy_process_group()

    # (e) file:// shared by every rank, rank and world_size as arguments.
    dist.init_process_group(backend="gloo", init_method=file_url(token, "world"), rank=rank,
                            world_size=world)
    rows.append(["(e)", "file:// (shared)", rank_world(rank, world), "-", env_text])
    ok = met_as(f"(e) file:// shared, {rank_world(rank, world)} passed", rank, world,
                rows[-1]) and ok
    verdict = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(verdict, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()

    if rank == 0:
        out(pad("case", 5) + pad("init_method", 18) + pad("arguments", 24) + pad("URL query", 22)
            + pad("environment", 22) + "-> result")
        for name, method, arguments, query_text, environment, result in rows:
            out(pad(name, 5) + pad(method, 18) + pad(arguments, 24) + pad(query_text, 22)
                + pad(environment, 22) + "-> " + result)
        if verdict.item() == 1:
            out("OK: every case gave the rank and world_size that precedence predicts")
        else:
            out("MISMATCH: some case gave a rank or world_size precedence does not predict")
    return 0 if verdict.item() == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
