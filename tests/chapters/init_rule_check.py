#!/usr/bin/env python3
"""Chapter 02's claims about torch's rule for rank and world_size, checked against PyTorch itself.

  init_rule_check.py BIN_DIR CHAPTER_DIR

1. The README's table of that rule (the rows under '| | init_method | arguments | URL query |
   environment | torch 1.13 | this library |'): each row's sources are run with torch (gloo, three
   ranks, by chapters/02_init_methods/torch_rule.py) and its "torch 1.13" cell must say what torch
   did.
2. Exercise 1's solution (ch02_init_methods_ex1_solution, under ddprun on three ranks) prints, for
   the same cases, its prediction of torch's outcome and what this library did: each prediction must be what
   torch did, each library outcome the README's "this library" cell, and the cases the README's.

Exit 0 when every cell and prediction agrees, 1 otherwise.
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

LINE = re.compile(r"^\[rank 0/\d+\] \((\d+)\) (.+?) -> torch: (.+); this library: (.+)$")


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    bin_dir, chapter = argv[1], Path(argv[2]).resolve()
    sys.path.insert(0, str(chapter))
    import torch_rule  # noqa: E402  (chapters/02_init_methods/torch_rule.py)

    problems = []
    rows = torch_rule.readme_cases(chapter / "README.md")
    if not rows:
        problems.append("README.md has no table of torch's rule (header '| | init_method | "
                        "arguments | URL query | environment | torch 1.13 | this library |')")

    run = ddprun(bin_dir, 3, [f"{bin_dir}/ch02_init_methods_ex1_solution"], deadline=180)
    printed = {}
    for line in run.stdout.splitlines():
        match = LINE.match(line)
        if match:
            case = torch_rule.parse_case(match.group(2))
            printed[torch_rule.case_text(case)] = (match.group(3), match.group(4))
    if run.returncode != 0:
        problems.append(f"ch02_init_methods_ex1_solution exited {run.returncode}:\n"
                        f"{run.stdout}{run.stderr}")

    readme_texts = [torch_rule.case_text(case) for case, _, _ in rows]
    if sorted(readme_texts) != sorted(printed):
        problems.append("exercise 1's cases are not the README table's:\n  README:   "
                        + "\n            ".join(readme_texts) + "\n  exercise: "
                        + "\n            ".join(printed))
    cases = [case for case, _, _ in rows]
    cases += [torch_rule.parse_case(text) for text in printed if text not in readme_texts]
    torch_said = dict(zip((torch_rule.case_text(c) for c in cases),
                          torch_rule.torch_outcomes(cases)))

    for case, torch_cell, library_cell in rows:
        text = torch_rule.case_text(case)
        print(f"{text:55} torch: {torch_said[text]}")
        if torch_cell != torch_said[text]:
            problems.append(f"README row '{text}': the torch 1.13 cell says '{torch_cell}', "
                            f"torch did '{torch_said[text]}'")
        if text in printed and printed[text][1] != library_cell:
            problems.append(f"README row '{text}': the library cell says '{library_cell}', "
                            f"the library did '{printed[text][1]}'")
    for text, (prediction, _) in printed.items():
        if prediction != torch_said[text]:
            problems.append(f"exercise 1 predicts '{prediction}' for '{text}'; torch did "
                            f"'{torch_said[text]}'")
    for problem in problems:
        print("FAIL:", problem)
    print("torch's rule:", "OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
