#!/usr/bin/env python3
"""Chapter 09's checkpoints survive a kill at any moment (2 ranks, a small data set):

  checkpoint_kill_check.py BIN_DIR

An uninterrupted --epochs 3 run gives the reference fingerprint and accuracy. Then, 6 times, a
job with --checkpoint F is killed with SIGKILL (ddprun and both ranks at once, as a lost machine
or an OOM kill would) at a moment drawn at random over that run's length. After each kill:
  - F is absent (killed before the first epoch's save) or a whole checkpoint: its layout is read
    here, independently of the chapter (magic, epochs planned and done, every tensor's count and
    values, and nothing after them);
  - resuming from F (or starting again, when there is none) ends with the reference fingerprint
    and accuracy: a kill costs time, never the result.
Each run has a 120 s deadline. Exit 0 when every trial holds.
"""
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from classifier_check import SMALL, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

# The chapter's model: fc1 196x128 and its bias, BatchNorm's 128 weights and biases, fc2 128x10
# and its bias; the checkpoint holds BatchNorm's two running buffers first.
TENSORS = [128, 128, 196 * 128, 128, 128, 128, 128 * 10, 10]


def whole_checkpoint(path):
    """None when `path` is a complete checkpoint, else what is wrong with it."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"DDPCKPT2":
        return f"{len(data)} bytes without the magic"
    at = 8
    if len(data) < at + 16:
        return f"ends at byte {len(data)}, inside the epochs"
    planned, epochs = struct.unpack_from("<qq", data, at)
    at += 16
    if planned != 3 or not 1 <= epochs <= 3:
        return f"says {epochs} of {planned} epochs were done"
    for expected in TENSORS:
        if at + 8 > len(data):
            return f"ends at byte {len(data)}, inside a tensor's count"
        (count,) = struct.unpack_from("<q", data, at)
        at += 8
        if count != expected:
            return f"a tensor of {count} values where {expected} belong"
        at += 4 * count
    if at != len(data):
        return f"{len(data)} bytes where a whole checkpoint has {at}"
    return None


def killed_job(bin_dir, data, ckpt, after_s):
    """Starts --epochs 3 --checkpoint ckpt and SIGKILLs the whole job after `after_s` seconds."""
    cmd = ddprun(bin_dir, 2, [f"{bin_dir}/ch09_ddp_classifier", "--data-dir", data, *SMALL,
                              "--epochs", "3", "--checkpoint", ckpt])
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)  # killed whole: ddprun, and its ranks with it (PR_SET_PDEATHSIG)
    try:
        job.wait(timeout=after_s)
        return "finished before the kill"
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
        return f"killed after {after_s:.2f} s"


def main(argv):
    bin_dir = argv[1]
    failures = []
    rng = random.Random(20261123)
    with tempfile.TemporaryDirectory() as tmp:
        data, ckpt = f"{tmp}/data", f"{tmp}/ckpt.bin"
        run(bin_dir, data, "--epochs", "1")  # prepares the data set once, outside the timing
        start = time.monotonic()
        reference = run(bin_dir, data, "--epochs", "3")[:2]
        length = time.monotonic() - start
        for trial in range(6):
            if os.path.exists(ckpt):
                os.remove(ckpt)
            what = killed_job(bin_dir, data, ckpt, rng.uniform(0.1, 1.0) * length)
            if os.path.exists(ckpt):
                broken = whole_checkpoint(ckpt)
                if broken:
                    failures.append(f"trial {trial} ({what}): the checkpoint is not whole: {broken}")
                    continue
                with open(ckpt, "rb") as f:
                    done = struct.unpack_from("<q", f.read(24), 16)[0]
                again = run(bin_dir, data, "--epochs", "3", "--checkpoint", ckpt, "--resume")
                how = f"resumed after epoch {done}"
            else:
                again = run(bin_dir, data, "--epochs", "3", "--checkpoint", ckpt)
                how = "started again (no checkpoint yet)"
            print(f"trial {trial}: {what}; {how}: fingerprint {again[0]}, accuracy {again[1]}")
            if again[:2] != reference:
                failures.append(f"trial {trial} ({what}, {how}): {again[:2]} differs from the "
                                f"uninterrupted {reference}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"OK: 6 kills at random moments; every checkpoint left was whole, and every run "
              f"after a kill ended with the uninterrupted fingerprint {reference[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
