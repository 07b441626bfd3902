#!/usr/bin/env python3
"""Grades workshop exercises: ./tutorial check runs this, and so do the tests.

  check.py BIN_DIR NN-exK... [--build BUILD_DIR]
                       grade the participant's programs (the lesson table's program of each
                       exercise, built from its starter); with --build, build each first, on its
                       own: one that does not compile is a FAIL of its own, and the others are
                       still graded
  check.py BIN_DIR NN-exK --program PATH
  check.py BIN_DIR NN-exK... --program NN-exK=PATH...
                       grade another build of an exercise (a solution, a mutant): with --build,
                       the target of that name is built
  check.py BIN_DIR NN-exK --program PATH --expect-fail [TEXT]
                       the tests' mode: exit 0 only if the grader FAILs the program (and its
                       message holds TEXT)
  check.py BIN_DIR NN-exK --program PATH --expect-mutant-fail NAME
                       the same, TEXT being the `expect` of the exercise's mutation NAME
                       (chapters/NN_name/solutions/mutations.py)

Each exercise runs under ddprun at the world sizes its grader names (chapters/NN_name/exercises/
grader.py), with a deadline per run, and is judged by what its ranks print: PASS, or FAIL with
the first thing that is wrong and a hint. With several exercises a table ends the output, and an
exercise whose starter is still the committed one (git HEAD's) is "not started": it is neither
built nor graded, and no hint is shown for it (name it alone to grade it anyway).
Exit 0 when every exercise passes, 1 when one does not, 2 on bad usage.
"""
import argparse
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tools" / "pylib"))
from disttut.lessons import read_table  # noqa: E402  (the lesson table, parsed once)
from grading import Fail, grade  # noqa: E402
from mutate import load_mutations  # noqa: E402

MAX_COMPILER_LINES = 20  # of a compile error's output, in the exercise's FAIL


def say(text):
    print(text, file=sys.stderr, flush=True)


def lesson_programs():
    """lesson name -> program, from chapters/lessons.txt (the syllabus, written once)."""
    problems = []
    programs = {lesson.name: lesson.program for lesson in read_table(ROOT, problems)}
    if problems:
        raise SystemExit("check: chapters/lessons.txt: " + "; ".join(problems))
    return programs


def chapter_folder(name):
    chapter = name.partition("-")[0]
    folders = sorted(ROOT.glob(f"chapters/{chapter}_*/"))
    if not folders:
        raise SystemExit(f"check: no folder chapters/{chapter}_*/ for {name}")
    return folders[0]


