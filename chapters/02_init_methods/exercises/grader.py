"""Chapter 02's exercises, graded by what the ranks print (./tutorial check 02-ex1, 02-ex2).

Exercise 1's right answers are what torch 1.13 did: the torch column of the README's table of
torch's rule, read here with torch_rule.py's own reader. The test 02_init_methods_torch_rule runs
every row of that table with real PyTorch and fails when a cell no longer says what torch did, so
the table is the one copy of those facts, and grading needs no PyTorch.
"""
import re
import sys
from pathlib import Path

from grading import Exercise, Fail

CHAPTER = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHAPTER))
import torch_rule  # noqa: E402  (chapters/02_init_methods/torch_rule.py: stdlib until it runs torch)

PREDICTION = re.compile(r"^\((\d+)\) (.+?) -> torch: (.*); this library: (.*)$")


def judge_predict_torch(run):
    rows = torch_rule.readme_cases(CHAPTER / "README.md")
    printed = {}
    for line in run.lines(0):
        m = PREDICTION.match(line)
        if m:
            try:
                case = torch_rule.case_text(torch_rule.parse_case(m.group(2)))
            except ValueError:
                raise Fail(f"rank 0 printed '{line}', whose case is not the README table's form",
                           "keep the starter's cases and its print line") from None
            printed[case] = (m.group(1), m.group(3), m.group(4))
    for number, (case, torch_cell, library_cell) in enumerate(rows, 1):
        text = torch_rule.case_text(case)
        if text not in printed:
            raise Fail(f"rank 0 printed no prediction for case {number} ({text})",
                       "keep the starter's thirteen cases and its print line")
        _, prediction, library = printed[text]
        if prediction != torch_cell:
            raise Fail(f"case {number} ({text}): you predict '{prediction}'; torch 1.13 "
                       f"does '{torch_cell}'",
                       "read torch 1.13's torch/distributed/rendezvous.py for this case: what "
                       "does it do with rank and world_size given as arguments, and which "
                       "scheme's handler reads the environment?")
        if library != library_cell:
            raise Fail(f"case {number} ({text}): this library did '{library}', and the README "
                       f"says '{library_cell}'",
                       "that part is not the exercise: keep the starter's code around "
                       "predict_torch()")


def judge_missing_rank(run):
    w = run.world
    right = f"rank {w} of world_size {w + 1} never joined"
    for rank in range(w):
        line = run.value(rank, r"^(world_size=.*)$", str, "world_size=... with ... processes: ...")
        said = line.partition(": ")[2]
        if said != right and not said.startswith(right + " "):
            raise Fail(f"rank {rank} says '{said}'; with world_size {w + 1} on {w} "
                       f"process{'es' if w > 1 else ''}, init should time out naming the rank "
                       f"that never came: '{right}'",
                       "a rank never comes when the world size counts more processes than were "
                       "started; init's error when its timeout ends says which")


EXERCISES = {
    "ex1": Exercise(
        title="predict what torch does with rank and world_size from three sources",
        judge=judge_predict_torch,
        worlds=(3,),  # the three sources number the ranks apart only from 3 ranks on
        hint="torch/distributed/rendezvous.py decides each case: what each scheme's handler "
             "reads, and what happens before it"),
    "ex2": Exercise(
        title="a rank that never comes is named",
        judge=judge_missing_rank,
        worlds=(1, 2, 3),
        hint="which world size leaves one rank that never comes? init says so when its "
             "timeout ends"),
}
