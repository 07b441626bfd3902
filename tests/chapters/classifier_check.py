#!/usr/bin/env python3
"""Chapter 09's claims beyond its own OK line, each on real runs (2 ranks, a small data set):

  classifier_check.py BIN_DIR

  1. resume: --epochs 3 --stop-after 1 --checkpoint F, then --epochs 3 --checkpoint F --resume,
     ends with the parameters and buffers (fingerprint) and accuracy of an uninterrupted
     --epochs 3 run: the learning-rate schedule, too, picks up where it was. Resuming F with
     --epochs 4 is refused (exit 2, naming the 3 epochs F was written for): the schedule anneals
     over the epochs planned, so another plan is another run.
  2. buckets: overlapping backward or not never changes the bits (checked at 2 and 3 ranks); at 2
     ranks the bucket size does not either (a + b is b + a; from 3 ranks on, the order in which
     all_reduce adds the ranks' values depends on the bucket's size and on where a value sits in
     it, so other buckets differ in the last bits).
  3. SyncBatchNorm matters: --no-sync-bn gives other parameters.
  4. gradient accumulation: with an odd number of batches per epoch (17) and --accumulate 2,
     the trace holds 9 all_reduces of each bucket per epoch, not 17; and with one batch per
     epoch, --accumulate 64 is --accumulate 1 to the bit (a short last group is its own mean).
  5. the timeline: --trace DIR writes one Chrome trace per rank, valid JSON, with every bucket's
     all_reduce on the thread named "gradient all_reduce", once per optimizer step.
Each run has a 120 s deadline. Exit 0 when every claim holds.
"""
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

# The accuracy of these runs is reported, not judged (they are not the default run): what is
# checked here is bits, counts and files.
SMALL = ["--train-samples", "1024", "--test-samples", "500"]


def run(bin_dir, data, *args, nproc=2, small=SMALL):
    result = ddprun(bin_dir, nproc, [f"{bin_dir}/ch09_ddp_classifier", "--data-dir", data, *small,
                                     *args], deadline=120)
    if result.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(args)} exited {result.returncode}\n"
                         f"{result.stdout}{result.stderr}")
    prints = set(re.findall(r"fingerprint (\w+)", result.stdout))
    accuracy = re.search(r"held-out accuracy (\S+)", result.stdout).group(1)
    if len(prints) != 1:
        raise SystemExit(f"FAIL: the ranks' fingerprints differ: {prints}\n{result.stdout}")
    return prints.pop(), accuracy, result.stdout


def main(argv):
    bin_dir = argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        data, ckpt, trace = f"{tmp}/data", f"{tmp}/ckpt.bin", f"{tmp}/trace"
        whole = run(bin_dir, data, "--epochs", "3")
        stopped = run(bin_dir, data, "--epochs", "3", "--stop-after", "1", "--checkpoint", ckpt)
        resumed = run(bin_dir, data, "--epochs", "3", "--checkpoint", ckpt, "--resume")
        if resumed[:2] != whole[:2] or "resumed after epoch 1" not in resumed[2] or \
                "epoch 2/3" in stopped[2]:
            failures.append(f"resume: {resumed[:2]} differs from uninterrupted {whole[:2]}")
        other = ddprun(bin_dir, 2, [f"{bin_dir}/ch09_ddp_classifier", "--data-dir", data, *SMALL,
                                    "--epochs", "4", "--checkpoint", ckpt, "--resume"],
                       deadline=120)
        if other.returncode != 2 or "written by a run of 3 epochs" not in other.stderr:
            failures.append(f"resume with another plan: exit {other.returncode}\n{other.stderr}")
        one_bucket = run(bin_dir, data, "--epochs", "3", "--bucket-mb", "25", "--no-overlap")
        if one_bucket[0] != whole[0] or "1 gradient buckets" not in one_bucket[2]:
            failures.append(f"buckets: one bucket gave {one_bucket[0]}, overlap {whole[0]}")
        after = run(bin_dir, data, "--epochs", "3", "--no-overlap")
        if after[0] != whole[0]:
            failures.append(f"overlap: after backward gave {after[0]}, overlapping {whole[0]}")
        three = [run(bin_dir, data, "--epochs", "1", *flag, nproc=3)[0]
                 for flag in ([], ["--no-overlap"])]
        if three[0] != three[1]:
            failures.append(f"overlap at 3 ranks: {three[0]} overlapping, {three[1]} after")
        local_bn = run(bin_dir, data, "--epochs", "3", "--no-sync-bn")
        if local_bn[0] == whole[0]:
            failures.append("--no-sync-bn gave the same parameters as SyncBatchNorm")
        one_batch = ["--train-samples", "64", "--test-samples", "500"]
        k1, k64 = (run(bin_dir, data, "--epochs", "2", "--accumulate", k, small=one_batch)[0]
                   for k in ("1", "64"))
        if k1 != k64:
            failures.append(f"a short accumulation group: --accumulate 64 gave {k64}, 1 gave {k1}")
        odd = ["--train-samples", "1088", "--test-samples", "500"]
        _, _, text = run(bin_dir, data, "--epochs", "1", "--accumulate", "2", "--trace", trace,
                         small=odd)
        buckets = int(re.search(r"DDP: (\d+) gradient buckets", text).group(1))
        steps = (-(-1088 // 2 // 32) + 1) // 2  # 17 batches, every 2nd synchronised, and the last
        for rank in (0, 1):
            events = json.loads(Path(f"{trace}/rank{rank}.json").read_text())["traceEvents"]
            names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
            grad_tid = [t for t, n in names.items() if n == "gradient all_reduce"]
            spans = [e for e in events if e["ph"] == "X" and e["name"].startswith("all_reduce")]
            if len(grad_tid) != 1 or len(spans) != buckets * steps or \
                    any(e["tid"] != grad_tid[0] for e in spans):
                failures.append(f"trace of rank {rank}: {len(spans)} bucket spans, expected "
                                f"{buckets} x {steps} on the gradient thread {grad_tid}")
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print("ok: resume, buckets, SyncBatchNorm, accumulation and the timeline")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