def load_exercise(name):
    """The Exercise for "NN-exK" from chapters/NN_*/exercises/grader.py."""
    chapter, _, short = name.partition("-")
    grader = chapter_folder(name) / "exercises" / "grader.py"
    if not grader.is_file():
        raise SystemExit(f"check: no grader for chapter {chapter} ({grader.relative_to(ROOT)})")
    spec = importlib.util.spec_from_file_location(f"grader_{chapter}", grader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if short not in module.EXERCISES:
        raise SystemExit(f"check: {grader.relative_to(ROOT)} has no exercise '{short}' "
                         f"(it has {', '.join(sorted(module.EXERCISES))})")
    return module.EXERCISES[short]


def starter_of(name):
    short = name.partition("-")[2]
    found = sorted((chapter_folder(name) / "exercises").glob(f"{short}_*.cpp"))
    return found[0] if len(found) == 1 else None


def untouched(path):
    """True when the file is byte for byte what git's HEAD holds: a starter nobody has edited.
    False when it differs, and where git cannot say (no git, not a checkout): then it is graded."""
    if path is None:
        return False
    try:
        committed = subprocess.run(["git", "-C", str(ROOT), "show",
                                    f"HEAD:{path.relative_to(ROOT).as_posix()}"],
                                   capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return committed.returncode == 0 and committed.stdout == path.read_bytes()


# ---- Building each exercise on its own -------------------------------------------------------

PROGRESS = re.compile(r"^\[\d+/\d+\] ")
FIRST_ERROR = re.compile(r"\berror\b|undefined reference")


def keep_going_flags(build_dir):
    """The build tool's "go on after a failure" flags, for the generator the build dir uses."""
    cache = Path(build_dir) / "CMakeCache.txt"
    text = cache.read_text(errors="replace") if cache.is_file() else ""
    if "CMAKE_GENERATOR:INTERNAL=Ninja" in text:
        return ["--", "-k", "0"]
    if "Makefiles" in text:
        return ["--", "-k"]
    return []


def compiler_lines(output):
    """What the compiler said in a build's output: without the build tool's progress lines, its
    FAILED lines and the command lines after them, and with paths relative to the repository."""
    lines, skip_next = [], False
    for line in output.splitlines():
        if skip_next:
            skip_next = False
            continue
        if line.startswith("FAILED: "):
            skip_next = True  # ninja prints the failed command on the next line
            continue
        if PROGRESS.match(line) or line.startswith(("ninja: ", "make: ", "make[", "gmake")):
            continue
        lines.append(line.replace(f"{ROOT}/", ""))
    return [line for line in lines if line.strip()]


def build_each(build_dir, targets):
    """Builds the targets: all together first, going on past a failure (in parallel, as one
    build), then each that failed alone, for its own compiler output. Returns {target: None when
    it built, else the compiler's lines}."""
    command = ["cmake", "--build", str(build_dir), "--target", *targets,
               *keep_going_flags(build_dir)]
    say("+ " + " ".join(command))
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        # The progress and the warnings of what built; a failed step's errors are left out here
        # (from its FAILED line to the next step), and come with its exercise's FAIL.
        failed_step = False
        for line in proc.stdout:
            if line.startswith("FAILED: "):
                failed_step = True
            elif PROGRESS.match(line) or line.startswith("ninja: "):
                failed_step = False
            if not failed_step and not line.startswith("ninja: build stopped"):
                say(line.rstrip().replace(f"{ROOT}/", ""))
    results = dict.fromkeys(targets)
    if proc.returncode == 0:
        return results
    for target in targets:
        alone = subprocess.run(["cmake", "--build", str(build_dir), "--target", target],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               check=False)
        if alone.returncode != 0:
            results[target] = compiler_lines(alone.stdout) or [
                f"the build of {target} failed (exit code {alone.returncode}) and the compiler "
                "said nothing: cmake --build " + f"{build_dir} --target {target} shows it"]
    return results


def first_error(lines):
    line = next((x for x in lines if FIRST_ERROR.search(x)), lines[0])
    # chapters/04_all_reduce/exercises/ex1_weighted_mean.cpp:20:27: error: ... -> ex1_...cpp:20:27
    return re.sub(r"^\S*/([^/\s]+\.(?:cpp|h):\d+)", r"\1", line.strip())


# ---- Grading ---------------------------------------------------------------------------------

@dataclass
class Result:
    status: str                    # "PASS", "FAIL", "not started"
    failure: Optional[Fail] = None
    note: str = ""                 # for the table: "does not compile (...)"


def check_one(name, bin_dir, program):
    exercise = load_exercise(name)
    print(f"{name}: {exercise.title} ({program})")
    try:
        grade(exercise, bin_dir, program)
    except Fail as failure:
        print(f"FAIL: {name}: {failure.what}")
        if failure.hint:
            print(f"  hint: {failure.hint}")
        return Result("FAIL", failure)
    print(f"PASS: {name}")
    return Result("PASS")


def does_not_compile(name, program, lines):
    exercise = load_exercise(name)
    error = first_error(lines)
    print(f"{name}: {exercise.title} ({program})")
    print(f"FAIL: {name}: does not compile: {error}")
    print("  the compiler said:")
    shown = lines[:MAX_COMPILER_LINES]
    for line in shown:
        print("      " + line)
    if len(lines) > len(shown):
        print(f"      (and {len(lines) - len(shown)} more lines)")
    return Result("FAIL", Fail(f"does not compile: {error}"), f"does not compile: {error}")


def print_table(results):
    print()
    print(f"{'exercise':<10} status")
    for name, result in results.items():
        note = f": {result.note}" if result.note else ""
        print(f"{name:<10} {result.status}{note}")
    if any(r.status == "not started" for r in results.values()):
        print("(not started: the starter as committed, neither built nor graded here; "
              "./tutorial check NN-exK grades it alone, with its hint)")


def parse_programs(values, exercises):
    """--program values -> {exercise: path}: "PATH" for the one exercise, or "NN-exK=PATH"."""
    programs = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            if len(exercises) != 1:
                raise SystemExit("check: --program PATH grades one exercise; with several, "
                                 "write --program NN-exK=PATH")
            name, path = exercises[0], value
        if name not in exercises:
            raise SystemExit(f"check: --program {value}: {name} is not among the exercises "
                             "named")
        programs[name] = path
    return programs


def main(argv):
    parser = argparse.ArgumentParser(description="Grade workshop exercises.")
    parser.add_argument("bin_dir")
    parser.add_argument("exercises", nargs="+", metavar="NN-exK")
    parser.add_argument("--program", action="append", default=[], metavar="[NN-exK=]PATH",
                        help="the program to grade instead of the participant's")
    parser.add_argument("--build", metavar="BUILD_DIR",
                        help="build each exercise's program there first, each on its own")
    parser.add_argument("--expect-fail", nargs="?", const="", default=None, metavar="TEXT",
                        help="succeed only if the grader fails the program (with TEXT)")
    parser.add_argument("--expect-mutant-fail", metavar="NAME",
                        help="--expect-fail with the text of the exercise's mutation NAME")
    args = parser.parse_args(argv[1:])
    programs = lesson_programs()
    for name in args.exercises:
        if name not in programs or "-ex" not in name:
            print(f"check: '{name}' is not an exercise of chapters/lessons.txt "
                  "(./tutorial list shows them)")
            return 2
    chosen = parse_programs(args.program, args.exercises)
    expecting = args.expect_fail is not None or args.expect_mutant_fail is not None
    if expecting and (len(args.exercises) != 1 or not chosen):
        print("check: --expect-fail and --expect-mutant-fail grade one exercise's --program")
        return 2
    if args.expect_mutant_fail is not None:
        name = args.exercises[0]
        mutations = load_mutations(chapter_folder(name) / "solutions" / "mutations.py",
                                   name.partition("-")[2])
        mutation = next((m for m in mutations if m.name == args.expect_mutant_fail), None)
        if mutation is None:
            print(f"check: {name} has no mutation '{args.expect_mutant_fail}' (it has "
                  f"{', '.join(m.name for m in mutations)})")
            return 2
        args.expect_fail = mutation.expect

    table = len(args.exercises) > 1 and not expecting
    results, paths = {}, {}
    for name in args.exercises:
        paths[name] = chosen.get(name) or str(Path(args.bin_dir) / programs[name])
        if table and name not in chosen and untouched(starter_of(name)):
            results[name] = Result("not started")
    built = {}
    if args.build:
        to_grade = [n for n in args.exercises if n not in results]  # "not started" ones aside
        if to_grade:
            built = build_each(args.build, [Path(paths[n]).name for n in to_grade])
    for name in args.exercises:
        if name in results:
            continue
        errors = built.get(Path(paths[name]).name)
        if errors:
            results[name] = does_not_compile(name, paths[name], errors)
        else:
            results[name] = check_one(name, args.bin_dir, paths[name])
    results = {name: results[name] for name in args.exercises}  # the table in the syllabus' order

    if expecting:
        name = args.exercises[0]
        failure = results[name].failure
        if failure is None:
            print("expected the grader to FAIL this program, and it passed: the grader checks "
                  "too little, or the starter has been solved in place "
                  f"(./tutorial reset {name} restores it)")
            return 1
        if args.expect_fail not in f"{failure.what} {failure.hint or ''}":
            print(f"the grader failed it, but its message does not say '{args.expect_fail}'")
            return 1
        print("as expected, the grader failed it")
        return 0

    if table:
        print_table(results)
    return 0 if all(r.status == "PASS" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
