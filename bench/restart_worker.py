"""One rank of the restart benchmark (restart_latency.py), the same file under ddprun and torchrun.

Each rank writes the CLOCK_MONOTONIC time at which it started to BENCH_STAMPS/start_<attempt>_<rank>.
In attempt 0 the last rank waits until every rank has started, writes the time of its death to
BENCH_STAMPS/death, and exits 1; the others sleep until the launcher stops them. In attempt 1
every rank writes its stamp and exits 0. The launcher's restart latency is then
max(start_1_*) - death: from a rank's death to every rank of the next attempt running.
Standard library only, so that both launchers start the same small program.
"""
import os
import sys
import time


def stamp(path):
    with open(path + ".tmp", "w") as f:
        f.write(str(time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
    os.replace(path + ".tmp", path)  # whole or absent: the reader never sees half a number


def main():
    stamps = os.environ["BENCH_STAMPS"]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    stamp(f"{stamps}/start_{attempt}_{rank}")
    if attempt > 0:
        return 0
    if rank != world - 1:
        time.sleep(60)  # the launcher stops this rank when the last one dies
        return 2
    deadline = time.monotonic() + 30
    while not all(os.path.exists(f"{stamps}/start_0_{r}") for r in range(world)):
        if time.monotonic() > deadline:
            print("restart_worker: the other ranks of attempt 0 never started", file=sys.stderr)
            return 2
        time.sleep(0.001)
    time.sleep(0.05)  # the others are past their stamp, and asleep
    stamp(f"{stamps}/death")
    os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
