#!/usr/bin/env python3
"""Chapter 11's resume on two machines that share no disk.

  fault_tolerance_machines.py BIN_DIR

Builds tools/multinode/two_machines.py's two "machines" (network namespaces: A, 10.231.0.1, runs
ranks 0 and 1; B, 10.231.0.2, ranks 2 and 3) and gives each a snapshot folder of its own, as if
each had its own disk. ch11_fault_tolerance runs with one ddprun per machine, snapshots every 10
steps (32 steps in all at 4 ranks). The reference is the uninterrupted job on one machine (one
ddprun, 4 ranks); every job below must end with its bits (every rank's hex floats and rank 0's
fingerprint of the model and the optimizer):
  1. uninterrupted, on the two machines;
  2. rank 3, on machine B, crashes before step 25, under --max-restarts 1 on both machines (the
     agents restart together: tools/ddprun/README.md): attempt 1 resumes at step 20 and leaves no
     snapshot in either folder;
  3. only machine B holds the newest snapshot: jobs stopped by a crash (no restart) leave step 10
     in A's folder and step 20 in B's (a machine whose disk fell behind); the next job resumes at
     step 20 from rank 2's copy;
  4. machine A's folder is empty (a machine back with a new disk), B's holds step 20: the next
     job resumes at step 20 from rank 2's copy.
Creating namespaces needs root and `ip` (Debian: iproute2): without them, or when the system
refuses a namespace, this exits 77 and says why. Each job has a 120 s deadline. Exit 0 when every
case holds, 1 otherwise.
"""
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "multinode"))
sys.path.insert(0, str(ROOT / "tools" / "pylib"))
from two_machines import ADDRESS, PORT, Machines, run_machines  # noqa: E402
from disttut.ddprun import ddprun, ddprun_node  # noqa: E402

PROGRAM = "ch11_fault_tolerance"
EVERY = ["--snapshot-every", "10"]
DEADLINE_S = 120
FINAL = re.compile(r"^\[rank (\d+)/4\] final: (.*)$", re.M)
PRINT = re.compile(r"^\[rank 0/4\] fingerprint of the model and the optimizer: (\w+)$", re.M)


def result(stdout):
    """Every rank's final line and rank 0's fingerprint, or None when one is missing."""
    finals, prints = sorted(FINAL.findall(stdout)), PRINT.findall(stdout)
    return (tuple(finals), prints[0]) if len(finals) == 4 and len(prints) == 1 else None


class Job:
    """One job on the two machines, each with its own snapshot folder."""

    def __init__(self, machines, bin_dir, folders):
        self.machines, self.bin_dir, self.folders = machines, bin_dir, folders

    def snapshot(self, m):
        return f"{self.folders[m]}/snapshot.bin"

    def clear(self):
        """Empties both folders: each case starts from machines without a snapshot."""
        for m in "AB":
            for name in os.listdir(self.folders[m]):
                os.remove(f"{self.folders[m]}/{name}")

    def run(self, args=(), restarts=None):
        """Starts one ddprun per machine; returns (A's exit code, B's, both outputs joined)."""
        token = secrets.token_hex(16)  # one job token, exported on both machines
        flags = ["--max-restarts", str(restarts)] if restarts is not None else []
        commands = []
        for node, m in enumerate("AB"):
            commands.append((m, [
                "ip", "netns", "exec", self.machines.ns[m], "env", f"DIST_STORE_TOKEN={token}",
                *ddprun_node(self.bin_dir, 2, node, 2,
                             [f"{self.bin_dir}/{PROGRAM}", "--snapshot", self.snapshot(m), *EVERY,
                              *args],
                             flags=["--master-addr", ADDRESS["A"], "--master-port", str(PORT),
                                    *flags])]))
        results = run_machines(commands)
        text = "".join(f"{m}| {line}\n" for m in "AB"
                       for line in (results[m][1] + results[m][2]).splitlines())
        stdout = results["A"][1] + results["B"][1]
        return results["A"][0], results["B"][0], stdout, text


def check(failures, name, job, reference, args=(), restarts=None, expect=(), attempts=1):
    """The job must exit 0 on both machines, end with the reference bits, print every line of
    `expect`, start `attempts` attempts and leave no snapshot in either folder."""
    code_a, code_b, stdout, text = job.run(args, restarts)
    problems = []
    if (code_a, code_b) != (0, 0):
        problems.append(f"exit codes A {code_a}, B {code_b}")
    got = result(stdout)
    if got != reference:
        problems.append(f"ended with {got}, the uninterrupted job with {reference}")
    problems += [f"no line matching '{e}'" for e in expect if not re.search(e, stdout, re.M)]
    started = len(re.findall(r"^\[rank 0/4\] attempt \d+: ", stdout, re.M))
    if started != attempts:
        problems.append(f"{started} attempts started, expected {attempts}")
    left = [m for m in "AB" if os.path.exists(job.snapshot(m))]
    if left:
        problems.append(f"the finished job left its snapshot on machine(s) {', '.join(left)}")
    if problems:
        failures.append(f"{name}: " + "; ".join(problems) + "\n" + text)
    else:
        print(f"ok: {name}", flush=True)


