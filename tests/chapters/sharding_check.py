#!/usr/bin/env python3
"""Chapter 12's claims, at 1 to 4 ranks and every stage, recomputed here from the closed forms.

  sharding_check.py BIN_DIR

The program checks itself with the library's own closed forms (ShardedDataParallel::
expected_memory and expected_bytes_sent); this test computes them again, independently, from the
model's layer sizes, and compares every number the program prints:
  - the table of ZeRO's closed forms (stages 0-3 at W = 1, 2, 4);
  - the model state a rank holds after a step: ZeRO's form plus what the library keeps by design
    (at stage 1 the shards and their gradients, at stage 2 the shards: copies beside the whole
    model), and at stage 0 DDP's buckets beside it (a temporary buffer, not model state);
  - the parameter bytes whole at once during a step: the largest layer at stage 3, the model else;
  - the bytes sent per rank per step: passes * 4 * sum(ceil(n_u / W)) * (W - 1) at stages 1-3
    (2 passes, 3 at stage 3), and DDP's buckets' at stage 0 (ddp_traffic);
  - with --mixed-precision (some of the runs), the second table, ZeRO's mixed-precision forms
    (section 3.1: 2 + 2 bytes of fp16/bf16 parameters and gradients, 12 of fp32 master weights and
    Adam's moments; stage 1 shards the 12, stage 2 the gradients' 2 too, stage 3 the parameters'
    2 too), and this run's line: its model state and its traffic at 2 bytes a value, half of
    fp32's; then the bytes one step's collectives send in bfloat16, measured: 2 * passes *
    sum(ceil(n_u / W)) * (W - 1); without the flag, none of these;
  - the verdict: OK, bit for bit with DDP (adding in the stages' order) at every world size;
  - the weights' fingerprints: every stage at one world size ends with the same bits, and at 1
    and 2 ranks (where a sum of two is the same in either order) chapter 09's DDP too;
and that prefetch changes nothing but timing: stage 3 prints the same epochs with and without.
Each run has a 120 s deadline. Exit 0 when every run holds.
"""
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

WIDTHS = [196, 512, 512, 512, 10]
UNITS = [WIDTHS[i] * WIDTHS[i + 1] + WIDTHS[i + 1] for i in range(4)]
PSI = sum(UNITS)
SMALL = ["--epochs", "1", "--train-samples", "512", "--test-samples", "200", "--batch-size", "32"]
# (ranks, stage): every stage at 2 ranks (the bits) and at 3 and 4 (the padding), and the edges.
CASES = [(1, 0), (1, 2), (2, 0), (2, 1), (2, 2), (2, 3), (3, 1), (3, 3), (4, 0), (4, 2), (4, 3)]
# The runs that also print the mixed-precision forms (the flag changes no training: their
# fingerprints are compared with the other stages' all the same).
MIXED = {(1, 2), (2, 0), (2, 2), (3, 1), (3, 3), (4, 3)}
MIXED_HEADER = "mixed precision, ZeRO's section 3.1:"


