#!/usr/bin/env python3
"""Chapter 09's promises hold for every flag a learner may try, one flag at a time, at 1 to 3 ranks.

  classifier_flags_check.py BIN_DIR

What DDP promises is checked on every run, whatever the flags: exit 0; every rank prints one
replica fingerprint (a hash of the parameters and BatchNorm's buffers) and they are all equal; the
held-out accuracy is over exactly --test-samples images; the OK line says the replicas are
bit-identical and every test image was counted once; with --comm-hook, rank 0 prints the
gradient bytes of the last step (more than 0), and without one no such line. The accuracy is
judged only where it is known: the default run (every flag that changes what is computed at its
default, 1 to 4 ranks) must reach the floor of 75% and, at 1 and 2 ranks, must not fall from one
epoch to the next (the cosine learning-rate schedule's promise); every other run must say its
accuracy is reported, not judged.
Each run has a 120 s deadline. Exit 0 when every run holds.
"""
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

PROMISE = "OK: the replicas are bit-identical, every test image was counted once, and "
JUDGED = PROMISE + "the accuracy reached the floor of 75.00%"
REPORTED = PROMISE + "the accuracy is reported, not judged"

# (ranks, flags, judged): the default run at 1 and 2 ranks, then one flag changed at a time.
CASES = [
    (1, [], True),
    (2, [], True),
    (2, ["--epochs", "1"], False),
    (2, ["--epochs", "2"], False),
    (3, ["--epochs", "3"], False),
    (2, ["--lr", "0.001", "--epochs", "2"], False),
    (2, ["--lr", "1", "--epochs", "1"], False),
    (3, ["--batch-size", "1000"], False),
    (1, ["--batch-size", "8", "--epochs", "1", "--train-samples", "2048"], False),
    (2, ["--seed", "7", "--epochs", "2"], False),
    (3, ["--no-sync-bn", "--epochs", "2"], False),
    (2, ["--accumulate", "3", "--epochs", "2"], False),
    (3, ["--test-samples", "1", "--epochs", "1"], False),  # two ranks evaluate no image at all
    (3, ["--train-samples", "64", "--batch-size", "4096", "--epochs", "2"], False),
    (2, ["--bucket-mb", "25", "--no-overlap"], True),  # how gradients travel is not what they are
    # DDP communication hooks: allreduce_hook averages as DDP does (judged); the others compress.
    (2, ["--comm-hook", "allreduce"], True),
    (2, ["--comm-hook", "fp16", "--epochs", "2"], False),
    (3, ["--comm-hook", "bf16", "--epochs", "1"], False),
    (2, ["--comm-hook", "powersgd", "--epochs", "2"], False),
    (3, ["--comm-hook", "powersgd", "--powersgd-rank", "4", "--powersgd-start-iter", "2",
         "--epochs", "1"], False),
]


def check(bin_dir, data, nproc, flags, judged):
    """What is wrong with this run, or an empty list."""
    result = ddprun(bin_dir, nproc, [f"{bin_dir}/ch09_ddp_classifier", "--data-dir", data, *flags],
                    deadline=120)
    out, problems = result.stdout, []
    if result.returncode != 0:
        problems.append(f"exit code {result.returncode}")
    prints = re.findall(r"^\[rank (\d+)/\d+\] replica fingerprint (\w+)$", out, re.M)
    if sorted(int(r) for r, _ in prints) != list(range(nproc)) or len({p for _, p in prints}) != 1:
        problems.append(f"fingerprints by rank: {prints}")
    test = flags[flags.index("--test-samples") + 1] if "--test-samples" in flags else "2000"
    if not re.search(rf"^\[rank 0/{nproc}\] held-out accuracy [\d.]+% on {test} test images$",
                     out, re.M):
        problems.append(f"no held-out accuracy over exactly {test} test images")
    if not re.search(rf"^\[rank 0/{nproc}\] {re.escape(JUDGED if judged else REPORTED)}", out, re.M):
        problems.append("no OK line that " + ("judges the accuracy against the default run's floor"
                                              if judged else "reports the accuracy unjudged"))
    sent = re.findall(rf"^\[rank 0/{nproc}\] gradient bytes sent in the last step: (\d+)$", out,
                      re.M)
    if "--comm-hook" in flags and (len(sent) != 1 or int(sent[0]) <= 0):
        problems.append(f"a hook, and gradient bytes sent in the last step: {sent}")
    if "--comm-hook" not in flags and sent:
        problems.append("no hook, yet a line of gradient bytes")
    accuracies = [float(a) for a in re.findall(r"test accuracy ([\d.]+)%$", out, re.M)]
    epochs = int(flags[flags.index("--epochs") + 1]) if "--epochs" in flags else 4
    if len(accuracies) != epochs:
        problems.append(f"{len(accuracies)} epoch lines for {epochs} epochs")
    elif judged and nproc <= 2 and accuracies != sorted(accuracies):
        problems.append(f"the default run's accuracy fell between epochs: {accuracies}")
    return problems, out + result.stderr


def main(argv):
    bin_dir, failures = argv[1], 0
    with tempfile.TemporaryDirectory() as tmp:
        for nproc, flags, judged in CASES:
            problems, text = check(bin_dir, f"{tmp}/data", nproc, flags, judged)
            case = f"{nproc} rank{'s' if nproc > 1 else ''} {' '.join(flags) or '(defaults)'}"
            if problems:
                failures += 1
                print(f"FAIL: {case}: {'; '.join(problems)}\n{text}")
            else:
                print(f"ok: {case}")
    print(f"{len(CASES) - failures} of {len(CASES)} runs keep every promise")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
