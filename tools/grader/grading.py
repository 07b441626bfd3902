"""What a chapter's grader is made of: chapters/NN_name/exercises/grader.py builds on this.

An exercise is graded by what the participant's program does, never by its source text: the
program runs under ddprun at each world size the exercise names, and a judge reads what every rank
printed, works out what the right answer is by itself (a closed form, or a second computation),
and says what is wrong. A chapter's grader.py defines

    EXERCISES = {"ex1": Exercise(title=..., worlds=(1, 2, 3), judge=..., hint=...), ...}

The judge gets a Run (one world size) and raises Fail("what is wrong", hint="where to look") at
the first thing that is wrong; returning means that world size passes. A hint points at the
mistake without handing over the answer: it names the property that is broken or the place to
look, not the line to write (participants read it before they read the solution).

The chapter's mutants sit beside its solutions, in chapters/NN_name/solutions/mutations.py, since
they quote solution lines: MUTATIONS = {"ex1": [Mutation(name=..., find=..., replace=...,
expect=...), ...]}. Each is one deliberate mistake in the solution (its text `find`, replaced by
`replace`); the tests build every mutant and require the grader to fail it with a message
containing `expect`, so a grader that checks too little cannot pass unnoticed. An exercise may
have several, one per mistake its judge names.

Only Python's standard library is used: participants' machines need no PyTorch to be graded.
"""
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut import processes  # noqa: E402
from disttut.ddprun import ddprun, ddprun_node  # noqa: E402,F401  (graders import ddprun_node)
from disttut.ports import free_port  # noqa: E402,F401  (the graders import it from here)

RANK_LINE = re.compile(r"^\[rank (\d+)/(\d+)\] (.*)$")
DDPRUN_PREFIX = "ddprun: "
MAX_ERROR_LINES = 8  # of the ranks' errors in a failure's message: enough for one per rank


class Number(float):
    """A number as a rank printed it: its value and the size of one unit in its last printed digit
    (0.0001 for 16.6667, 1e-07 for 2.5e-06), so that it is compared to what was printed."""

    def __new__(cls, text):
        value = super().__new__(cls, text)
        mantissa, _, exponent = text.strip().lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        value.unit = 10.0 ** (int(exponent or 0) - decimals)
        return value


class Fail(Exception):
    """The first thing that is wrong, said so that a participant knows where to look."""

    def __init__(self, what, hint=None):
        super().__init__(what)
        self.what = what
        self.hint = hint


@dataclass
class Mutation:
    name: str     # what the mistake is, as a word or two for file and test names: "per_rank_means"
    find: str     # a text that occurs exactly once in the solution
    replace: str  # the deliberate mistake
    expect: str   # a text the grader's FAIL message must contain for this mistake


MUTATION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass
class Run:
    """One run of the program on `world` ranks: its exit code and what it printed."""
    world: int
    returncode: int
    stdout: str
    stderr: str
    command: list = field(default_factory=list)

    def lines(self, rank=None):
        """The lines a rank printed (without its "[rank r/W] " prefix), in order; all ranks' lines
        with rank=None."""
        found = []
        for line in self.stdout.splitlines():
            m = RANK_LINE.match(line)
            if m and (rank is None or int(m.group(1)) == rank):
                found.append(m.group(3))
        return found

    def value(self, rank, pattern, convert=Number, what=None):
        """The first match of `pattern` (a regex with one group) among `rank`'s lines, converted;
        Fail naming the rank and what was looked for when there is none."""
        regex = re.compile(pattern)
        for line in self.lines(rank):
            m = regex.search(line)
            if m:
                try:
                    return convert(m.group(1))
                except ValueError:
                    raise Fail(f"rank {rank} printed '{line}', and '{m.group(1)}' is not a "
                               f"{convert.__name__}") from None
        raise Fail(f"rank {rank} of {self.world} printed no line with {what or pattern!r}",
                   "keep the program's print lines as the starter has them: the grader reads them")

    def values(self, pattern, convert=Number, what=None):
        """value() for every rank, as a list indexed by rank."""
        return [self.value(r, pattern, convert, what) for r in range(self.world)]

    def tail(self, count=8):
        text = (self.stdout + self.stderr).strip().splitlines()
        return "\n".join("      " + line for line in text[-count:])

    def errors(self, limit=MAX_ERROR_LINES):
        """The ranks' own error lines, in the order they were written: each "[rank r/W] error: ..."
        line with the lines that continue it (a message of several lines), and whatever a rank
        wrote without its prefix (a crash's "terminate called ...") – never ddprun's own lines.
        At most `limit` lines, then a line saying how many more there were."""
        found = []
        for stream in (self.stderr, self.stdout):
            in_error = False
            for line in stream.splitlines():
                rank_line = RANK_LINE.match(line)
                if rank_line:
                    in_error = rank_line.group(3).startswith("error: ")
                    if in_error:
                        found.append(line)
                elif line.startswith(DDPRUN_PREFIX) or not line.strip():
                    in_error = False
                elif stream is self.stderr or in_error:
                    found.append(line)  # a continuation, or a rank's unprefixed text
        if len(found) > limit:
            found = found[:limit] + [f"(and {len(found) - limit} more lines from the ranks)"]
        return found

    def summary(self):
        """ddprun's summary of the job (from its "---- summary ----" line on: how each rank ended,
        and who was where), or its last lines when it printed none."""
        lines = [line for line in self.stderr.splitlines() if line.startswith(DDPRUN_PREFIX)]
        start = next((i for i, line in enumerate(lines) if line.endswith("---- summary ----")),
                     max(0, len(lines) - 8))
        return lines[start:]

    def report(self):
        """What a participant needs to see of a job that failed: the ranks' own error lines first,
        then ddprun's summary; the last lines the job printed when there is neither."""
        errors, summary = self.errors(), self.summary()
        if not errors and not summary:
            return f"Last lines:\n{self.tail()}"
        parts = []
        if errors:
            parts.append("The ranks' errors:\n" + "\n".join("      " + e for e in errors))
        if summary:
            parts.append("ddprun's summary:\n" + "\n".join("      " + s for s in summary))
        return "\n    ".join(parts)


