#!/usr/bin/env python3
"""Two machines on one computer: post B's machines A and B, as Linux network namespaces.

usage: two_machines.py BIN_DIR [PROGRAM...]      (./tutorial run multinode)

Builds two "machines", network namespaces dist-a-N and dist-b-N, each with its own network stack
and one address (A 10.231.0.1, B 10.231.0.2), joined by a virtual cable (a veth pair). Then, for
each chapter (by default ch01_get_dist_info, ch04_all_reduce and ch08_ddp_linear), it starts one
ddprun on each machine, as you would on two real ones:

  A: ddprun --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.231.0.1 PROGRAM
  B: ddprun --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.231.0.1 PROGRAM

and checks that machine A ran RANK 0 and 1 and machine B RANK 2 and 3, each with LOCAL_RANK 0 and
1, and that every rank printed what it prints when the same four ranks share one machine (two
ddprun on 127.0.0.1; only the master's address differs). The last chapter runs once more with
DIST_IFNAME naming each machine's interface, as on machines with several networks. The ranks' traffic stays inside the two
namespaces: they have no route to anywhere else. The namespaces are removed at the end, also on
Ctrl-C or a failure.

Creating namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): without it this exits 77 and
says so. It needs `ip` (Debian: iproute2). Each job has a 120 s deadline. Exit 0 when every check
holds, 1 otherwise.
"""
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut import processes  # noqa: E402
from disttut.ddprun import ddprun_node  # noqa: E402
from disttut.ports import free_port  # noqa: E402

ADDRESS = {"A": "10.231.0.1", "B": "10.231.0.2"}
PORT = 29500  # each namespace has its own ports: nothing else listens there
DEFAULT_PROGRAMS = ["ch01_get_dist_info", "ch04_all_reduce", "ch08_ddp_linear"]
DEADLINE_S = 120


def say(text):
    print(text, flush=True)


def sh(*cmd):
    """Runs one set-up command, printed first; raises CalledProcessError with its stderr."""
    say("+ " + " ".join(cmd))
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30)


