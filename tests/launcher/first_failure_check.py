#!/usr/bin/env python3
"""ddprun names the rank that was killed as the first failure when it sees several ranks end at
once: on a loaded machine ddprun can wake after both the cause (a rank killed by a signal) and
its echo (a rank that exited 1 on the closed connection) have ended, and the kernel hands the
exits over in the order the ranks were started, not the order they ended.

The race is made certain here: two probe ranks, rank 0 to exit with code 1 and rank 1 to be
killed by SIGKILL, both after 1 s; ddprun is stopped (SIGSTOP) once both have started and let go
(SIGCONT) only when both have ended, so it sees both exits in one pass. It must say
"first failure: rank 1 was killed by signal 9 (SIGKILL)", although rank 0 was started first.

usage: first_failure_check.py DDPRUN PROBE     exit 0 when ddprun names rank 1, 1 otherwise
"""
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun as ddprun_line  # noqa: E402

DEADLINE_S = 30


def state(pid):
    """The process's state letter from /proc (Z: ended, not yet reaped), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    ddprun, probe = argv[1], argv[2]
    job = subprocess.Popen(ddprun_line(os.path.dirname(os.path.abspath(ddprun)), 2,
                                       [probe, "--exit-on-rank", "0:1", "--sigkill-on-rank", "1",
                                        "--fail-after", "1"]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    deadline = time.monotonic() + DEADLINE_S
    try:
        pids, out = [], ""
        while len(pids) < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([job.stdout], [], [], 0.5)
            if ready:
                line = job.stdout.readline()
                out += line
                if line.startswith("probe: PID="):
                    pids.append(int(line.split()[1].split("=")[1]))
        if len(pids) < 2:
            print(f"FAIL: the two ranks did not start within {DEADLINE_S} s:\n{out}")
            return 1
        os.kill(job.pid, signal.SIGSTOP)
        while time.monotonic() < deadline and any(state(p) not in ("Z", None) for p in pids):
            time.sleep(0.05)
        ended = [state(p) in ("Z", None) for p in pids]
        os.kill(job.pid, signal.SIGCONT)
        if not all(ended):
            print(f"FAIL: the ranks {pids} did not both end within {DEADLINE_S} s")
            return 1
        rest, err = job.communicate(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        rest, err = job.communicate()
        print(f"FAIL: ddprun did not end within {DEADLINE_S} s:\n{err}")
        return 1
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    want = "first failure: rank 1 was killed by signal 9 (SIGKILL)"
    if want not in err:
        print(f"FAIL: ddprun saw both exits at once and did not say '{want}':\n{err}")
        return 1
    print(f"OK: with both exits seen at once, ddprun says '{want}', not rank 0's exit code 1")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
