#!/usr/bin/env python3
"""The chapters run unchanged under other launchers, and print what they print under ddprun.

usage: launchers_check.py mpirun BIN_DIR
       launchers_check.py slurm BIN_DIR

mpirun  Runs chapters 01, 04 and 08 under OpenMPI's mpirun (Debian's openmpi-bin) at 2 and 3
        ranks, passing only MASTER_ADDR and MASTER_PORT (mpirun -x); every rank learns its rank,
        world size and local rank from OMPI_COMM_WORLD_*. Each run's output must be, line for
        line (as a multiset: ranks print concurrently), the output of the same chapter under
        `ddprun --standalone`. Exit 77 when mpirun is not installed.
slurm   There is no Slurm here, so it starts the ranks as srun does: with SLURM_PROCID,
        SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID and SLURM_TASKS_PER_NODE (and MASTER_ADDR and
        MASTER_PORT, which a batch script exports), no RANK or WORLD_SIZE. One "machine" of 3
        tasks must print what ddprun's 3 ranks print; two "machines" of 2 tasks each (SLURM_NODEID
        0 and 1, SLURM_TASKS_PER_NODE=2(x2)) what two ddprun with --nnodes 2 print.

Every run has a 120 s deadline. Exit 0 when every output matches, 1 otherwise.
"""
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

# The reference for two machines: the same helper as ./tutorial run multinode.
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "multinode"))
sys.path.insert(0, str(ROOT / "tools" / "pylib"))
from two_machines import one_machine_lines  # noqa: E402
from disttut import processes  # noqa: E402
from disttut.ddprun import ddprun  # noqa: E402
from disttut.ports import free_port  # noqa: E402

CHAPTERS = ["ch01_get_dist_info", "ch04_all_reduce", "ch08_ddp_linear"]
DEADLINE_S = 120


def launcher_variables():
    """The names listed in tests/support/launcher_variables.h, the C++ tests' list: what ddprun
    sets, and what mpirun and srun set instead."""
    header = (ROOT / "tests" / "support" / "launcher_variables.h").read_text()
    names = re.findall(r'^\s*"([A-Z_]+)",$', header, re.M)
    if not names:
        raise SystemExit("tests/support/launcher_variables.h lists no variables")
    return names


LAUNCHER_VARIABLES = launcher_variables()


def clean_env(**extra):
    """This process's environment without any launcher's variables (the list, and all of
    mpirun's and srun's, whose many others would tell a rank it runs under them), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in LAUNCHER_VARIABLES and not k.startswith(("OMPI_", "SLURM_", "PMIX_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def ddprun_lines(bin_dir, program, nproc):
    command = [f"{bin_dir}/{program}"]
    run = ddprun(bin_dir, nproc, command, deadline=DEADLINE_S, env=clean_env())
    if run.returncode != 0:
        raise SystemExit(f"the reference run failed: {' '.join(run.args)}\n{run.stderr}")
    return Counter(run.stdout.splitlines())


def collect(procs, what):
    """Every line the processes printed, and a line for each that failed; at the deadline every
    one is stopped and this exits."""
    try:
        results = processes.finish(dict(enumerate(procs)), DEADLINE_S)
    except processes.DeadlinePassed:
        raise SystemExit(f"{what}: no end within {DEADLINE_S} s") from None
    lines = Counter()
    failed = []
    for code, out, err in results.values():
        lines.update(out.splitlines())
        if code != 0:
            failed.append(f"exit code {code}: {err.strip()}")
    return lines, failed


def compare(what, got, want, failed):
    if failed or got != want:
        print(f"FAIL  {what}")
        for f in failed:
            print(f"  {f}")
        for line in sorted((want - got).elements()):
            print(f"  only under ddprun: {line}")
        for line in sorted((got - want).elements()):
            print(f"  only here:         {line}")
        return False
    print(f"ok    {what}: the same {sum(want.values())} lines as under ddprun")
    return True


def check_mpirun(bin_dir):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin)")
        sys.exit(77)
    ok = True
    for program in CHAPTERS:
        for nproc in (2, 3):
            # OpenMPI refuses root unless told twice; --oversubscribe: more ranks than cores.
            env = clean_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
            # A free port can be taken by another test between free_port() and rank 0's bind:
            # then, and only then, a new port (as ddprun --standalone picks one per attempt).
            for _ in range(3):
                cmd = [mpirun, "-np", str(nproc), "--oversubscribe", "-x", "MASTER_ADDR=127.0.0.1",
                       "-x", f"MASTER_PORT={free_port()}", f"{bin_dir}/{program}"]
                got, failed = collect([processes.start(cmd, env)], " ".join(cmd))
                if not failed or "is already in use" not in str(failed):
                    break
            ok &= compare(f"mpirun -np {nproc} {program}", got, ddprun_lines(bin_dir, program, nproc),
                          failed)
    return ok


def srun_like(bin_dir, program, nodes, tasks_per_node, port):
    """Starts the ranks of `nodes` machines as srun would, each with Slurm's variables only."""
    procs = []
    for node in range(nodes):
        for local in range(tasks_per_node):
            env = clean_env(SLURM_PROCID=node * tasks_per_node + local,
                            SLURM_NTASKS=nodes * tasks_per_node, SLURM_LOCALID=local,
                            SLURM_NODEID=node, SLURM_NNODES=nodes,
                            SLURM_TASKS_PER_NODE=f"{tasks_per_node}(x{nodes})" if nodes > 1
                            else str(tasks_per_node),
                            MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            procs.append(processes.start([f"{bin_dir}/{program}"], env))
    return collect(procs, f"{program} with Slurm's variables")


def check_slurm(bin_dir):
    ok = True
    for program in CHAPTERS:
        got, failed = srun_like(bin_dir, program, 1, 3, free_port())
        ok &= compare(f"1 machine x 3 tasks, {program}", got, ddprun_lines(bin_dir, program, 3),
                      failed)
        got, failed = srun_like(bin_dir, program, 2, 2, free_port())
        ok &= compare(f"2 machines x 2 tasks, {program}", got,
                      one_machine_lines(bin_dir, program), failed)
    return ok


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("mpirun", "slurm"):
        raise SystemExit(__doc__)
    ok = check_mpirun(sys.argv[2]) if sys.argv[1] == "mpirun" else check_slurm(sys.argv[2])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
