#!/usr/bin/env python3
"""What ./tutorial check does for a room (tools/grader/check.py), on programs made to go wrong.

  grader_test.py BIN_DIR BUILD_DIR CASE

  error_first       a rank that fails: the FAIL shows that rank's own error line, before ddprun's
                    summary (12-ex1 with its chunks rounded down, 04-ex1 with a collective on
                    rank 0 only), and the error lines are picked out of what a job printed
  does_not_compile  of two exercises, one does not compile: it is a FAIL of its own, "does not
                    compile" with the compiler's first error, the other is still graded, and the
                    table is printed (the fixture grader_fixture_does_not_compile, built by
                    check.py --build as ./tutorial check builds: chapters/CMakeLists.txt)
  warnings          a participant's program with a warning builds, shows the warning and is
                    graded; the starters are compiled without -Werror, the solutions with it
  not_started       with several exercises, a starter nobody has edited is "not started": not
                    graded, no hint; an edited one is graded, with its hint; alone, an untouched
                    starter is graded. On a copy of the tree in a git repository of its own: the
                    source tree is never changed.

Each case exits 0 when the grader behaves so, 1 (saying what it saw) when it does not, and 77
(skipped) when this machine cannot tell (not_started without git).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tools/grader/check.py"
sys.path.insert(0, str(ROOT / "tools/grader"))
from grading import Run  # noqa: E402


def fail(what, output=""):
    print(f"FAIL: {what}")
    if output:
        print("---- the grader printed ----\n" + output)
    sys.exit(1)


def check(*args, check_py=CHECK):
    """check.py ARGS...: (exit code, stdout and stderr together), with the compiler's typographic
    quotes (GCC's in a UTF-8 locale) read as plain ones."""
    result = subprocess.run([sys.executable, str(check_py), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=600, check=False)
    return result.returncode, result.stdout.replace("\u2018", "'").replace("\u2019", "'")


def line_index(lines, start, what, output):
    """The first line that starts (once stripped) with `start`, a text or a compiled regex."""
    found = [i for i, line in enumerate(lines)
             if (start.match(line.strip()) if isinstance(start, re.Pattern)
                 else line.strip().startswith(start))]
    if not found:
        fail(f"no line starting '{getattr(start, 'pattern', start)}' ({what})", output)
    return found[0]


def error_first(bin_dir, _build_dir):
    # The participant review's two crashes: the failing rank's error line is shown, before the
    # summary. In 12-ex1 both ranks fail alike, and either may be first (ddprun then stops the
    # other before it prints); in 04-ex1 only rank 0 fails, rank 1 having exited 0.
    cases = [("12-ex1", "ch12_sharding_ex1_mutant_floor_chunks",
              re.compile(r"\[rank [01]/2\] error: dist::Tensor::assign_slice\(start=0, 11 values\) "
                         "does not fit")),
             ("04-ex1", "ch04_all_reduce_ex1_mutant_rank_zero_only",
              "[rank 0/2] error: all_reduce #1 (SUM, torch.float64, 2 elements) failed on rank 0")]
    for exercise, program, error in cases:
        code, out = check(bin_dir, exercise, "--program", Path(bin_dir) / program)
        lines = out.splitlines()
        if code != 1:
            fail(f"{exercise}: check.py exited {code}, not 1", out)
        failed = line_index(lines, f"FAIL: {exercise}: on 2 ranks the job exited with code 1",
                            "the FAIL", out)
        shown = line_index(lines, error, "the rank's own error", out)
        summary = line_index(lines, "ddprun: ---- summary ----", "ddprun's summary", out)
        if not failed < shown < summary:
            fail(f"{exercise}: the FAIL, the rank's error and ddprun's summary are on lines "
                 f"{failed}, {shown}, {summary}: the error must come right after the FAIL", out)
        print(f"ok    {exercise}: the rank's error line comes before ddprun's summary")
        # Rank 1 ran no collective. Whether it had exited (0) when rank 0 failed, or was still
        # closing its connections and was stopped, is a race; either way the summary must say
        # that it waits in no collective.
        if exercise == "04-ex1" and not any(
                said in out for said in ("rank 1 wrote no record: it exited with code 0",
                                         "rank 1 finished no collective and is in no collective")):
            fail("04-ex1: ddprun's flight summary does not say that rank 1 ran no collective", out)

    # What counts as a rank's error: its "error:" line, the lines that continue it, and what a
    # rank wrote without its prefix; never ddprun's lines, nor a rank's ordinary output.
    run = Run(2, 1, "[rank 0/2] step 1\n[rank 1/2] step 1\n",
              "ddprun: starting 2 ranks\n"
              "[rank 1/2] error: the ranks' calls differ:\n  rank 0: SUM\n  rank 1: MAX\n"
              "[rank 0/2] a warning of its own\n"
              "terminate called after throwing an instance of 'std::bad_alloc'\n"
              "ddprun: ---- summary ----\nddprun:   rank 0  exit code 1\n")
    want = ["[rank 1/2] error: the ranks' calls differ:", "  rank 0: SUM", "  rank 1: MAX",
            "terminate called after throwing an instance of 'std::bad_alloc'"]
    if run.errors() != want:
        fail(f"Run.errors() picked {run.errors()}, not {want}")
    if run.summary() != ["ddprun: ---- summary ----", "ddprun:   rank 0  exit code 1"]:
        fail(f"Run.summary() picked {run.summary()}")
    report = run.report()
    if report.index("error: the ranks' calls differ") > report.index("---- summary ----"):
        fail(f"Run.report() puts the summary first:\n{report}")
    many = Run(9, 1, "", "".join(f"[rank {r}/9] error: {r}\n" for r in range(9)))
    if len(many.errors(limit=4)) != 5 or many.errors(limit=4)[-1] != "(and 5 more lines from "\
                                                                      "the ranks)":
        fail(f"Run.errors(limit=4) of 9 error lines gave {many.errors(limit=4)}")
    print("ok    Run.errors(): a rank's error lines, their continuations and its crash text")


def does_not_compile(bin_dir, build_dir):
    bin_dir = Path(bin_dir)
    code, out = check(bin_dir, "04-ex1", "04-ex2", "--build", build_dir,
                      "--program", f"04-ex1={bin_dir / 'grader_fixture_does_not_compile'}",
                      "--program", f"04-ex2={bin_dir / 'ch04_all_reduce_ex2_solution'}")
    if code != 1:
        fail(f"check.py exited {code}, not 1 (an exercise does not compile)", out)
    lines = out.splitlines()
    failed = lines[line_index(lines, "FAIL: 04-ex1: does not compile: ", "the FAIL", out)]
    if "ex1_weighted_mean.cpp:" not in failed or \
            "'Sum' is not a member of 'dist::ReduceOp'" not in failed:
        fail(f"the FAIL does not quote the compiler's first error: {failed}", out)
    line_index(lines, "PASS: 04-ex2", "the other exercise, still graded", out)
    table = line_index(lines, "exercise", "the table", out)
    row1, row2 = lines[table + 1], lines[table + 2]
    if not row1.startswith("04-ex1     FAIL: does not compile: ex1_weighted_mean.cpp:") or \
            row2 != "04-ex2     PASS":
        fail(f"the table's rows are '{row1}' and '{row2}'", out)
    print("ok    a compile error is its exercise's FAIL row; the other exercise is graded")


def warnings(bin_dir, build_dir):
    # The fixture's source is a build output: touched, it is compiled again, and warns again.
    source = (Path(build_dir) / "chapters/grader_fixtures/grader_fixture_warns/"
              "ex1_weighted_mean.cpp")
    if not source.is_file():
        fail(f"{source} is missing: configure writes it (chapters/CMakeLists.txt)")
    os.utime(source)
    code, out = check(bin_dir, "04-ex1", "--build", build_dir,
                      "--program", Path(bin_dir) / "grader_fixture_warns")
    if code != 0 or "PASS: 04-ex1" not in out:
        fail(f"a program with an unused variable did not build and pass (exit {code})", out)
    if "warning: unused variable 'unused'" not in out:
        fail("the compiler's warning was not shown", out)
    print("ok    a warning is shown, and the program is still built and graded")

    commands = json.loads((Path(build_dir) / "compile_commands.json").read_text())
    starters = [c for c in commands if "/exercises/ex" in c["file"]]
    solutions = [c for c in commands if "/solutions/ex" in c["file"]]
    if not starters or not solutions:
        fail("compile_commands.json names no starter or no solution")
    for c in starters:
        if "-Werror" in c["command"].split():
            fail(f"a starter is compiled with -Werror: {c['file']}")
        if "-Wall" not in c["command"].split():
            fail(f"a starter is compiled without -Wall: {c['file']}")
    for c in solutions:
        if "-Werror" not in c["command"].split():
            fail(f"a solution is compiled without -Werror: {c['file']}")
    print(f"ok    {len(starters)} starters without -Werror, {len(solutions)} solutions with it")


def not_started(bin_dir, _build_dir):
    if shutil.which("git") is None:  # a tree exported without git (tests/fresh): nothing to ask
        print("skip: no git on this machine, and 'not started' is what git's HEAD holds")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="grader-not-started-") as tmp:
        tree = Path(tmp)
        for part in ("tools/grader", "tools/pylib", "chapters"):
            shutil.copytree(ROOT / part, tree / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        git = ["git", "-C", str(tree), "-c", "user.name=grader test",
               "-c", "user.email=grader@test.invalid"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "starters"]):
            subprocess.run(git + args, check=True, capture_output=True, timeout=60)
        check_py = tree / "tools/grader/check.py"
        # Both starters as committed: the table says "not started" for both, with no hint.
        code, out = check(bin_dir, "04-ex1", "04-ex2", check_py=check_py)
        if code != 1 or "hint:" in out or "04-ex1: " in out:
            fail(f"untouched starters were graded or hinted (exit {code})", out)
        for row in ("04-ex1     not started", "04-ex2     not started"):
            if row not in out.splitlines():
                fail(f"no row '{row}'", out)
        # An edited starter is graded, with its hint (the program graded is this build's starter,
        # which fails); the untouched one stays "not started"; the rows keep the syllabus' order.
        starter = tree / "chapters/04_all_reduce/exercises/ex1_weighted_mean.cpp"
        starter.write_text(starter.read_text() + "// started\n")
        code, out = check(bin_dir, "04-ex1", "04-ex2", check_py=check_py)
        lines = out.splitlines()
        if code != 1 or lines[-3:-1] != ["04-ex1     FAIL", "04-ex2     not started"]:
            fail(f"an edited starter was not graded beside an untouched one, in a table in the "
                 f"syllabus' order (exit {code})", out)
        if sum(line.startswith("  hint: ") for line in lines) != 1:
            fail("the edited starter's FAIL should come with its hint, and only it", out)
        # Named alone, an untouched starter is graded, with its hint.
        code, out = check(bin_dir, "04-ex1", check_py=check_py)
        if code != 1 or "FAIL: 04-ex1:" not in out or "  hint: " not in out:
            fail(f"04-ex1 alone was not graded with its hint (exit {code})", out)
    print("ok    untouched starters are 'not started' in the table, without hints; alone, graded")


CASES = {f.__name__: f for f in (error_first, does_not_compile, warnings, not_started)}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in CASES:
        print(__doc__)
        sys.exit(2)
    CASES[sys.argv[3]](sys.argv[1], sys.argv[2])
