#!/usr/bin/env python3
"""Two machines restart together: ddprun's agents' rendezvous on two network namespaces.

usage: agents_two_machines.py BIN_DIR

The two "machines" of tools/multinode/two_machines.py (network namespaces joined by a veth pair,
A 10.231.0.1 and B 10.231.0.2), one ddprun on each with --nnodes 2 --nproc-per-node 2
--max-restarts 1, running a shell script as the ranks. Two cases:

restart   On the first attempt, rank 3 (machine B) kills itself with SIGKILL while every other
          rank sleeps 60 s. Both machines must restart their ranks in attempt 1, where every
          rank finishes, and both ddprun exit 0 long before the 60 s are up.
lost      Every rank sleeps 60 s, and machine B's ddprun is killed (SIGKILL). Machine A must
          stop its ranks, wait --join-timeout (3 s) for B to come back, name node 1, and exit 1.

Needs root and `ip` (as two_machines.py): without them it exits 77. Every job has a deadline of
30 s. Exit 0 when every check holds, 1 otherwise.
"""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "multinode"))
sys.path.insert(0, str(ROOT / "tools" / "pylib"))
from two_machines import ADDRESS, Machines  # noqa: E402
from disttut import processes  # noqa: E402
from disttut.ddprun import ddprun_node  # noqa: E402

DEADLINE_S = 30
TOKEN = "agents-two-machines-test"

# Attempt 0: rank 3 dies by SIGKILL half a second in; the others would sleep 60 s.
RESTART_SCRIPT = r"""
echo "attempt $TORCHELASTIC_RESTART_COUNT rank $RANK started"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  if [ "$RANK" = 3 ]; then sleep 0.5; kill -9 $$; fi
  exec sleep 60
fi
echo "attempt $TORCHELASTIC_RESTART_COUNT rank $RANK done"
"""
SLEEP_SCRIPT = 'echo "rank $RANK started"; exec sleep 60'


def say(text):
    print(text, flush=True)


def ddprun(machines, machine, bin_dir, script, *flags):
    node = "AB".index(machine)
    return ["ip", "netns", "exec", machines.ns[machine], "env", f"DIST_STORE_TOKEN={TOKEN}",
            *ddprun_node(bin_dir, 2, node, 2, ["/bin/sh", "-c", script],
                         flags=["--master-addr", ADDRESS["A"], "--max-restarts", "1", *flags])]


def start(argv):
    # `ip netns exec` and `env` exec what follows, so the pid is ddprun's own.
    return processes.start(argv)


def finish(procs):
    """{name: (exit code, stdout, stderr)}; at the deadline every process group is stopped."""
    try:
        results = processes.finish(procs, DEADLINE_S)
    except processes.DeadlinePassed as late:
        results = {name: (code, out, err + (f"\n(stopped: no end within {DEADLINE_S} s)"
                                            if name in late.late else ""))
                   for name, (code, out, err) in late.results.items()}
    for name, (code, out, err) in results.items():
        for line in (out + err).splitlines():
            say(f"  {name}| {line}")
    return results


def check(ok, what):
    say(("ok    " if ok else "FAIL  ") + what)
    return ok


def restart_case(machines, bin_dir):
    started = time.monotonic()
    results = finish({m: start(ddprun(machines, m, bin_dir, RESTART_SCRIPT)) for m in "AB"})
    seconds = time.monotonic() - started
    ok = True
    for m, ranks in (("A", (0, 1)), ("B", (2, 3))):
        code, out, err = results[m]
        ok &= check(code == 0, f"restart: machine {m}'s ddprun exits 0 (got {code})")
        lines = set(out.splitlines())
        want = {f"attempt {a} rank {r} started" for a in (0, 1) for r in ranks}
        want |= {f"attempt 1 rank {r} done" for r in ranks}
        ok &= check(want <= lines, f"restart: machine {m} ran ranks {ranks} in attempts 0 and 1 "
                    f"(missing: {sorted(want - lines)})")
        ok &= check(not any(f"attempt 0 rank {r} done" in lines for r in ranks),
                    f"restart: machine {m}'s ranks of attempt 0 were stopped, not left to finish")
    ok &= check("node 1 failed" in results["A"][2] and "rank 3" in results["A"][2],
                "restart: machine A says node 1 failed, and names rank 3")
    ok &= check(seconds < 20, f"restart: both machines done in {seconds:.1f} s (< 20 s; the "
                "ranks of attempt 0 would sleep 60 s)")
    return ok


def lost_case(machines, bin_dir):
    flags = ("--join-timeout", "3")
    procs = {m: start(ddprun(machines, m, bin_dir, SLEEP_SCRIPT, *flags)) for m in "AB"}
    time.sleep(2)  # both machines have joined attempt 0 and their ranks sleep
    killed_at = time.monotonic()
    os.kill(procs["B"].pid, signal.SIGKILL)
    results = finish(procs)
    seconds = time.monotonic() - killed_at
    code, _, err = results["A"]
    ok = check(code == 1, f"lost: machine A's ddprun exits 1 (got {code})")
    ok &= check("node 1 did not join attempt 1 within 3 s (--join-timeout)" in err,
                "lost: machine A names node 1 after the join timeout")
    ok &= check("ddprun: attempt 1: node 1 did not join attempt 1 within 3 s" in err,
                "lost: machine A's summary ends with the attempt that never started, and why")
    ok &= check(2.5 < seconds < 15, f"lost: machine A ends {seconds:.1f} s after B's ddprun was "
                "killed (the 3 s join timeout, plus stopping its ranks)")
    return ok


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    bin_dir = sys.argv[1]
    if os.geteuid() != 0 or shutil.which("ip") is None:
        say("skipped: two machines as network namespaces need root and the ip command "
            "(Debian: iproute2)")
        sys.exit(77)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with Machines() as machines:
            ok = restart_case(machines, bin_dir)
            ok &= lost_case(machines, bin_dir)
    except subprocess.CalledProcessError as e:
        say(f"skipped: this system refused a network namespace or a veth pair: {e.stderr.strip()}")
        sys.exit(77)
    say("OK: the two machines restarted together, and a lost machine was named" if ok
        else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
