#!/usr/bin/env python3
"""Chapter 11 and its PyTorch twin agree, and the twin keeps the chapter's promise too.

  fault_tolerance_parity.py BIN_DIR TWIN_PY

At 2 ranks, the uninterrupted job and a job whose last rank crashes before step 25 (snapshots
every 10 steps, one restart), each run twice: the C++ chapter and twin.py, both under
`ddprun --max-restarts 1`, as torchrun would run the twin (Debian's torch 1.13 cannot run
torchrun; PYTHON_EXEC picks its /usr/bin/python3). Checked:
  - the lines about attempts, crashes and resumes are the same words in both;
  - the final weights agree to float32 rounding (torch fuses SGD's multiply-add, the C++ rounds
    twice: relative 1e-5 at most; the default runs happen to give the same bits);
  - the twin's crashed job ends with the bits of the twin's uninterrupted one (hex floats and
    the fingerprint of the model and the optimizer): the claim holds in PyTorch as written.
Each run has a 300 s deadline. Exit 0 when all hold, 1 otherwise.
"""
import os
import re
import sys
import tempfile
from pathlib import Path

from fault_tolerance_check import EVERY, RESTARTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

PYTHON = "/usr/bin/python3"
DEADLINE_S = 300
WORLD = 2
STORY = re.compile(r"^\[rank \d+/\d+\] (attempt|crashing|OK)")
FINAL = re.compile(r"^\[rank (\d+)/\d+\] final: w = (\S+) \((\S+)\), b = (\S+) \((\S+)\)$", re.M)
PRINT = re.compile(r"^\[rank 0/\d+\] fingerprint of the model and the optimizer: (\w+)$", re.M)


def cpp(bin_dir, snapshot, args):
    run = ddprun(bin_dir, WORLD, [f"{bin_dir}/ch11_fault_tolerance", "--snapshot", snapshot,
                                  *EVERY, *args], deadline=DEADLINE_S, flags=RESTARTS)
    return run.returncode, run.stdout


def twin(bin_dir, twin_py, snapshot, args):
    run = ddprun(bin_dir, WORLD, [twin_py, "--snapshot", snapshot, *EVERY, *args],
                 deadline=DEADLINE_S, flags=RESTARTS, env=dict(os.environ, PYTHON_EXEC=PYTHON))
    return run.returncode, run.stdout


def story(stdout):
    return sorted(re.sub(r"\S+\.(bin|pt)\b", "FILE", line)
                  for line in stdout.splitlines() if STORY.match(line))


def main(argv):
    bin_dir, twin_py = argv[1], argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for name, args in (("uninterrupted", []), ("crash at step 25", ["--crash-at-step", "25"])):
            for who, start, snapshot in (("C++", cpp, f"{tmp}/s.bin"),
                                         ("twin", lambda b, s, a: twin(b, twin_py, s, a),
                                          f"{tmp}/s.pt")):
                code, stdout = start(bin_dir, snapshot, args)
                runs[who, name] = stdout
                if code != 0 or len(FINAL.findall(stdout)) != WORLD:
                    failures.append(f"{who}, {name}: exit code {code}\n{stdout}")
            if failures:
                break
            before = len(failures)
            a, b = runs["C++", name], runs["twin", name]
            if story(a) != story(b):
                failures.append(f"{name}: the C++ says {story(a)}, the twin {story(b)}")
            for (r, *mine), (_, *theirs) in zip(sorted(FINAL.findall(a)), sorted(FINAL.findall(b))):
                for value, other in ((mine[1], theirs[1]), (mine[3], theirs[3])):
                    if abs(float(value) - float(other)) > 1e-5 * max(1.0, abs(float(other))):
                        failures.append(f"{name}: rank {r} ends with {value} in C++, {other} "
                                        "in the twin")
            if len(failures) == before:
                print(f"ok: {name}: the C++ and the twin agree")
        if not failures:
            plain, crashed = runs["twin", "uninterrupted"], runs["twin", "crash at step 25"]
            if (sorted(FINAL.findall(plain)), PRINT.findall(plain)) != \
                    (sorted(FINAL.findall(crashed)), PRINT.findall(crashed)):
                failures.append(f"the twin's crashed job ends elsewhere than its uninterrupted "
                                f"one:\n{plain}\n{crashed}")
            else:
                print("ok: the twin's crashed job ends with its uninterrupted job's bits")
    for f in failures:
        print("FAIL:", f)
    print("OK" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
