#!/usr/bin/env python3
"""Grades workshop exercises: ./tutorial check runs this, and so do the tests.

  check.py BIN_DIR NN-exK...                  grade the participant's programs (the lesson table's
                                              program of each exercise, built from its starter)
  check.py BIN_DIR NN-exK --program PATH      grade another build of the exercise (a solution)
  check.py BIN_DIR NN-exK --program PATH --expect-fail [TEXT]
                                              the tests' mode: exit 0 only if the grader FAILs the
                                              program (and its message holds TEXT)
  check.py BIN_DIR NN-exK --program PATH --expect-mutant-fail NAME
                                              the same, TEXT being the `expect` of the exercise's
                                              mutation NAME (chapters/NN_name/solutions/
                                              mutations.py: one deliberate mistake each)

Each exercise runs under ddprun at the world sizes its grader names (chapters/NN_name/exercises/
grader.py), with a deadline per run, and is judged by what its ranks print: PASS, or FAIL with
the first thing that is wrong and a hint. With several exercises, a table ends the output.
Exit 0 when every exercise passes, 1 when one fails, 2 on bad usage.
"""
import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests/readme"))
from check_syllabus import read_table  # noqa: E402  (the lesson table, parsed once)
from grading import Fail, grade  # noqa: E402
from mutate import load_mutations  # noqa: E402


def lesson_programs():
    """lesson name -> program, from chapters/lessons.txt (the syllabus, written once)."""
    problems = []
    programs = {lesson.name: lesson.program for lesson in read_table(ROOT, problems)}
    if problems:
        raise SystemExit("check: chapters/lessons.txt: " + "; ".join(problems))
    return programs


def load_exercise(name):
    """The Exercise for "NN-exK" from chapters/NN_*/exercises/grader.py."""
    chapter, _, short = name.partition("-")
    folders = sorted(ROOT.glob(f"chapters/{chapter}_*/exercises/grader.py"))
    if not folders:
        raise SystemExit(f"check: no grader for chapter {chapter} "
                         f"(chapters/{chapter}_*/exercises/grader.py)")
    spec = importlib.util.spec_from_file_location(f"grader_{chapter}", folders[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if short not in module.EXERCISES:
        raise SystemExit(f"check: {folders[0].relative_to(ROOT)} has no exercise '{short}' "
                         f"(it has {', '.join(sorted(module.EXERCISES))})")
    return module.EXERCISES[short]


def check_one(name, bin_dir, program):
    exercise = load_exercise(name)
    print(f"{name}: {exercise.title} ({program})")
    try:
        grade(exercise, bin_dir, program)
    except Fail as failure:
        print(f"FAIL: {name}: {failure.what}")
        if failure.hint:
            print(f"  hint: {failure.hint}")
        return failure
    print(f"PASS: {name}")
    return None


def main(argv):
    parser = argparse.ArgumentParser(description="Grade workshop exercises.")
    parser.add_argument("bin_dir")
    parser.add_argument("exercises", nargs="+", metavar="NN-exK")
    parser.add_argument("--program", help="the program to grade (one exercise only)")
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
    if args.program and len(args.exercises) != 1:
        print("check: --program grades one exercise")
        return 2
    if args.expect_mutant_fail is not None:
        name = args.exercises[0]
        chapter, _, short = name.partition("-")
        mutations = load_mutations(sorted(ROOT.glob(f"chapters/{chapter}_*/solutions/"
                                                    "mutations.py"))[0], short)
        mutation = next((m for m in mutations if m.name == args.expect_mutant_fail), None)
        if mutation is None:
            print(f"check: {name} has no mutation '{args.expect_mutant_fail}' (it has "
                  f"{', '.join(m.name for m in mutations)})")
            return 2
        args.expect_fail = mutation.expect

    results = {}
    for name in args.exercises:
        program = args.program or str(Path(args.bin_dir) / programs[name])
        results[name] = check_one(name, args.bin_dir, program)

    if args.expect_fail is not None:
        failure = results[args.exercises[0]]
        if failure is None:
            print("expected the grader to FAIL this program, and it passed: the grader checks "
                  "too little, or the starter has been solved in place "
                  f"(./tutorial reset {args.exercises[0]} restores it)")
            return 1
        if args.expect_fail not in f"{failure.what} {failure.hint or ''}":
            print(f"the grader failed it, but its message does not say '{args.expect_fail}'")
            return 1
        print("as expected, the grader failed it")
        return 0

    if len(results) > 1:
        print()
        print(f"{'exercise':<10} status")
        for name, failure in results.items():
            print(f"{name:<10} {'PASS' if failure is None else 'FAIL'}")
    return 0 if all(f is None for f in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
