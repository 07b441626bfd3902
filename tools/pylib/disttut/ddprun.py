"""ddprun for the Python checks: the one place that writes its command line.

  ddprun(bin_dir, nproc, command)               the command line, a list, for Popen
  ddprun(bin_dir, nproc, command, deadline=S)   run it: a CompletedProcess (text, output captured)
  ddprun(..., flags=["--local-rank-arg"])       more of ddprun's own flags, before the command
  ddprun_node(bin_dir, nnodes, node_rank, nproc, command, flags=[...])
                                                one machine's ddprun of a job on NNODES machines

Every job runs with --standalone: one machine, at a free port ddprun picks, so that checks running
side by side never meet at the same port (ddprun_node: one machine of several, no --standalone).
A script imports this file by a path relative to its own, e.g. from tests/chapters:

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
    from disttut.ddprun import ddprun  # noqa: E402
"""
import subprocess
import sys


def ddprun(bin_dir, nproc, command, deadline=None, flags=(), **run_args):
    """`BIN_DIR/ddprun --standalone --nproc-per-node NPROC COMMAND...`. Without a deadline, the
    command line; with one (seconds), runs it and returns the subprocess.CompletedProcess, whatever
    its exit code (run_args, such as env, go to subprocess.run). A run past its deadline is killed
    (ddprun's ranks die with it) and raises subprocess.TimeoutExpired, after printing the last
    lines it wrote to stderr."""
    cmd = [f"{bin_dir}/ddprun", "--standalone", "--nproc-per-node", str(nproc), *flags, *command]
    if deadline is None:
        return cmd
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, check=False,
                               **run_args)
    except subprocess.TimeoutExpired as e:  # say where it stood: what it printed up to then
        for name, text in (("stdout", e.stdout), ("stderr", e.stderr)):
            if isinstance(text, bytes):
                text = text.decode(errors="replace")
            tail = "\n".join((text or "").splitlines()[-40:])
            print(f"ddprun past its {deadline} s deadline; the last lines of its {name}:\n{tail}",
                  file=sys.stderr)
        raise


def ddprun_node(bin_dir, nnodes, node_rank, nproc, command, flags=()):
    """`BIN_DIR/ddprun --nnodes NNODES --node-rank NODE_RANK --nproc-per-node NPROC FLAGS...
    COMMAND...`, the command line of one machine's ddprun in a job of several machines."""
    return [f"{bin_dir}/ddprun", "--nnodes", str(nnodes), "--node-rank", str(node_rank),
            "--nproc-per-node", str(nproc), *flags, *command]
