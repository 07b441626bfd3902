"""What the torch-parity checks share (sampler_parity.py, tensor_repr_parity.py): feed every case
to the C++ driver at once, one line a case, split its answers, and compare each with torch's.

  run_driver(driver, lines, separator, unit)   the driver's answers, one per line of input
  compare(cases, answers, expected, show)      0 when every answer is torch's; else 1, after
                                               show(case, torch's, ours) for the first few

Imported by its neighbours in tests/unit (a script's own folder is on its path).
"""
import subprocess
import sys

DEADLINE_S = 240  # for the driver's whole run: under the tests' 300 s; it takes seconds
MAX_MISMATCHES_SHOWN = 5


def run_driver(driver, lines, separator, unit):
    """Runs `driver` with `lines` on stdin, one case a line; returns its answers, its stdout split
    at `separator` (each answer ends with one). Exits naming the driver when it fails, passes its
    deadline, or answers another number of cases."""
    try:
        run = subprocess.run([driver], input="".join(line + "\n" for line in lines),
                             capture_output=True, text=True, check=False, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        sys.exit(f"{driver} did not answer {len(lines)} cases within {DEADLINE_S} s")
    if run.returncode != 0:
        sys.exit(f"{driver} exited with {run.returncode}:\n{run.stderr}")
    answers = run.stdout.split(separator)
    if answers[-1] != "" or len(answers) - 1 != len(lines):
        sys.exit(f"{driver} printed {len(answers) - 1} {unit} for {len(lines)} cases")
    return answers[:-1]


def compare(cases, answers, expected, show, summary=""):
    """Each answer against expected(case), torch's; show(case, torch's, ours) for the first
    MAX_MISMATCHES_SHOWN that differ. Prints the verdict (with `summary` in parentheses); returns
    the exit code, 1 when any differs."""
    mismatches = 0
    for case, ours in zip(cases, answers):
        want = expected(case)
        if ours == want:
            continue
        mismatches += 1
        if mismatches <= MAX_MISMATCHES_SHOWN:
            show(case, want, ours)
    tail = f" ({summary})" if summary else ""
    if mismatches:
        print(f"{mismatches} of {len(cases)} cases differ from torch{tail}")
        return 1
    print(f"{len(cases)} cases match torch{tail}")
    return 0
