#!/usr/bin/env python3
"""Chapter 08's central claim, tested: DDP on W ranks takes the steps of one process on the W
ranks' global batches.

  ddp_equivalence.py BIN_DIR [--backend nccl] W...

For each W, runs ch08_ddp_linear under ddprun on W ranks, and on 1 rank with --simulate-world W
(one process, no communication, each step on the union of the W ranks' batches). Rank 0's final
w and b (printed to 8 decimals) must agree within 1e-6 relative, and every epoch's loss within
one unit of its last printed digit. Both runs must exit 0. Exit 0 when every W passes.

With --backend nccl (the gpu tests) both runs train on GPUs with the CUDA kernels; W larger than
the number of usable GPUs is left out, and without a usable GPU it exits 77 (skipped).
"""
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from ddprun import ddprun  # noqa: E402

FINAL = re.compile(r"^\[rank 0/\d+\] final: w = (\S+), b = (\S+)$", re.M)
LOSS = re.compile(r"^\[rank 0/\d+\] epoch +(\d+): loss (\S+)$", re.M)


def results(run):
    final = FINAL.search(run.stdout)
    losses = [float(v) for _, v in LOSS.findall(run.stdout)]
    return (float(final.group(1)), float(final.group(2))) if final else None, losses


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


def main(argv):
    bin_dir, args = argv[1], argv[2:]
    backend = []
    if args[:1] == ["--backend"]:
        backend, args = args[:2], args[2:]
    worlds = [int(w) for w in args]
    if backend == ["--backend", "nccl"]:
        gpus = usable_gpus(bin_dir)
        worlds = [w for w in worlds if w <= gpus] or [1]
    program = f"{bin_dir}/ch08_ddp_linear"
    failures = 0
    for w in worlds:
        ddp = ddprun(bin_dir, w, [program, *backend], deadline=120)
        one = ddprun(bin_dir, 1, [program, *backend, "--simulate-world", str(w)], deadline=120)
        (ddp_final, ddp_losses), (one_final, one_losses) = results(ddp), results(one)
        ok = ddp.returncode == 0 and one.returncode == 0 and ddp_final and one_final
        ok = ok and all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(ddp_final, one_final))
        ok = ok and len(ddp_losses) == len(one_losses) > 0
        ok = ok and all(abs(a - b) <= 1.000001e-6 for a, b in zip(ddp_losses, one_losses))
        if ok:
            print(f"ok: {w} ranks == one process on their global batches: final (w, b) "
                  f"{ddp_final} vs {one_final}, {len(ddp_losses)} epoch losses agree")
            continue
        failures += 1
        print(f"FAIL: {w} ranks: DDP final {ddp_final}, losses {ddp_losses}")
        print(f"      one process: final {one_final}, losses {one_losses}")
        print(ddp.stdout + ddp.stderr + one.stdout + one.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
