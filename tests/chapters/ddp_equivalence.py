#!/usr/bin/env python3
"""Chapter 08's promises hold for any flags: DDP on W ranks keeps the replicas bit-identical and
takes the steps of one process on the W ranks' global batches.

  ddp_equivalence.py BIN_DIR [--backend nccl] [--readme README.md] W...

For each W and each flag set of FLAG_SETS (the defaults, each flag moved to its limits or to what
a new user tries, and a few together), runs ch08_ddp_linear under ddprun on W ranks and requires:
  - exit 0 and rank 0's OK line;
  - "promise 1, the replicas are bit-identical: yes" and "promise 2, ...: yes";
  - here too, not only in the program: every rank's final line the same, and rank 0's final w and
    b within 1e-5 of the printed one-process weights;
  - the fit judged (within 0.02) in the default run (default flags on 2 ranks), and only there:
    elsewhere it is reported, never a reason to fail.
With --readme, the table between the README's `one_process_table` markers must hold the numbers
of the default runs (every W in it must be one of the W run here).
Exit 0 when every run passes, 1 otherwise.

With --backend nccl (the gpu tests) the runs train on GPUs with the CUDA kernels; W larger than
the number of usable GPUs is left out, and without a usable GPU it exits 77 (skipped).
"""
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

FLAG_SETS = [
    [],
    ["--epochs", "1"],
    ["--epochs", "2"],
    ["--lr", "0.001"],
    ["--lr", "0.1"],
    ["--lr", "1e-9"],
    ["--batch-size", "1000"],
    ["--batch-size", "1"],
    ["--samples", "10", "--batch-size", "3"],
    ["--samples", "2"],
    ["--seed", "7"],
    ["--samples", "3000", "--batch-size", "1", "--lr", "0.1", "--epochs", "2"],
]
FINAL = re.compile(r"^\[rank (\d+)/\d+\] final: w = (\S+), b = (\S+)$", re.M)
ONE = re.compile(r"^\[rank 0/\d+\] one process, batches of \d+ x \d+ samples: w = (\S+), b = (\S+)$",
                 re.M)
FIT = re.compile(r"^\[rank 0/\d+\] fit: \|w - w\*\| = (\S+), \|b - b\*\| = (\S+?)(,| \().*$", re.M)


def usable_gpus(bin_dir):
    probe = subprocess.run([f"{bin_dir}/gpu_probe"], capture_output=True, text=True, timeout=60,
                           check=False)
    if probe.returncode == 77:
        print(f"skipped: {probe.stdout.strip()}")
        sys.exit(77)
    found = re.search(r"^gpu_probe: (\d+) of \d+ devices usable$", probe.stdout, re.M)
    if probe.returncode != 0 or not found:
        sys.exit(f"FAIL: gpu_probe exited {probe.returncode}: {probe.stdout}{probe.stderr}")
    return int(found.group(1))


def problems_of(run, world, flags):
    """What is wrong with one run, as a list of sentences (empty: it passed)."""
    out, problems = run.stdout, []
    if run.returncode != 0:
        problems.append(f"exit code {run.returncode}")
    if not re.search(rf"^\[rank 0/{world}\] OK: both promises hold", out, re.M):
        problems.append("no OK line")
    for promise in ("promise 1, the replicas are bit-identical",
                    "promise 2, the steps of one process on the global batches"):
        if f"] {promise}: yes\n" not in out:
            problems.append(f"'{promise}' does not say yes")
    finals = {int(r): (float(w), float(b)) for r, w, b in FINAL.findall(out)}
    if sorted(finals) != list(range(world)):
        problems.append(f"final lines from ranks {sorted(finals)}, not 0..{world - 1}")
    elif len(set(finals.values())) != 1:
        problems.append(f"the ranks' final weights differ: {finals}")
    one = ONE.search(out)
    if not one or 0 not in finals:
        problems.append("no one-process line")
    elif not all(abs(a - float(b)) <= 1e-5 * max(1.0, abs(float(b)))
                 for a, b in zip(finals[0], one.groups())):
        problems.append(f"DDP's final {finals[0]} is not within 1e-5 of one process's {one.groups()}")
    judged = not flags and world == 2
    fit = FIT.search(out)
    if not fit:
        problems.append("no fit line")
    elif judged and not fit.group(0).endswith(", within 0.02 (the default run): yes"):
        problems.append("the default run's fit is not judged within 0.02")
    elif not judged and not fit.group(0).endswith(" (reported; judged in the default run only)"):
        problems.append("the fit is judged outside the default run")
    return problems


def readme_rows(readme):
    text = Path(readme).read_text()
    table = re.search(r"--8<-- \[start:one_process_table\](.*?)--8<-- \[end:one_process_table\]",
                      text, re.S)
    if not table:
        sys.exit(f"FAIL: {readme} has no one_process_table region")
    rows = re.findall(r"^\| (\d+) \| [^|]* \| ([-\d.]+), ([-\d.]+) \| ([-\d.]+), ([-\d.]+) \| "
                      r"([\d.]+), ([\d.]+) \|$", table.group(1), re.M)
    if not rows:
        sys.exit(f"FAIL: no rows in {readme}'s one_process_table")
    return {int(r[0]): r[1:] for r in rows}


def main(argv):
    bin_dir, args = argv[1], argv[2:]
    backend, readme = [], None
    while args and args[0].startswith("--"):
        if args[0] == "--backend":
            backend, args = args[:2], args[2:]
        elif args[0] == "--readme":
            readme, args = args[1], args[2:]
        else:
            sys.exit(__doc__)
    worlds = [int(w) for w in args]
    if backend == ["--backend", "nccl"]:
        gpus = usable_gpus(bin_dir)
        worlds = [w for w in worlds if w <= gpus] or [1]
    table = readme_rows(readme) if readme else {}
    missing = sorted(set(table) - set(worlds))
    if missing:
        sys.exit(f"FAIL: the README's table has W = {missing}, which this run does not cover")
    program = f"{bin_dir}/ch08_ddp_linear"
    failures = 0
    for w in worlds:
        for flags in FLAG_SETS:
            run = ddprun(bin_dir, w, [program, *backend, *flags], deadline=120)
            problems = problems_of(run, w, flags)
            if not flags and w in table:
                finals, one, fit = FINAL.search(run.stdout), ONE.search(run.stdout), FIT.search(
                    run.stdout)
                printed = (finals.groups()[1:] if finals else ()) + (one.groups() if one else ()) + (
                    fit.groups()[:2] if fit else ())
                if printed != table[w]:
                    problems.append(f"the README's table says {table[w]} for W = {w}; the run "
                                    f"printed {printed}")
            label = f"{w} rank(s), flags {' '.join(flags) or '(defaults)'}"
            if not problems:
                print(f"ok: {label}")
                continue
            failures += 1
            print(f"FAIL: {label}: " + "; ".join(problems))
            print(run.stdout + run.stderr)
    print(f"{failures} of {len(worlds) * len(FLAG_SETS)} runs failed" if failures else
          f"all {len(worlds) * len(FLAG_SETS)} runs keep both promises")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
