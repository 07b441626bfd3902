"""Processes with a deadline: nothing a tool or a test starts may outlive it, or hang it.

  start(argv, env=None)          a Popen in a process group (session) of its own, output captured
  finish({name: proc}, S)        waits for them all, S seconds in all (one deadline, not one each):
                                 {name: Finished(returncode, stdout, stderr)}; at the deadline
                                 every group still running is stopped and DeadlinePassed raised,
                                 with what each process wrote
  run(argv, S, env=None)         start and finish one command
  stop_group(proc)               SIGTERM to its group, SIGKILL STOP_GRACE_S later

Why a group of its own, and SIGTERM first: a job (ddprun, a driver, `ip netns exec ... ddprun`)
starts processes of its own. Signalling the group reaches those that stayed in it; ddprun puts
each rank in a group of its own and passes SIGTERM on to every one of them, which a SIGKILL of
ddprun could not do (the ranks would outlive it).
"""
import os
import signal
import subprocess
import time
from typing import NamedTuple

# Between SIGTERM and SIGKILL: ddprun's grace period (3 s) and a little more, so that ddprun can
# stop its ranks' own process groups itself.
STOP_GRACE_S = 5


class Finished(NamedTuple):
    """How one process ended, and what it wrote (None for a stream that was not captured)."""
    returncode: int
    stdout: str
    stderr: str


class DeadlinePassed(Exception):
    """Raised by finish() and run() once the deadline has passed and every process still running
    then has been stopped. `late`: their names; `results`: {name: Finished} for every process,
    with what it wrote until it was stopped."""

    def __init__(self, deadline_s, late, results):
        super().__init__(f"no end within {deadline_s} s: {', '.join(map(str, late))}")
        self.deadline_s, self.late, self.results = deadline_s, late, results


def start(argv, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen_args):
    """Starts argv in a session of its own (its pid is its group's id), text mode, output
    captured unless told otherwise; env, as for Popen, is the whole environment."""
    return subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=True, **popen_args)


def _signal_group(proc, signum):
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:  # the group has ended already
        pass


def stop_group(proc, grace_s=STOP_GRACE_S):
    """Stops the process group `proc` leads: SIGTERM, then SIGKILL after grace_s. Returns what
    it wrote, as communicate() does."""
    _signal_group(proc, signal.SIGTERM)
    try:
        return proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
    try:
        return proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        # A process that left the group still holds the pipes: give up on the output, not wait.
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        return "", "(its output was lost: a process outside its group kept the pipes open)"


def finish(procs, deadline_s, grace_s=STOP_GRACE_S):
    """Waits for every process of {name: Popen} (started by start()) until one deadline,
    deadline_s from now, for all of them; returns {name: Finished} in the same order. When the
    deadline passes with processes still running, each of them is sent SIGTERM at once (then
    stop_group), and DeadlinePassed is raised with every process's result."""
    deadline = time.monotonic() + deadline_s
    results = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            break
        results[name] = Finished(proc.returncode, out, err)
    else:
        return results
    waiting = [name for name in procs if name not in results]
    late = [name for name in waiting if procs[name].poll() is None]
    for name in late:  # all at once: the processes of one job stop together
        _signal_group(procs[name], signal.SIGTERM)
    for name in waiting:
        proc = procs[name]
        try:  # one that ended just now, its output not yet read: read it, as for the others
            out, err = (stop_group(proc, grace_s) if name in late
                        else proc.communicate(timeout=grace_s))
        except subprocess.TimeoutExpired:  # ended, but what it started holds its pipes
            out, err = stop_group(proc, grace_s)
        results[name] = Finished(proc.returncode, out, err)  # after stop_group: it sets the code
    results = {name: results[name] for name in procs}
    if late:
        raise DeadlinePassed(deadline_s, late, results)
    return results


def run(argv, deadline_s, env=None, **popen_args):
    """start(argv) and finish it: its Finished, or DeadlinePassed (the job stopped whole)."""
    return finish({"job": start(argv, env, **popen_args)}, deadline_s)["job"]
