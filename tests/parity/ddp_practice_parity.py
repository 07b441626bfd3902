"""DDP in practice against torch 1.13 (gloo, CPU): dist::DistributedDataParallel with unused
parameters and dist::Join end with the weights torch's DDP ends with, and the library's error for
a parameter without gradient says what torch's says.

    ddp_practice_parity.py unused|error|join2|join3 DDPRUN DRIVER

unused: ddp_unused.py train against the driver's `train finish`, `train mark` (2 ranks): every
parameter at the end and every grad after step 1 (head b locally unused on one rank and used on
the other, head c unused on both: its grad stays as zero_grad() left it); and ddp_unused.py
static against the driver's `train static` (static_graph, head c never used: torch's grad
stays None, the library's a tensor of zeros, as zero_grad() left it); and ddp_unused.py stale
against the driver's `train stale` (no zero_grad: a rank that left head b out adds the grad b
holds, and c, which no rank used, keeps its grads); and ddp_unused.py view against the driver's
`train view`: train with gradient_as_bucket_view on both sides.
error: torch's error (TORCH_DISTRIBUTED_DEBUG=OFF and INFO) against the driver's `error`: the
shared sentences and the lines naming the parameters, word for word.
join2, join3: ddp_join.py against the driver's `join` with 5/3 and 7/4/2 batches.

Values are compared as float32 within a relative 1e-5 (absolute 1e-9 near 0), not bit for bit:
torch's CPU Linear sums a batch's gradient in float32, the library in float64 (dist/nn.h), so the
last bits can differ, and the difference grows a little step by step (about 3e-6 relative at
most here; the largest is printed). Getting the semantics wrong (dividing by
the ranks still training, averaging a zero into a grad no rank computed) moves a value by 1e-3
or more. Within a run, every rank must hold the same bits, on both sides.
"""
import glob
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE_S = 120
REL, ABS = 1e-5, 1e-9
LARGEST = 0.0  # the largest relative difference seen (beyond ABS)


def launch(ddprun, ranks, program, args, env=None):
    """The ranks' stdout, rank 0's first: each rank writes its own log (--redirects), so that
    lines of two ranks never mix."""
    with tempfile.TemporaryDirectory() as logs:
        cmd = [ddprun, "--standalone", "--nproc-per-node", str(ranks), "--log-dir", logs,
               "--redirects", "1", program, *args]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S,
                                 env={**os.environ, **(env or {})}, check=False)
        except subprocess.TimeoutExpired:
            sys.exit(f"{' '.join(cmd)} did not finish within {DEADLINE_S} s")
        outs = [open(path).read() for path in sorted(
            glob.glob(os.path.join(logs, "*", "attempt_0", "*", "stdout.log")),
            key=lambda path: int(os.path.basename(os.path.dirname(path))))]
    if run.returncode != 0 or len(outs) != ranks:
        sys.exit(f"{' '.join(cmd)} exited with {run.returncode}:\n{''.join(outs)}\n{run.stderr}")
    return "".join(outs)


def values(output, kind):
    """{(name, rank): [floats]} from the `kind name rank bits...` lines."""
    out = {}
    for line in output.splitlines():
        parts = line.split()
        if parts and parts[0] == kind:
            out[(parts[1], int(parts[2]))] = None if parts[3:] == ["none"] else [
                struct.unpack("<f", struct.pack("<I", int(h, 16)))[0] for h in parts[3:]]
    return out