@dataclass
class Exercise:
    title: str
    judge: Callable[[Run], None]
    worlds: tuple = (2, 3)
    args: tuple = ()
    hint: str = ""
    deadline_s: int = 60
    # A run that must exit non-zero (an exercise about a failing job) sets this: the judge then
    # sees every run, whatever its exit code.
    any_exit_code: bool = False
    # Extra environment for the ranks (for example a short DIST timeout).
    env: dict = field(default_factory=dict)
    # How a run is started, when ddprun on one machine is not how the exercise runs (two programs
    # by hand, a driver that starts its own jobs): runner(bin_dir, program, world, exercise) -> Run,
    # with a deadline of its own (run_ddprun and run_command show how).
    runner: Optional[Callable] = None


def run_ddprun(bin_dir, program, world, args, deadline_s, env=None, flags=()):
    """`ddprun --standalone --nproc-per-node WORLD FLAGS... PROGRAM ARGS...` (flags: ddprun's own,
    such as --max-restarts), stopped with its ranks at the deadline (disttut.processes): a grader
    never hangs."""
    return run_command(ddprun(bin_dir, world, [program, *args], flags=flags), world, deadline_s,
                       env)


def run_command(command, world, deadline_s, env=None):
    """Any command that runs a job of `world` ranks (a driver, a script), in a process group of its
    own that is stopped whole at the deadline (SIGTERM, then SIGKILL: disttut.processes)."""
    full_env = dict(os.environ, **(env or {}))
    try:
        done = processes.run(command, deadline_s, full_env)
    except processes.DeadlinePassed as late:
        out, err = late.results["job"][1:]
        raise Fail(f"the job on {world} ranks did not end within {deadline_s} s; it was "
                   f"stopped. {Run(world, -9, out, err).report()}",
                   "a rank waits for a collective the others never call: every rank must "
                   "make the same calls in the same order") from None
    return Run(world, done.returncode, done.stdout, done.stderr, command)


def run_together(commands, world, deadline_s, env=None):
    """Several commands started together (the processes of one job started by hand, or one ddprun
    per machine), in one process group killed whole at the deadline; the job's exit code is the
    last non-zero one of theirs, 0 if all succeed."""
    script = "".join(f"{shlex.join(c)} & p{i}=$!; " for i, c in enumerate(commands))
    script += "s=0; " + "".join(f"wait $p{i} || s=$?; " for i in range(len(commands))) + "exit $s"
    return run_command(["sh", "-c", script], world, deadline_s, env)


def grade(exercise, bin_dir, program, report=print):
    """Runs and judges the program at each world size of the exercise, in order; raises Fail at
    the first problem. `report` gets one progress line per world size that passes."""
    if not os.access(program, os.X_OK):
        raise Fail(f"{program} does not exist or cannot be run", "build it first")
    for world in exercise.worlds:
        if exercise.runner is not None:
            run = exercise.runner(bin_dir, program, world, exercise)
        else:
            run = run_ddprun(bin_dir, program, world, list(exercise.args), exercise.deadline_s,
                             exercise.env)
        if run.returncode != 0 and not exercise.any_exit_code:
            raise Fail(f"on {world} rank{'s' if world > 1 else ''} the job exited with code "
                       f"{run.returncode}. {run.report()}",
                       exercise.hint or None)
        try:
            exercise.judge(run)
        except Fail as failure:
            where = f"on {world} rank{'s' if world > 1 else ''}: "
            raise Fail(where + failure.what, failure.hint or exercise.hint or None) from None
        report(f"  {world} rank{'s' if world > 1 else ''}: right")


def close(a, b, rel=1e-9, abs_=1e-12):
    """a and b equal up to rounding: within `rel` of each other, or, where one of them is a Number
    a rank printed, within one unit of its last printed digit."""
    units = [getattr(x, "unit", 0.0) for x in (a, b)]
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)), *units)