class Machines:
    """The two namespaces and the cable between them; removed on exit."""

    def __init__(self):
        tag = str(os.getpid() % 100000)
        self.ns = {"A": f"dist-a-{tag}", "B": f"dist-b-{tag}"}
        self.veth = {"A": f"dva{tag}", "B": f"dvb{tag}"}  # at most 15 characters

    def __enter__(self):
        try:
            for m in "AB":
                sh("ip", "netns", "add", self.ns[m])
            sh("ip", "link", "add", self.veth["A"], "type", "veth", "peer", "name", self.veth["B"])
            for m in "AB":
                sh("ip", "link", "set", self.veth[m], "netns", self.ns[m])
                sh("ip", "-n", self.ns[m], "addr", "add", f"{ADDRESS[m]}/24", "dev", self.veth[m])
                sh("ip", "-n", self.ns[m], "link", "set", self.veth[m], "up")
                sh("ip", "-n", self.ns[m], "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for m in "AB":  # deleting a namespace deletes the veth end inside it, and so the pair
            subprocess.run(["ip", "netns", "del", self.ns[m]], capture_output=True, timeout=30)
        say(f"removed the namespaces {self.ns['A']} and {self.ns['B']}")

    def ddprun(self, machine, bin_dir, program, token, ifname=False):
        node = "AB".index(machine)
        # With ifname, Gloo is told its interface by name (DIST_IFNAME), as on a machine with
        # several networks; without, it takes the one that routes to the master's address.
        interface = [f"DIST_IFNAME={self.veth[machine]}"] if ifname else []
        return ["ip", "netns", "exec", self.ns[machine], "env", f"DIST_STORE_TOKEN={token}",
                *interface,
                *ddprun_node(bin_dir, 2, node, 2, [f"{bin_dir}/{program}"],
                             flags=["--master-addr", ADDRESS["A"], "--master-port", str(PORT)])]


def run_machines(commands):
    """Starts every (name, argv) at once; returns {name: (exit code, stdout, stderr)}. At the
    deadline, DEADLINE_S for all, every process group is stopped and this exits."""
    try:
        return processes.finish({name: processes.start(argv) for name, argv in commands},
                                DEADLINE_S)
    except processes.DeadlinePassed:
        raise SystemExit(f"no end within {DEADLINE_S} s: {' '.join(commands[0][1])}") from None


def one_machine_lines(bin_dir, program):
    """The same 2 x 2 layout on one machine: two ddprun on 127.0.0.1 (tests/cluster uses it too)."""
    port = free_port()
    commands = [(str(node), ddprun_node(bin_dir, 2, node, 2, [f"{bin_dir}/{program}"],
                                        flags=["--master-port", str(port)])) for node in (0, 1)]
    lines = Counter()
    for code, out, err in run_machines(commands).values():
        if code != 0:
            raise SystemExit(f"the one-machine run of {program} failed:\n{err}")
        lines.update(out.splitlines())
    return lines


def placement(output):
    """{rank: local_rank} from chapter 01's get_dist_info() lines."""
    return {int(r): int(lr) for r, lr in re.findall(
        r"get_dist_info\(\): rank (\d+), world_size 4, local_rank (\d+), local_world_size 2", output)}


def check_program(machines, bin_dir, program, ifname=False):
    token = secrets.token_hex(16)  # one job token, exported on both machines
    results = run_machines([(m, machines.ddprun(m, bin_dir, program, token, ifname))
                            for m in "AB"])
    ok = True
    got = Counter()
    for m in "AB":
        code, out, err = results[m]
        for line in (out + err).splitlines():
            say(f"  {m}| {line}")
        if code != 0:
            say(f"FAIL  {program}: machine {m}'s ddprun exited with code {code}")
            ok = False
        got.update(line.replace(ADDRESS["A"], "127.0.0.1") for line in out.splitlines())
    if program == "ch01_get_dist_info":
        where = {m: placement(results[m][1]) for m in "AB"}
        if where != {"A": {0: 0, 1: 1}, "B": {2: 0, 3: 1}}:
            say(f"FAIL  {program}: ranks and local ranks per machine are {where}, expected "
                "A: RANK 0, 1 with LOCAL_RANK 0, 1 and B: RANK 2, 3 with LOCAL_RANK 0, 1")
            ok = False
        else:
            say(f"ok    {program}: machine A runs RANK 0, 1 and machine B RANK 2, 3, each with "
                "LOCAL_RANK 0, 1")
    want = one_machine_lines(bin_dir, program)
    if got != want:
        say(f"FAIL  {program}: the two machines printed other lines than one machine")
        for line in sorted((want - got).elements()):
            say(f"  only on one machine:  {line}")
        for line in sorted((got - want).elements()):
            say(f"  only on two machines: {line}")
        ok = False
    elif ok:
        label = f"{program} (DIST_IFNAME={machines.veth['A']}/{machines.veth['B']})" if ifname \
            else program
        say(f"ok    {label}: every rank printed what it prints on one machine "
            f"({sum(want.values())} lines; only the master's address differs)")
    return ok


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    bin_dir, programs = sys.argv[1], sys.argv[2:] or DEFAULT_PROGRAMS
    if shutil.which("ip") is None:
        say("skipped: the ip command is missing (Debian: apt-get install iproute2)")
        sys.exit(77)
    if os.geteuid() != 0:
        say("skipped: building two machines as network namespaces needs root (ip netns add); "
            "run it as root, e.g. sudo ./tutorial run multinode")
        sys.exit(77)
    # A stop from outside (Ctrl-C, or ctest's timeout) still removes the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with Machines() as machines:
            ok = all([check_program(machines, bin_dir, p) for p in programs])
            ok &= check_program(machines, bin_dir, programs[-1], ifname=True)
    except subprocess.CalledProcessError as e:
        say(f"skipped: this system refused a network namespace or a veth pair: {e.stderr.strip()}"
            " (a container without CAP_NET_ADMIN, or a kernel without veth)")
        sys.exit(77)
    say("OK: two machines ran every chapter like one" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