def chunks(world):
    return sum((n + world - 1) // world for n in UNITS)


def ideal(stage, world):
    """ZeRO's accounting, fp32 Adam: (parameters, gradients, state) bytes per rank."""
    c = chunks(world)
    return [(4 * PSI, 4 * PSI, 8 * PSI), (4 * PSI, 4 * PSI, 8 * c), (4 * PSI, 4 * c, 8 * c),
            (4 * c, 4 * c, 8 * c)][stage]


def mixed(stage, world):
    """ZeRO's mixed-precision accounting: (half parameters, half gradients, fp32 master + Adam)."""
    c = chunks(world)
    return (2 * (c if stage == 3 else PSI), 2 * (c if stage >= 2 else PSI),
            12 * (PSI if stage == 0 else c))


def held(stage, world):
    """The model state this library holds: ZeRO's accounting, plus the shards' copies."""
    p, g, s = ideal(stage, world)
    c = chunks(world)
    if stage == 1:
        return p + 4 * c, g + 4 * c, s
    if stage == 2:
        return p + 4 * c, g, s
    return p, g, s


def ddp_traffic(world, cap_mib=1):
    """DDP's bytes per rank per step: its buckets made again (last parameter first, a new bucket
    when the next would pass the cap), each all-reduced by Gloo's backend: a bucket of at most
    128 KiB sent to every rank at once, 4n(W - 1) bytes; a larger one round the ring, 2 * 4n(W -
    1)/W, within a value per half (the ring's segments are n/W rounded down or up)."""
    sizes = []
    for i in range(4):
        sizes += [WIDTHS[i] * WIDTHS[i + 1], WIDTHS[i + 1]]
    buckets, cap = [], cap_mib * 1024 * 1024 // 4
    for n in reversed(sizes):
        if not buckets or (buckets[-1] > 0 and buckets[-1] + n > cap):
            buckets.append(0)
        buckets[-1] += n
    want = slack = 0
    for n in buckets:
        if 4 * n <= 128 * 1024:
            want += 4 * n * (world - 1)
        else:
            want += 2 * 4 * n * (world - 1) / world
            slack += 8 if world > 1 else 0
    return want, slack


def number(text):
    return int(text.replace(",", ""))


def table_rows(lines):
    """{stage: [W=1, W=2, W=4]} from a table's rows among `lines` (the first table only)."""
    rows = {}
    for line in lines:
        m = re.match(r"  (\d)(?: \(DDP\))?\s+\S+\s+\S+\s+\S+\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)$",
                     line)
        if m:
            if int(m[1]) in rows:
                break
            rows[int(m[1])] = [number(v) for v in m.groups()[1:]]
    return rows


def check(bin_dir, data, nproc, stage, extra=()):
    """What is wrong with this run, or an empty list; and its epoch lines."""
    result = ddprun(bin_dir, nproc, [f"{bin_dir}/ch12_sharding", "--data-dir", data, "--stage",
                                     str(stage), *SMALL, *extra], deadline=120)
    out, problems = result.stdout, []
    if result.returncode != 0:
        problems.append(f"exit code {result.returncode}")
    mine = [line.split("] ", 1)[1] for line in out.splitlines() if line.startswith(f"[rank 0/{nproc}]")]
    split = next((i for i, m in enumerate(mine) if m.startswith(MIXED_HEADER)), len(mine))
    want_table = {s: [sum(ideal(s, w)) for w in (1, 2, 4)] for s in range(4)}
    if table_rows(mine[:split]) != want_table:
        problems.append(f"the table says {table_rows(mine[:split])}; the closed forms are "
                        f"{want_table}")
    if "--mixed-precision" in extra:
        want_mixed = {s: [sum(mixed(s, w)) for w in (1, 2, 4)] for s in range(4)}
        if table_rows(mine[split:]) != want_mixed:
            problems.append(f"the mixed-precision table says {table_rows(mine[split:])}; the "
                            f"closed forms are {want_mixed}")
        passes = 3 if stage == 3 else 2
        line = (f"mixed precision at stage {stage}, W={nproc}: {sum(mixed(stage, nproc)):,} bytes "
                f"of model state per rank (fp32: {sum(ideal(stage, nproc)):,}); {passes}Ψ(W-1)/W "
                f"values sent per step, 2 bytes each: {2 * passes * PSI * (nproc - 1) // nproc:,}"
                f" bytes (fp32: {4 * passes * PSI * (nproc - 1) // nproc:,})")
        if line not in mine:
            problems.append(f"no line {line!r}")
        padded = 2 * passes * chunks(nproc) * (nproc - 1)
        measured = (f"bytes sent per rank per step in bfloat16, measured: {padded:,} (with each "
                    f"layer's padding: {padded:,})")
        if measured not in mine:
            problems.append(f"no line {measured!r}")
    elif split != len(mine):
        problems.append("a mixed-precision table without --mixed-precision")
    p, g, s = held(stage, nproc)
    line = (f"this run (stage {stage}, W={nproc}), on each rank after a step: parameters {p:,} + "
            f"gradients {g:,} + Adam state {s:,} = {p + g + s:,} bytes")
    if not any(m.startswith(line) for m in mine):
        problems.append(f"no line starting {line!r}")
    whole = 4 * max(UNITS) if stage == 3 else 4 * PSI
    buckets = f"; DDP's buckets beside it, not model state: {4 * PSI:,} bytes" if stage == 0 else ""
    closed = (f"  closed form {sum(ideal(stage, nproc)):,}"
              + (f" + the shards' copies {p + g + s - sum(ideal(stage, nproc)):,} = {p + g + s:,}"
                 if stage in (1, 2) else "") + f": equal{buckets}")
    if closed not in mine:
        problems.append(f"no line {closed!r}")
    if f"parameters whole at once during a step: {whole:,} bytes" not in "\n".join(mine):
        problems.append(f"the parameters whole at once are not {whole:,} bytes")
    sent = re.search(r"^bytes sent per rank per step: ([\d,]+) ", "\n".join(mine), re.M)
    passes = 3 if stage == 3 else 2
    if stage == 0:
        want, slack = ddp_traffic(nproc)
    else:
        want, slack = passes * 4 * chunks(nproc) * (nproc - 1), 0
    if not sent or abs(number(sent.group(1)) - want) > slack:
        problems.append(f"bytes sent per step {sent and sent.group(1)}; the closed form is {want:,.0f}")
    verdict = [m for m in mine if m.startswith("OK: ")]
    wanted = ("weights not compared" if stage == 0 or "--no-check" in extra else
              f"stage {stage} ends with DDP's weights, bit for bit")
    if len(verdict) != 1 or wanted not in verdict[0]:
        problems.append(f"the verdict is {verdict}, not one saying {wanted!r}")
    printed = re.search(r"fingerprint ([0-9a-f]{16})", verdict[0]) if len(verdict) == 1 else None
    return (problems, [m for m in mine if m.startswith("epoch ")],
            printed.group(1) if printed else None)


def main():
    bin_dir = sys.argv[1]
    failed = 0
    prints = {}  # world size -> {stage: fingerprint}
    with tempfile.TemporaryDirectory() as data:
        for nproc, stage in CASES:
            extra = ["--mixed-precision"] if (nproc, stage) in MIXED else []
            problems, _, print_ = check(bin_dir, data, nproc, stage, extra)
            print(f"{nproc} ranks, stage {stage}{' (--mixed-precision)' if extra else ''}: "
                  f"{'; '.join(problems) or 'holds'}", flush=True)
            failed += bool(problems)
            prints.setdefault(nproc, {})[stage] = print_
        # Every stage ends with the same bits at one world size (DDP's too at 1 and 2 ranks).
        for nproc, by_stage in prints.items():
            alike = {s: p for s, p in by_stage.items() if s != 0 or nproc <= 2}
            if len(set(alike.values())) > 1:
                print(f"{nproc} ranks: the stages end with other weights: {alike}")
                failed += 1
        # Prefetch only moves a gather earlier: the same collectives, so the same epochs.
        with_, epochs_with, _ = check(bin_dir, data, 2, 3, ["--no-check"])
        without, epochs_without, _ = check(bin_dir, data, 2, 3, ["--no-check", "--no-prefetch"])
        same = epochs_with == epochs_without and len(epochs_with) == 1
        print(f"2 ranks, stage 3 with and without prefetch: "
              f"{'; '.join(with_ + without) or ('the same epochs' if same else 'other epochs')}")
        failed += bool(with_ or without or not same)
    print("OK" if failed == 0 else f"FAILED: {failed} runs")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