def compare(kind, torch_out, ours_out, label):
    want, got = values(torch_out, kind), values(ours_out, kind)
    if not want or set(want) != set(got):
        return [f"{label}: {kind} lines differ: torch {sorted(want)}, ours {sorted(got)}"]
    bad = []
    global LARGEST
    for key, w in sorted(want.items()):
        g = got[key]
        if w is None:  # torch's grad None: the library keeps a grad tensor, which must be zeros
            if g is None or any(v != 0.0 for v in g):
                bad.append(f"{label}: {kind} {key[0]} on rank {key[1]}: torch None, ours {g}")
            continue
        if g is not None and len(g) == len(w):
            LARGEST = max([LARGEST] + [abs(a - b) / max(abs(a), 1e-30) for a, b in zip(w, g)
                                       if abs(a - b) > ABS])
        if g is None or len(g) != len(w) or any(abs(a - b) > max(ABS, REL * abs(a))
                                                for a, b in zip(w, g)):
            bad.append(f"{label}: {kind} {key[0]} on rank {key[1]}: torch {w}, ours {g}")
    # The same bits on every rank: parameters always; grads but for one that no rank used (left
    # as each rank had it).
    for side, vals in (("torch", want), ("ours", got)) if kind == "param" else ():
        for name in {n for n, _ in vals}:
            per_rank = [vals[k] for k in sorted(vals) if k[0] == name]
            if any(v != per_rank[0] for v in per_rank):
                bad.append(f"{label}: {side}: the ranks hold different {kind} {name}: {per_rank}")
    return bad


def error_text(output):
    return [block.split("ERROR-END")[0].strip("\n")
            for block in output.split("ERROR-BEGIN\n")[1:]]


SHARED = ("Expected to have finished reduction in the prior iteration before starting a new one. "
          "This error indicates that your module has parameters that were not used in producing "
          "loss.")


def check_error(ddprun, driver):
    ours = error_text(launch(ddprun, 2, driver, ["error"]))
    off = error_text(launch(ddprun, 2, os.path.join(HERE, "ddp_unused.py"), ["error"],
                            {"TORCH_DISTRIBUTED_DEBUG": "OFF"}))
    info = error_text(launch(ddprun, 2, os.path.join(HERE, "ddp_unused.py"), ["error"],
                             {"TORCH_DISTRIBUTED_DEBUG": "INFO"}))
    if len(ours) != 2 or len(off) != 2 or len(info) != 2:
        return [f"expected one error per rank: ours {ours}, torch {off} {info}"]
    bad = []
    for text in off + info:
        if not text.startswith(SHARED):
            bad.append(f"torch's error no longer opens with the shared sentences:\n{text}")
    for rank in range(2):
        # OFF gives the indices; INFO the names too.
        naming = ("Parameter indices which", "Parameters which")
        torch_lines = {line for line in off[rank].splitlines() + info[rank].splitlines()
                       if line.startswith(naming)}
        if len(torch_lines) != 2:
            bad.append(f"torch's error on rank {rank} does not name the parameters as "
                       f"expected:\n{off[rank]}\n{info[rank]}")
        if SHARED not in ours[rank]:
            bad.append(f"ours on rank {rank} lacks torch's sentences:\n{ours[rank]}")
        for line in torch_lines:
            if line not in ours[rank].splitlines():
                bad.append(f"ours on rank {rank} lacks torch's line {line!r}:\n{ours[rank]}")
    if not bad:
        print(f"torch's error, and ours:\n{info[0]}\n---\n{ours[0]}")
    return bad


def main():
    scenario, ddprun, driver = sys.argv[1:4]
    if scenario == "unused":
        torch_out = launch(ddprun, 2, os.path.join(HERE, "ddp_unused.py"), ["train"])
        bad = []
        for how in ("finish", "mark", "static", "stale", "view"):
            if how in ("static", "stale", "view"):
                torch_out = launch(ddprun, 2, os.path.join(HERE, "ddp_unused.py"), [how])
            ours = launch(ddprun, 2, driver, ["train", how])
            if how != "stale":
                bad += compare("param", torch_out, ours, how)
            bad += compare("grad", torch_out, ours, how)
    elif scenario == "error":
        bad = check_error(ddprun, driver)
    elif scenario in ("join2", "join3"):
        counts = ["5", "3"] if scenario == "join2" else ["7", "4", "2"]
        torch_out = launch(ddprun, len(counts), os.path.join(HERE, "ddp_join.py"), counts)
        bad = compare("param", torch_out, launch(ddprun, len(counts), driver, ["join", *counts]),
                      "join " + "/".join(counts))
    else:
        sys.exit(f"unknown scenario {scenario!r}: unused, error, join2 or join3")
    for line in bad:
        print("MISMATCH:", line)
    print(f"{scenario}: {'differs from' if bad else 'matches'} torch 1.13 (largest relative "
          f"difference {LARGEST:.1e}, allowed {REL:.0e})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
