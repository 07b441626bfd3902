#!/usr/bin/env python3
"""A 2-rank job's whole life, measured from outside: wall and CPU time from starting it to the
exit of its last process, beside PyTorch's 2-rank job doing the same.

    bench/job_life.py --bin build/release/bin --runs 10 [--json FILE]

Four jobs, run in turn (one run of each, then the next round), each --runs times:
  ddprun   ddprun --standalone --nproc-per-node 2 ch01_get_dist_info: the launcher, both ranks,
           their rendezvous, Gloo's connections, chapter 01's calls, and the teardown
  floor    ddprun --standalone --nproc-per-node 2 ch01_get_dist_info --help: the same three
           processes, started, loaded and ended, doing nothing else: what no change to the
           rendezvous, Gloo or the teardown can take away (exec, the dynamic loader, page faults)
  direct   ch01_get_dist_info started twice by this script with RANK, WORLD_SIZE, MASTER_ADDR and
           MASTER_PORT set: the same job without the launcher
  torch    bench/torch_job_life.py started the same way: init_process_group("gloo"),
           get_rank(), get_world_size(), destroy_process_group(), `import torch` included
Wall time runs from just before the first process starts to the moment the last one has been
reaped. CPU time is user + system from os.wait4's rusage, which for ddprun includes the ranks it
waited for. Every run must exit 0 and print what each rank should (a wrong run fails the
benchmark). Prints one line per job, median and spread; the ratio is ours / torch's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "pylib"))
from disttut.ddprun import ddprun  # noqa: E402
from disttut.ports import free_port  # noqa: E402

PYTHON = "/usr/bin/python3"
TIMEOUT_S = 120  # one job; a healthy one takes milliseconds (ours) or seconds (torch)


def reap(procs):
    """Waits for every process; returns (exit code, cpu seconds) of each. A job still running
    after TIMEOUT_S is killed, so that a hung job fails the benchmark instead of hanging it."""
    timer = threading.Timer(TIMEOUT_S, lambda: [p.kill() for p in procs])
    timer.start()
    try:
        ended = []
        for p in procs:
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            ended.append((p.returncode, usage.ru_utime + usage.ru_stime))
        return ended
    finally:
        timer.cancel()


def run_job(commands, expect):
    """Starts every command at once, reaps them, checks the output; returns (wall s, cpu s)."""
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for cmd, env in commands]
    ended = reap(procs)
    wall = time.perf_counter() - start
    output = b"".join(p.stdout.read() for p in procs).decode(errors="replace")
    for p in procs:
        p.stdout.close()
    codes = [code for code, _ in ended]
    missing = [line for line in expect if line not in output]
    if any(codes) or missing:
        sys.stderr.write(output[-4000:])
        raise SystemExit(f"job_life: {commands[0][0][0]} failed (exit codes {codes}; "
                         f"missing from its output: {missing})")
    return wall, sum(cpu for _, cpu in ended)


def rank_env(rank, port):
    return dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                OMP_NUM_THREADS="1")


def jobs(bin_dir):
    ch01 = os.path.join(bin_dir, "ch01_get_dist_info")
    ours = [f"[rank {r}/2] get_rank() = {r}, get_world_size() = 2" for r in (0, 1)]
    ours.append("OK: every answer matches")
    torch = [f"[rank {r}/2] get_rank() = {r}, get_world_size() = 2" for r in (0, 1)]
    twin = os.path.join(ROOT, "bench", "torch_job_life.py")
    return {
        "ddprun": (lambda: [(ddprun(bin_dir, 2, [ch01]), dict(os.environ))], ours),
        "floor": (lambda: [(ddprun(bin_dir, 2, [ch01, "--help"]), dict(os.environ))],
                  ["usage: ch01_get_dist_info [flags]"]),
        "direct": (lambda: (lambda port: [([ch01], rank_env(r, port)) for r in (0, 1)])(free_port()),
                   ours),
        "torch": (lambda: (lambda port: [([PYTHON, twin], rank_env(r, port)) for r in (0, 1)])(
            free_port()), torch),
    }


def summary(values_s):
    ms = sorted(v * 1e3 for v in values_s)
    return {"median_ms": statistics.median(ms), "min_ms": ms[0], "max_ms": ms[-1],
            "p10_ms": ms[len(ms) // 10], "p90_ms": ms[(len(ms) * 9) // 10], "runs_ms": ms}


def measure(bin_dir, runs):
    table = jobs(bin_dir)
    samples = {name: ([], []) for name in table}
    for _ in range(runs):
        for name, (commands, expect) in table.items():
            wall, cpu = run_job(commands(), expect)
            samples[name][0].append(wall)
            samples[name][1].append(cpu)
    return {name: {"wall": summary(w), "cpu": summary(c)} for name, (w, c) in samples.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin"))
    p.add_argument("--runs", type=int, default=10, help="runs of each job (default 10)")
    p.add_argument("--json", help="write the results here as one JSON object")
    args = p.parse_args()
    if args.runs < 1:
        sys.exit("job_life: --runs must be at least 1")
    if not os.path.exists(os.path.join(args.bin, "ch01_get_dist_info")):
        sys.exit(f"job_life: no ch01_get_dist_info in {args.bin}: build first")
    result = measure(args.bin, args.runs)
    torch_wall = result["torch"]["wall"]["median_ms"]
    print(f"{'job':<8} {'wall median':>12} {'wall p10-p90':>16} {'cpu median':>11} {'wall vs torch':>14}")
    for name, r in result.items():
        w, c = r["wall"], r["cpu"]
        print(f"{name:<8} {w['median_ms']:>9.1f} ms {w['p10_ms']:>7.1f}-{w['p90_ms']:<6.1f}ms "
              f"{c['median_ms']:>8.1f} ms {w['median_ms'] / torch_wall:>13.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(result, runs=args.runs), f)


if __name__ == "__main__":
    main()
