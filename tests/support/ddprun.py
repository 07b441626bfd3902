"""ddprun for the Python checks: the one place that writes its command line.

  ddprun(bin_dir, nproc, command)               the command line, a list, for Popen
  ddprun(bin_dir, nproc, command, deadline=S)   run it: a CompletedProcess (text, output captured)
  ddprun(..., flags=["--local-rank-arg"])       more of ddprun's own flags, before the command
  LAUNCHER_VARIABLES                            every launcher's variables (launcher_variables.h)

Every job runs with --standalone: one machine, at a free port ddprun picks, so that checks running
side by side never meet at the same port. A script imports this file by a path relative to its
own, e.g. from tests/chapters:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
    from ddprun import ddprun  # noqa: E402
"""
import re
import subprocess
from pathlib import Path


def ddprun(bin_dir, nproc, command, deadline=None, flags=(), **run_args):
    """`BIN_DIR/ddprun --standalone --nproc-per-node NPROC COMMAND...`. Without a deadline, the
    command line; with one (seconds), runs it and returns the subprocess.CompletedProcess, whatever
    its exit code (run_args, such as env, go to subprocess.run). A run past its deadline is killed
    (ddprun's ranks die with it) and raises subprocess.TimeoutExpired."""
    cmd = [f"{bin_dir}/ddprun", "--standalone", "--nproc-per-node", str(nproc), *flags, *command]
    if deadline is None:
        return cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, check=False,
                          **run_args)


def _launcher_variables():
    """The names listed in launcher_variables.h, the C++ tests' list: what ddprun sets, and what
    mpirun and srun set instead."""
    header = (Path(__file__).resolve().parent / "launcher_variables.h").read_text()
    names = re.findall(r'^\s*"([A-Z_]+)",$', header, re.M)
    if not names:
        raise SystemExit("tests/support/launcher_variables.h lists no variables")
    return names


LAUNCHER_VARIABLES = _launcher_variables()
