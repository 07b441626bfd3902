#!/usr/bin/env python3
"""The restart latency of ddprun --max-restarts, beside torchrun's, in one invocation.

    bench/restart_latency.py --bin build/release/bin            4 ranks, 5 runs of each launcher

A job of --nproc ranks (bench/restart_worker.py, the same Python file under both launchers) loses
its last rank once, in attempt 0; the launcher, run with --max-restarts 1, stops the other ranks
and starts every rank again. The latency is from the rank's death to the moment every rank of
attempt 1 is running (each rank writes a CLOCK_MONOTONIC stamp as its first act), so it includes
noticing the death, stopping the survivors, and starting the new ranks, interpreter start-up
included on both sides. The report gives the median of --repeat runs and the torchrun/ddprun
ratio. ddprun's target is under 1 s at 4 ranks.

torchrun is torch 1.13's (Debian's /usr/bin/python3). On Python 3.11 it cannot start at all:
Std.from_str("0") returns None (iterating an IntFlag no longer yields its zero member), and
to_map then fails with "'NoneType' object has no attribute 'get'". This script runs torchrun's
main() with a two-line replacement of Std.from_str that builds Std(int(value)), which is what the
method means; nothing else is changed. torchrun's agent looks at its workers every
--monitor_interval seconds (5 by default), so it is measured at its default and at 0.1 s.

A benchmark, not a test: nothing fails on time. The run fails (exit 1) only if a job does not
end with exit code 0 after exactly one restart, with every rank of attempt 1 started.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "pylib"))
from disttut.ddprun import ddprun as ddprun_line  # noqa: E402

PYTHON = "/usr/bin/python3"
WORKER = os.path.join(ROOT, "bench", "restart_worker.py")
TIMEOUT = 120  # seconds for one job: a restart takes seconds at most, even torchrun's

# torchrun, with Std.from_str mended for Python 3.11 (see above), then torch's own main().
TORCHRUN = """
import re, sys
from torch.distributed.elastic.multiprocessing import api

def from_str(vm):
    if re.match(api._VALUE_REGEX, vm):
        return api.Std(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")

api.Std.from_str = staticmethod(from_str)
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()
"""


def log(text):
    print(f"bench: {text}", file=sys.stderr, flush=True)


def one_restart(cmd, nproc):
    """Runs one job; returns the latency in ms from the death to the last rank of attempt 1."""
    with tempfile.TemporaryDirectory(prefix="bench_restart_") as stamps:
        env = dict(os.environ, BENCH_STAMPS=stamps, PYTHONUNBUFFERED="1")
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
        starts = [os.path.join(stamps, f"start_1_{rank}") for rank in range(nproc)]
        missing = [p for p in starts + [os.path.join(stamps, "death")] if not os.path.exists(p)]
        if r.returncode != 0 or missing or os.path.exists(os.path.join(stamps, "start_2_0")):
            sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
            raise SystemExit(f"bench: the job did not end after one restart with every rank of "
                             f"attempt 1 started (exit {r.returncode}, missing {missing})")

        def read(path):
            with open(path) as f:
                return int(f.read())

        death = read(os.path.join(stamps, "death"))
        return (max(read(p) for p in starts) - death) / 1e6


def measure(name, cmd, nproc, repeat):
    shown = ["<torchrun, Std.from_str mended>" if arg == TORCHRUN else arg for arg in cmd]
    log("+ " + " ".join(shown))
    samples = [one_restart(cmd, nproc) for _ in range(repeat)]
    log(f"{name}: " + ", ".join(f"{s:.1f}" for s in samples) + " ms")
    return {"median_ms": statistics.median(samples), "runs_ms": samples}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin"),
                        help="the folder with ddprun (build/release/bin)")
    parser.add_argument("--nproc", type=int, default=4, help="ranks per job (4)")
    parser.add_argument("--repeat", type=int, default=5, help="jobs per launcher (5)")
    parser.add_argument("--no-torch", action="store_true", help="measure ddprun only")
    args = parser.parse_args(argv)
    ddprun = os.path.join(args.bin, "ddprun")
    if not os.access(ddprun, os.X_OK):
        raise SystemExit(f"bench: no ddprun in {args.bin}: build it first "
                         f"(cmake --workflow --preset release), or pass --bin")
    n = str(args.nproc)
    rows = {"ddprun": measure("ddprun", ddprun_line(args.bin, args.nproc, [PYTHON, "-u", WORKER],
                                                    flags=["--max-restarts", "1"]),
                              args.nproc, args.repeat)}
    if not args.no_torch:
        for interval in ("5", "0.1"):
            name = f"torchrun --monitor_interval {interval}"
            rows[name] = measure(name, [PYTHON, "-c", TORCHRUN, "--standalone",
                                        "--nproc_per_node", n, "--max_restarts", "1",
                                        "--monitor_interval", interval, WORKER],
                                 args.nproc, args.repeat)
    base = rows["ddprun"]["median_ms"]
    print(f"restart latency at {args.nproc} ranks, from a rank's death to every rank of the next "
          f"attempt running (median of {args.repeat})")
    print(f"| launcher | median (ms) | runs (ms) | vs ddprun |")
    print(f"|---|---|---|---|")
    for name, row in rows.items():
        runs = ", ".join(f"{s:.1f}" for s in row["runs_ms"])
        print(f"| {name} | {row['median_ms']:.1f} | {runs} | {row['median_ms'] / base:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