def stopped_job(failures, name, job, crash_at, expect_a, expect_b):
    """A job whose rank 3 (machine B) crashes before step `crash_at`, with no restart: it must
    fail, and leave a snapshot of `expect_a` steps in A's folder and `expect_b` in B's."""
    code_a, code_b, _, text = job.run(["--crash-at-step", str(crash_at)])
    held = {m: steps_done(job.snapshot(m)) for m in "AB"}
    if code_b == 0 or held != {"A": expect_a, "B": expect_b}:
        failures.append(f"{name}: exit codes A {code_a}, B {code_b}; snapshots hold {held} steps,"
                        f" expected A {expect_a}, B {expect_b}\n{text}")
        return False
    print(f"ok: {name}: the snapshots hold steps {held}", flush=True)
    return True


def steps_done(path):
    """The steps a snapshot file records (support.h: "DISTSNAP", 7 words of the run's shape, then
    steps_done), or None when there is no file."""
    if not os.path.exists(path):
        return None
    data = Path(path).read_bytes()
    return int.from_bytes(data[64:72], "little", signed=True)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    bin_dir = sys.argv[1]
    if shutil.which("ip") is None:
        print("skipped: the ip command is missing (Debian: apt-get install iproute2)")
        sys.exit(77)
    if os.geteuid() != 0:
        print("skipped: building two machines as network namespaces needs root (ip netns add)")
        sys.exit(77)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # ctest's timeout: clean up too
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = ddprun(bin_dir, 4, [f"{bin_dir}/{PROGRAM}", "--snapshot", f"{tmp}/one.bin",
                                    *EVERY], deadline=DEADLINE_S)
        reference = result(plain.stdout)
        if plain.returncode != 0 or reference is None:
            print(f"FAIL: the uninterrupted job on one machine failed (exit code "
                  f"{plain.returncode})\n{plain.stdout}{plain.stderr}")
            sys.exit(1)
        print(f"the uninterrupted job on one machine ends with fingerprint {reference[1]}")
        folders = {m: f"{tmp}/{m}" for m in "AB"}
        for folder in folders.values():
            os.mkdir(folder)
        try:
            with Machines() as machines:
                job = Job(machines, bin_dir, folders)
                check(failures, "uninterrupted, on two machines", job, reference,
                      expect=[r"^\[rank 0/4\] attempt 0: no snapshot at "])
                check(failures, "rank 3 (machine B) crashes before step 25, one restart", job,
                      reference, ["--crash-at-step", "25"], restarts=1, attempts=2,
                      expect=[r"^\[rank 3/4\] crashing on purpose before step 25 \(attempt 0\)$",
                              r"^\[rank 0/4\] attempt 1: resumed from \S+ at step 20 \(epoch 2, "
                              r"step 4 of 8\), rank 0's copy$"])
                # Machine A's disk falls behind: it gets back the copy of step 10.
                job.clear()
                behind = f"{tmp}/A-step-10.bin"
                if stopped_job(failures, "a job stopped before step 15", job, 15, 10, 10):
                    shutil.copy(job.snapshot("A"), behind)
                if os.path.exists(behind) and stopped_job(
                        failures, "the next job, stopped before step 25", job, 25, 20, 20):
                    shutil.copy(behind, job.snapshot("A"))
                    check(failures, "only machine B holds the newest snapshot (A step 10, B step "
                          "20)", job, reference, restarts=1,
                          expect=[r"^\[rank 0/4\] attempt 0: resumed from \S+ at step 20 "
                                  r"\(epoch 2, step 4 of 8\), rank 2's copy$"])
                # Machine A comes back with an empty disk.
                job.clear()
                if stopped_job(failures, "a job stopped before step 25", job, 25, 20, 20):
                    os.remove(job.snapshot("A"))
                    check(failures, "machine A's folder is empty, B's holds step 20", job,
                          reference, restarts=1,
                          expect=[r"^\[rank 0/4\] attempt 0: resumed from \S+ at step 20 "
                                  r"\(epoch 2, step 4 of 8\), rank 2's copy$"])
        except subprocess.CalledProcessError as e:
            print(f"skipped: this system refused a network namespace or a veth pair: "
                  f"{e.stderr.strip()} (a container without CAP_NET_ADMIN, or a kernel without "
                  "veth)")
            sys.exit(77)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("OK: on two machines with a snapshot folder each, a crash and restart, a machine whose "
          "folder fell behind and one whose folder is empty each ended with the bits of the "
          "uninterrupted job")


if __name__ == "__main__":
    main()
