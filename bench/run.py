#!/usr/bin/env python3
"""Runs every benchmark beside its PyTorch counterpart, in one invocation, and writes a report.

    bench/run.py --bin build/release/bin --out build/bench        (what ./tutorial bench runs)
    bench/run.py --quick ...                                      sizes to 1 MiB, 1 run of each
    bench/run.py --sections sharding --worlds 2,4                 chapter 12's section only

What it runs, in this order (each program checks its own results; a wrong result fails the run):
  1. bench_loopback: one byte there and back on 127.0.0.1, the floor for small messages
  2. bench_init and bench/torch_init.py: launch to an initialised 2-rank group, median of --repeat;
     then bench/job_life.py: a 2-rank job's whole life (chapter 01 under ddprun, and PyTorch's
     2-rank job), wall and CPU time from outside, --life-runs runs each
  3. bench_collectives and bench/torch_collectives.py at each --worlds size: the nccl-tests rows,
     --sweeps times each, alternating; a row keeps its best time
  4. chapters 08 and 09 and their twins, as taught (default flags) plus --throughput, at 1 and 2
     ranks: the training steps' samples/s, the best of --sweeps runs each, alternating
  5. chapter 12 at each --worlds size, stage 0 (DDP), 1, 2, 3 and 3 without prefetch, beside
     its twin's stages 0 and 1 (torch's DDP + Adam, and DDP + ZeroRedundancyOptimizer): samples/s,
     step time and memory per rank, the best of --sweeps runs each, alternating
  6. DDP communication hooks (hooks) on chapter 09's classifier: the gradient bytes of a step with
     allreduce, fp16, bf16 and PowerSGD at rank 1-4, at each --worlds size above 1, each against
     its closed form (a difference fails the run); then at 2 ranks each hook's step time and
     accuracy beside the twin's (torch 1.13 with the same hook), the best of --sweeps runs each
  7. parallel: chapter 15 (tensor parallel) at dp x tp = 1 x 1, 1 x 2, 1 x 4 and 2 x 2, step time
     and the block's bytes against their closed form (a difference fails the run); chapter 16
     (pipeline parallel), GPipe and 1F1B at p = 1 (one process), 2 and 4 stages and m = 1, 4, 8
     micro-batches, samples/s and the bubble measured beside (p - 1)/(m + p - 1); each beside its
     twin with the same flags, the best of --sweeps runs each
--sections runs some of these only (startup is 1 and 2).
Then OUT/report.md (tables with our/PyTorch ratios and the targets of bench/README.md), and, when
gnuplot is installed, OUT/busbw_<op>.png and OUT/latency_<op>.png. Raw rows: OUT/*.json.

Times are not pass/fail: this machine is shared and noisy, so the report gives ratios measured in
the same run. The exit status is 1 only if a program fails or a result is wrong.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "pylib"))
from disttut.ddprun import ddprun  # noqa: E402

PYTHON = "/usr/bin/python3"
OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter")
SECTIONS = ("startup", "collectives", "training", "sharding", "hooks", "parallel")
TIMEOUT = 1800  # seconds for one program: a sweep to 256 MiB at 4 ranks takes minutes, not hours


def log(text):
    print(f"bench: {text}", file=sys.stderr, flush=True)


def run(cmd, env=None):
    log("+ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"bench: {cmd[0]} failed (exit {r.returncode})")
    return r.stdout


def launch(args, nproc, program):
    return ddprun(args.bin, nproc, program)


def loopback(args):
    out = run([os.path.join(args.bin, "bench_loopback")])
    m = re.search(r"median ([\d.]+) p10 ([\d.]+)", out)
    return {"median_us": float(m.group(1)), "p10_us": float(m.group(2))}


def init_times(args):
    result = {}
    for impl, program in (("dist", [os.path.join(args.bin, "bench_init")]),
                          ("torch", [PYTHON, os.path.join(ROOT, "bench", "torch_init.py")])):
        samples = []
        for _ in range(args.repeat):
            env = dict(os.environ, BENCH_T0_NS=str(time.time_ns()))
            out = run(launch(args, 2, program), env=env)
            samples.append(float(re.search(r"init_ms: ([\d.e+-]+)", out).group(1)))
        result[impl] = {"median_ms": statistics.median(samples), "runs_ms": samples}
    return result


def job_life(args):
    """bench/job_life.py: chapter 01's 2-rank job under ddprun, the same job without ddprun, and
    PyTorch's 2-rank job, from start to the last exit."""
    path = os.path.join(args.out, "job_life.json")
    sys.stdout.write(run([PYTHON, os.path.join(ROOT, "bench", "job_life.py"), "--bin", args.bin,
                          "--runs", str(args.life_runs), "--json", path]))
    with open(path) as f:
        return json.load(f)


def collectives(args):
    """Every row is the best of --sweeps sweeps, the two sides alternating, so that a noisy minute
    on this shared machine hits both sides alike; #wrong adds up over all sweeps."""
    best = {}
    for world in args.worlds:
        for sweep in range(args.sweeps):
            for impl, program in (("dist", [os.path.join(args.bin, "bench_collectives")]),
                                  ("torch", [PYTHON, os.path.join(ROOT, "bench", "torch_collectives.py")])):
                path = os.path.join(args.out, f"collectives_{impl}_w{world}_sweep{sweep + 1}.json")
                run(launch(args, world, program + ["--max-mib", str(args.max_mib), "--json", path]))
                with open(path) as f:
                    for row in (json.loads(line) for line in f):
                        key = (row["impl"], row["op"], row["world"], row["bytes"])
                        if key in best:
                            wrong = best[key]["wrong"] + row["wrong"]
                            if row["time_us"] < best[key]["time_us"]:
                                best[key] = row
                            best[key]["wrong"] = wrong
                        else:
                            best[key] = row
    return list(best.values())


def throughput(args):
    """Samples/s of each chapter and twin: the best of --sweeps runs, the two sides alternating."""
    chapters = {
        "08": (os.path.join(args.bin, "ch08_ddp_linear"), "chapters/08_ddp_linear/twin.py", []),
        "09": (os.path.join(args.bin, "ch09_ddp_classifier"), "chapters/09_ddp_classifier/twin.py", []),
    }
    result = []
    for chapter, (program, twin, extra) in chapters.items():
        for world in (1, 2):
            rates = {"dist": [], "torch": []}
            for _ in range(args.sweeps):
                for impl, cmd in (("dist", [program]), ("torch", [PYTHON, os.path.join(ROOT, twin)])):
                    out = run(launch(args, world, cmd + extra + ["--throughput"]))
                    rates[impl].append(float(re.search(r"throughput: ([\d.]+) samples/s", out).group(1)))
            for impl, values in rates.items():
                result.append({"chapter": chapter, "world": world, "impl": impl,
                               "samples_per_s": max(values), "runs": values})
    return result


# Chapter 12's runs: (key, what the report calls it, the flags). torch runs only the first two:
# its FSDP (stages 2 and 3) needs CUDA in 1.13, and its gloo has no reduce_scatter.
SHARDING_RUNS = (
    ("stage0", "stage 0 (DDP)", ["--stage", "0"]),
    ("stage1", "stage 1", ["--stage", "1"]),
    ("stage2", "stage 2", ["--stage", "2"]),
    ("stage3", "stage 3, prefetch", ["--stage", "3", "--prefetch"]),
    ("stage3_noprefetch", "stage 3, no prefetch", ["--stage", "3", "--no-prefetch"]),
)
TORCH_SHARDING_RUNS = {"stage0": ("DDP + Adam", ["--stage", "0"]),
                       "stage1": ("DDP + ZeroRedundancyOptimizer", ["--stage", "1"])}


def grouped_int(text):
    return int(text.replace(",", ""))


def checked(out, what):
    """A run's output, or the bench stops: rank 0's verdict line must begin with "OK:"."""
    if not re.search(r"^\[rank 0/\d+\] OK: ", out, re.M):
        sys.stderr.write(out[-4000:])
        raise SystemExit(f"bench: {what} printed no \"OK:\" verdict (its output is above)")
    return out


def training_rate(out, world, batch, epochs):
    """samples/s, and ms per step: the steps counted from the throughput line's samples (each rank
    trains ⌈samples / (W · epochs) / batch⌉ batches an epoch, DistributedSampler's padding in)."""
    m = re.search(r"throughput: ([\d.]+) samples/s \((\d+) samples in ([\d.]+) s\)", out)
    rate, samples, seconds = float(m.group(1)), int(m.group(2)), float(m.group(3))
    per_rank_epoch = samples // (world * epochs)
    steps = epochs * -(-per_rank_epoch // batch)
    return rate, 1000 * seconds / steps, steps


def sharding(args):
    """Chapter 12 at each stage and its twin at stages 0 and 1, at each --worlds size: the best of
    --sweeps runs each, all runs of a sweep in turn, so that a noisy minute hits every run alike.
    Each C++ run also checks its memory and traffic against their closed forms (its "OK:")."""
    data = ["--train-samples", str(args.sharding_samples), "--test-samples", "256",
            "--epochs", "1", "--batch-size", "32"]
    program = os.path.join(args.bin, "ch12_sharding")
    twin = [PYTHON, os.path.join(ROOT, "chapters", "12_sharding", "twin.py")]
    result = []
    for world in args.sharding_worlds:
        runs = {}
        for _ in range(args.sweeps):
            for key, name, flags in SHARDING_RUNS:
                cmd = [program] + flags + data + ["--no-check", "--throughput", "--data-dir",
                                                  os.path.join(args.out, "data")]
                out = checked(run(launch(args, world, cmd)), f"ch12_sharding {' '.join(flags)}")
                rate, step_ms, steps = training_rate(out, world, 32, 1)
                peak = grouped_int(re.search(r"peak tensor memory: ([\d,]+) bytes", out).group(1))
                state = grouped_int(re.search(r"Adam state ([\d,]+) = ", out).group(1))
                runs.setdefault(("dist", key), []).append(
                    {"samples_per_s": rate, "step_ms": step_ms, "steps": steps,
                     "peak_bytes": peak, "adam_state_bytes": state})
                if key in TORCH_SHARDING_RUNS:
                    out = checked(run(launch(args, world, twin + TORCH_SHARDING_RUNS[key][1] + data
                                             + ["--no-check", "--throughput"])),
                                  f"chapter 12's twin.py ({key})")
                    rate, step_ms, steps = training_rate(out, world, 32, 1)
                    state = grouped_int(re.search(r"Adam state: ([\d,]+) bytes", out).group(1))
                    runs.setdefault(("torch", key), []).append(
                        {"samples_per_s": rate, "step_ms": step_ms, "steps": steps,
                         "adam_state_bytes": state})
        for (impl, key), values in runs.items():
            best = dict(max(values, key=lambda v: v["samples_per_s"]))
            best.update(impl=impl, run=key, world=world,
                        runs=[v["samples_per_s"] for v in values])
            result.append(best)
    return result


def sharding_report(args, shard):
    """The report's chapter 12 section: one table per world size, then the ratios."""
    lines = ["## Sharding (chapter 12: ZeRO stages 1-3 against DDP, Adam)", "",
             f"ch12_sharding --no-check --throughput --train-samples {args.sharding_samples} "
             "--epochs 1 (batch 32 per rank), beside its twin.py (stages 0 and 1) on the same data, "
             f"model and batches; the best of {args.sweeps} run(s) each, all runs alternating. "
             "step = ms per training step (the training time over the steps each rank took). "
             "peak = dist::max_memory_allocated on rank 0 during the training steps: the model as "
             "held, activations and messages in flight. Adam state = the optimizer's two moments "
             "on one rank (torch: on its largest rank; ZeroRedundancyOptimizer gives each rank "
             "whole parameters). torch 1.13 has no stage 2 or 3 on CPU: its FSDP needs CUDA.", ""]
    by = {(s["impl"], s["run"], s["world"]): s for s in shard}
    for world in args.sharding_worlds:
        ddp = by[("dist", "stage0", world)]
        lines += [f"### {world} ranks", "",
                  "| run | samples/s | step (ms) | step vs DDP | peak per rank (bytes) | "
                  "peak vs DDP | Adam state (bytes) | torch | torch samples/s | torch step (ms) | "
                  "torch Adam state (bytes) | step vs torch |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, name, _ in SHARDING_RUNS:
            d = by[("dist", key, world)]
            row = (f"| {name} | {d['samples_per_s']:,.0f} | {d['step_ms']:.2f} | "
                   f"{d['step_ms'] / ddp['step_ms']:.2f}× | {d['peak_bytes']:,} | "
                   f"{d['peak_bytes'] / ddp['peak_bytes']:.2f}× | {d['adam_state_bytes']:,} |")
            t = by.get(("torch", key, world))
            if t is None:
                row += " – (FSDP: CUDA only) | | | | |"
            else:
                row += (f" {TORCH_SHARDING_RUNS[key][0]} | {t['samples_per_s']:,.0f} | "
                        f"{t['step_ms']:.2f} | {t['adam_state_bytes']:,} | "
                        f"{d['step_ms'] / t['step_ms']:.2f}× |")
            lines.append(row)
        on, off = by[("dist", "stage3", world)], by[("dist", "stage3_noprefetch", world)]
        lines += ["", f"At {world} ranks: stage 3's step takes {on['step_ms'] / ddp['step_ms']:.2f}× "
                  f"DDP's with prefetch and {off['step_ms'] / ddp['step_ms']:.2f}× without. Prefetch "
                  "(the next layer's all_gather while this layer computes): the step with it "
                  f"takes {on['step_ms'] / off['step_ms']:.2f}× the step without "
                  f"({on['step_ms']:.2f} against {off['step_ms']:.2f} ms). Stage 3's peak tensor "
                  f"memory is {on['peak_bytes'] / ddp['peak_bytes']:.2f}× DDP's, its Adam state "
                  f"{on['adam_state_bytes'] / ddp['adam_state_bytes']:.2f}×.", ""]
    return lines


# Chapter 09's parameters as its DDP gets them (fc1 weight and bias, BatchNorm's weight and bias,
# fc2 weight and bias) and its bucket cap (--bucket-mb 0.005): what the closed forms count.
CH09_SHAPES = ((128, 196), (128,), (128,), (128,), (10, 128), (10,))
CH09_BUCKET_MB = 0.005
HOOK_RUNS = (("allreduce", 0), ("fp16", 0), ("bf16", 0), ("powersgd", 1), ("powersgd", 2),
             ("powersgd", 3), ("powersgd", 4))
TIMED_HOOKS = (None, "allreduce", "fp16", "bf16", "powersgd")  # None: DDP's own averaging


def gloo_all_reduce_bytes(n, world, rank, e=4):
    """What one rank sends for an all_reduce of n values of e bytes on the library's Gloo mesh
    (common/src/backends/gloo_mesh.h): one step up to 128 KiB + 40 bytes, the ring above."""
    if world == 1 or n == 0:
        return 0
    if e * n <= 128 * 1024 + 40:
        return e * n * (world - 1)
    seg = lambda s: n * (s % world + 1) // world - n * (s % world) // world
    return e * (2 * n - seg(rank) - seg(rank + 1))


def ch09_buckets():
    """DDP's buckets, last parameter first, a new one when the cap would be passed."""
    cap, buckets = int(CH09_BUCKET_MB * 1024 * 1024 / 4), []
    for shape in reversed(CH09_SHAPES):
        filled = sum(map(math.prod, buckets[-1])) if buckets else 0
        if not buckets or (filled > 0 and filled + math.prod(shape) > cap):
            buckets.append([])
        buckets[-1].append(shape)
    return buckets


def hook_bytes(hook, r, world, rank=0):
    """The closed form: rank 0's gradient bytes in one step. allreduce: each bucket's float32
    values; fp16/bf16: 2 bytes a value; PowerSGD (torch's rule, min_compression_rate 2): a matrix
    n x m (its first dimension by the rest) is sent as P (n r) and Q (m r) when (n + m) r 2 < n m,
    the rest whole; three all_reduces a bucket (whole values, P, Q)."""
    total = 0
    for bucket in ch09_buckets():
        values = sum(map(math.prod, bucket))
        if hook in ("allreduce", "fp16", "bf16"):
            total += gloo_all_reduce_bytes(values, world, rank, 4 if hook == "allreduce" else 2)
            continue
        whole = p = q = 0
        for shape in bucket:
            n, m = shape[0], math.prod(shape) // shape[0]
            if len(shape) > 1 and (n + m) * r * 2 < n * m:
                p, q = p + n * r, q + m * r
            else:
                whole += math.prod(shape)
        total += sum(gloo_all_reduce_bytes(v, world, rank) for v in (whole, p, q))
    return total


def accuracy(out):
    return float(re.search(r"^\[rank 0/\d+\] held-out accuracy ([\d.]+)%", out, re.M).group(1))


def hooks(args):
    """Chapter 09 with each communication hook. Bytes: a short run per hook, world and rank,
    PowerSGD from step 2, rank 0's last step against hook_bytes. Speed and accuracy: at 2 ranks,
    --no-sync-bn (torch's SyncBatchNorm needs GPUs, so the twin computes what --no-sync-bn does),
    each hook and the twin with the same hook, all runs of a sweep in turn; bf16 in C++ only
    (torch 1.13 refuses bf16_compress_hook without CUDA)."""
    program = os.path.join(args.bin, "ch09_ddp_classifier")
    twin = [PYTHON, os.path.join(ROOT, "chapters", "09_ddp_classifier", "twin.py")]
    data_dir = ["--data-dir", os.path.join(args.out, "data")]
    short = ["--train-samples", "256", "--test-samples", "64", "--epochs", "1", "--no-sync-bn"]
    sent = []
    for world in [w for w in args.worlds if w > 1]:
        for hook, r in HOOK_RUNS:
            flags = ["--comm-hook", hook] + (["--powersgd-rank", str(r), "--powersgd-start-iter",
                                              "2"] if hook == "powersgd" else [])
            out = checked(run(launch(args, world, [program] + flags + short + data_dir)),
                          f"ch09_ddp_classifier {' '.join(flags)}")
            measured = int(re.search(r"gradient bytes sent in the last step: (\d+)", out).group(1))
            sent.append({"world": world, "hook": hook, "rank": r, "bytes": measured,
                         "closed_form": hook_bytes(hook, r, world)})
    train = (["--train-samples", "1024", "--epochs", "1"] if args.quick else []) + ["--no-sync-bn"]
    batch, epochs = 32, 1 if args.quick else 4
    runs = {}
    for _ in range(args.sweeps):
        for hook in TIMED_HOOKS:
            flags = ["--comm-hook", hook] if hook else []
            sides = [("dist", [program] + data_dir)] + ([("torch", twin)] if hook != "bf16" else [])
            for impl, cmd in sides:
                out = checked(run(launch(args, 2, cmd + flags + train + ["--throughput"])),
                              f"{impl} chapter 09 {' '.join(flags) or '(no hook)'}")
                rate, step_ms, _ = training_rate(out, 2, batch, epochs)
                runs.setdefault((impl, hook), []).append(
                    {"samples_per_s": rate, "step_ms": step_ms, "accuracy": accuracy(out)})
    timed = []
    for (impl, hook), values in runs.items():
        best = dict(max(values, key=lambda v: v["samples_per_s"]))
        best.update(impl=impl, hook=hook or "none", runs_ms=[v["step_ms"] for v in values])
        timed.append(best)
    return {"bytes": sent, "timed": timed}


def hooks_report(args, result):
    """The report's hooks section: bytes against their closed forms, then time and accuracy."""
    lines = ["## Communication hooks (chapter 09's classifier)", "",
             "Gradient bytes rank 0 sent in one step (`--comm-hook NAME`, PowerSGD from step 2, "
             "the last step of a 256-image epoch), beside the closed form (bench/run.py "
             "hook_bytes: DDP's 3 buckets, the library's Gloo all_reduce, PowerSGD's "
             "compression rule); factor = bytes / allreduce's.", "",
             "| ranks | hook | bytes per step | closed form | factor | |",
             "|---|---|---|---|---|---|"]
    base = {s["world"]: s["closed_form"] for s in result["bytes"] if s["hook"] == "allreduce"}
    for s in result["bytes"]:
        name = s["hook"] + (f", rank {s['rank']}" if s["hook"] == "powersgd" else "")
        lines.append(f"| {s['world']} | {name} | {s['bytes']:,} | {s['closed_form']:,} | "
                     f"{s['closed_form'] / base[s['world']]:.4f} | "
                     f"{'=' if s['bytes'] == s['closed_form'] else '**differs**'} |")
    by = {(t["impl"], t["hook"]): t for t in result["timed"]}
    what = ("1 epoch of 1024 images" if args.quick else "the default 4 epochs of 8000 images")
    lines += ["", f"Chapter 09 at 2 ranks, {what}, `--no-sync-bn --throughput`, each hook, beside "
              "its twin with torch 1.13's own hook (bf16: torch 1.13 refuses it without CUDA); "
              "step = ms per training step, the best of "
              f"{args.sweeps} run(s); accuracy = held-out, after the same training. PowerSGD: "
              "rank 1 from step 10 (the chapter's default).", "",
              "| hook | step (ms) | torch step (ms) | step vs torch | accuracy | torch accuracy |",
              "|---|---|---|---|---|---|"]
    for hook in TIMED_HOOKS:
        d, t = by[("dist", hook or "none")], by.get(("torch", hook or "none"))
        lines.append(f"| {hook or 'none (DDP averages)'} | {d['step_ms']:.3f} | "
                     + (f"{t['step_ms']:.3f} | {d['step_ms'] / t['step_ms']:.2f}× | "
                        if t else "– | – | ")
                     + f"{d['accuracy']:.2f}% | " + (f"{t['accuracy']:.2f}% |" if t else "– |"))
    return lines + [""]


# Chapters 15 and 16 (bench/README.md, "Parallel"): the sizes each run trains, as flags. The MLP
# of chapter 15 is 8 -> hidden -> 4; chapter 16's is 16 -> hidden x (layers - 1) -> 4.
TP_IN, TP_OUT = 8, 4
TP_SIZES = (("1 x 1", 1, 1), ("1 x 2 (TP = 2)", 1, 2), ("1 x 4 (TP = 4)", 1, 4),
            ("2 x 2 (DP x TP)", 2, 2))
THROUGHPUT = re.compile(r"^\[rank 0/\d+\] throughput: ([\d.]+) samples/s \((\d+) samples in "
                        r"([\d.]+) s\)", re.M)


def tp_block_bytes(rows, tp):
    """What rank 0 of a tp group sends in one forward and one backward of chapter 15's block:
    g's all_reduce of the output (rows x 4 values) and f's of the input's gradient (rows x 8),
    float32, on the library's Gloo mesh (gloo_all_reduce_bytes)."""
    return (gloo_all_reduce_bytes(rows * TP_OUT, tp, 0) +
            gloo_all_reduce_bytes(rows * TP_IN, tp, 0))


def block_bytes(out):
    """The block's bytes as chapter 15 measured them (its step 2: forward, then backward)."""
    fwd = grouped_int(re.search(r"^\[rank 0/\d+\] forward: .*?, ([\d,]+) bytes", out, re.M).group(1))
    bwd = grouped_int(re.search(r"^\[rank 0/\d+\] backward: .*?, ([\d,]+) bytes", out, re.M).group(1))
    return fwd + bwd


def tensor_parallel(args):
    """Chapter 15 and its twin at 1 x 1, 1 x 2, 1 x 4 and 2 x 2 (dp x tp), the same MLP and
    batches: step time of the DP x TP training steps (--throughput: each step from a barrier,
    the one-process reference left out), the best of --sweeps runs each, all runs alternating;
    and rank 0's bytes of one forward + backward of the block beside tp_block_bytes."""
    flags = ["--hidden", str(args.tp_hidden), "--batch-size", str(args.tp_batch), "--steps",
             str(args.tp_steps), "--throughput"]
    program = os.path.join(args.bin, "ch15_tensor_parallel")
    twin = [PYTHON, os.path.join(ROOT, "chapters", "15_tensor_parallel", "twin.py")]
    runs = {}
    for _ in range(args.sweeps):
        for name, dp, tp in args.tp_sizes:
            size = ["--dp", str(dp), "--tp", str(tp)]
            for impl, cmd in (("dist", [program]), ("torch", twin)):
                out = checked(run(launch(args, dp * tp, cmd + size + flags)),
                              f"{impl} chapter 15 {' '.join(size)}")
                m = THROUGHPUT.search(out)
                if m is None:
                    sys.stderr.write(out[-4000:])
                    raise SystemExit(f"bench: {impl} chapter 15 {' '.join(size)} printed no "
                                     "throughput line (its output is above)")
                rate = float(m.group(1))  # the timed steps' rows over the slowest rank's time
                row = {"samples_per_s": rate, "step_ms": 1000 * args.tp_batch / rate}
                if impl == "dist":
                    rows = args.tp_batch // dp
                    row.update(bytes=block_bytes(out), closed_form=tp_block_bytes(rows, tp))
                runs.setdefault((impl, name), []).append(row)
    result = []
    for (impl, name), values in runs.items():
        best = dict(max(values, key=lambda v: v["samples_per_s"]))
        best.update(impl=impl, size=name, runs_ms=[v["step_ms"] for v in values],
                    bytes_ok=all(v.get("bytes") == v.get("closed_form") for v in values))
        result.append(best)
    return result


def pipeline(args):
    """Chapter 16 and its twin, --schedule both (GPipe's line first), at each p of --pp-stages
    and m of --pp-microbatches on the same MLP and batches: samples/s of each schedule's steps,
    the best of --sweeps runs, all runs alternating; with --trace, the bubble each side measured
    in its last step (one value per run)."""
    flags = ["--layers", str(args.pp_layers), "--hidden", str(args.pp_hidden), "--batch-size",
             str(args.pp_batch), "--steps", str(args.pp_steps), "--schedule", "both",
             "--throughput", "--trace", os.path.join(args.out, "pipeline_trace")]
    program = os.path.join(args.bin, "ch16_pipeline_parallel")
    twin = [PYTHON, os.path.join(ROOT, "chapters", "16_pipeline_parallel", "twin.py")]
    runs = {}
    for _ in range(args.sweeps):
        for p in [1] + [s for s in args.pp_stages if s > 1]:
            for m in args.pp_microbatches:
                for impl, cmd in (("dist", [program]), ("torch", twin)):
                    out = checked(run(launch(args, p, cmd + flags + ["--microbatches", str(m)])),
                                  f"{impl} chapter 16 at p = {p}, m = {m}")
                    rates = THROUGHPUT.findall(out)
                    bubbles = re.findall(r"^\[rank 0/\d+\] (GPipe|1F1B): bubble measured "
                                         r"([\d.]+)%", out, re.M)
                    if len(rates) != 2 or [b[0] for b in bubbles] != ["GPipe", "1F1B"]:
                        sys.stderr.write(out[-4000:])
                        raise SystemExit(f"bench: {impl} chapter 16 printed no throughput or "
                                         "bubble line for each schedule")
                    for (kind, bubble), rate in zip(bubbles, rates):
                        runs.setdefault((impl, kind, p, m), []).append(
                            {"samples_per_s": float(rate[0]), "bubble": float(bubble) / 100})
    result = []
    for (impl, kind, p, m), values in runs.items():
        best = dict(max(values, key=lambda v: v["samples_per_s"]))
        best.update(impl=impl, schedule=kind, stages=p, microbatches=m,
                    closed_form=(p - 1) / (m + p - 1),
                    runs=[v["samples_per_s"] for v in values],
                    bubbles=[v["bubble"] for v in values])
        result.append(best)
    return result


def parallel_report(args, tp_rows, pp_rows):
    """The report's chapters 15 and 16 section: TP and 2-D step times and bytes, PP throughput
    and bubbles."""
    tp = {(r["impl"], r["size"]): r for r in tp_rows}
    one = tp[("dist", "1 x 1")]
    lines = ["## Tensor parallel and 2-D (chapter 15)", "",
             f"ch15_tensor_parallel --hidden {args.tp_hidden} --batch-size {args.tp_batch} "
             f"--steps {args.tp_steps} --throughput --dp D --tp T (the MLP {TP_IN}-"
             f"{args.tp_hidden}-{TP_OUT}, SGD), beside its twin.py with the same flags; step = ms "
             "per DP x TP training step (each from a barrier; the one-process reference each "
             f"step also runs is left out), the best of {args.sweeps} run(s). bytes = rank 0's "
             "bytes in one forward + backward of the block (the chapter's step 2, on the rows of "
             "one data-parallel rank: at dp = 1 what a training step sends), beside bench/run.py's "
             "closed form (g's all_reduce of rows x 4 float32, f's of rows x 8, Gloo's mesh); a "
             "difference fails the run.", "",
             "| dp x tp | ranks | step (ms) | vs 1 x 1 | torch step (ms) | torch vs its 1 x 1 | "
             "vs torch | bytes per step | closed form | |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    t_one = tp[("torch", "1 x 1")]
    for name, dp, size in args.tp_sizes:
        d, t = tp[("dist", name)], tp[("torch", name)]
        lines.append(f"| {name} | {dp * size} | {d['step_ms']:.3f} | "
                     f"{d['step_ms'] / one['step_ms']:.2f}× | {t['step_ms']:.3f} | "
                     f"{t['step_ms'] / t_one['step_ms']:.2f}× | {d['step_ms'] / t['step_ms']:.2f}× | "
                     f"{d['bytes']:,} | {d['closed_form']:,} | "
                     f"{'=' if d['bytes_ok'] else '**differs**'} |")
    lines.append("")
    if not pp_rows:
        return lines
    pp = {(r["impl"], r["schedule"], r["stages"], r["microbatches"]): r for r in pp_rows}
    lines += ["## Pipeline parallel (chapter 16)", "",
              f"ch16_pipeline_parallel --layers {args.pp_layers} --hidden {args.pp_hidden} "
              f"--batch-size {args.pp_batch} --steps {args.pp_steps} --schedule both --throughput "
              "--trace DIR --microbatches m at p ranks, beside its twin.py with the same flags: "
              "samples/s of each schedule's training steps (each from a barrier), the best of "
              f"{args.sweeps} run(s); p = 1 is one process running the same micro-batches. "
              "bubble = idle over p x the last step's window, from each side's own trace (of the "
              "best run; every run's in the JSON), beside (p - 1)/(m + p - 1).", "",
              "| p | m | schedule | samples/s | vs p = 1 | torch samples/s | vs torch | "
              "bubble | torch bubble | closed form |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for p in [1] + [s for s in args.pp_stages if s > 1]:
        for m in args.pp_microbatches:
            for kind in ("GPipe", "1F1B"):
                d, t = pp[("dist", kind, p, m)], pp[("torch", kind, p, m)]
                base = pp[("dist", kind, 1, m)]
                lines.append(f"| {p} | {m} | {kind} | {d['samples_per_s']:,.0f} | "
                             f"{d['samples_per_s'] / base['samples_per_s']:.2f}× | "
                             f"{t['samples_per_s']:,.0f} | "
                             f"{d['samples_per_s'] / t['samples_per_s']:.2f}× | "
                             f"{100 * d['bubble']:.1f}% | {100 * t['bubble']:.1f}% | "
                             f"{100 * d['closed_form']:.1f}% |")
    lines.append("")
    return lines


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def verdict(ok):
    return "met" if ok else "**not met**"


def report(args, rtt, init, life, rows, speed, shard, hooked=None, par=None):
    """OUT/report.md from what ran (--sections): the parts that did not run are None."""
    rows = rows or []
    by = {(r["impl"], r["op"], r["world"], r["bytes"]): r for r in rows}
    lines = ["# Benchmark report", "",
             f"Machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M %Z')}; sections: "
             f"{', '.join(args.sections)}"
             + (f"; collective sizes up to {args.max_mib} MiB" if rows else "") + "; every row "
             "checked (#wrong = 0, or the run's \"OK:\"). `dist` is this project (Gloo "
             "underneath), `torch` PyTorch's gloo backend; ratio = dist / torch. Lower time and "
             f"higher bandwidth are better. Each collective row and training rate is the best of "
             f"{args.sweeps} sweep(s), the two sides alternating.", ""]
    # ---- the targets
    small = [by[("dist", "all_reduce", 2, b)]["time_us"] / by[("torch", "all_reduce", 2, b)]["time_us"]
             for b in (4, 64, 1024, 4096) if ("dist", "all_reduce", 2, b) in by]
    small_dist = [by[("dist", "all_reduce", 2, b)]["time_us"]
                  for b in (4, 64, 1024, 4096) if ("dist", "all_reduce", 2, b) in by]
    large = [by[("dist", "all_reduce", 2, b)]["busbw"] / by[("torch", "all_reduce", 2, b)]["busbw"]
             for b in sorted({r["bytes"] for r in rows}) if b >= 16 << 20
             and ("dist", "all_reduce", 2, b) in by]
    sp = {(s["chapter"], s["world"], s["impl"]): s["samples_per_s"] for s in speed or []}
    targets = []
    if small and rtt:
        worst = max(small)
        targets.append(f"| all_reduce ≤ 4 KiB, 2 ranks: time vs PyTorch | worst {worst:.3f}× "
                       f"(4 B … 4 KiB) | ≤ 0.25× | {verdict(worst <= 0.25)} |")
        floor = max(small_dist) / rtt["median_us"]
        targets.append(f"| all_reduce ≤ 4 KiB, 2 ranks: time vs loopback round trip "
                       f"({rtt['median_us']:.1f} µs) | worst {floor:.2f}× | ≤ 5× | "
                       f"{verdict(floor <= 5)} |")
    if large:
        targets.append(f"| all_reduce ≥ 16 MiB, 2 ranks: busbw vs PyTorch | worst {min(large):.2f}× | "
                       f"≥ 1.2× | {verdict(min(large) >= 1.2)} |")
    elif rows:
        targets.append("| all_reduce ≥ 16 MiB, 2 ranks: busbw vs PyTorch | not measured "
                       "(--max-mib < 16) | ≥ 1.2× | |")
    if init:
        init_ratio = init["dist"]["median_ms"] / init["torch"]["median_ms"]
        targets.append(f"| launch to initialised 2-rank group | {init['dist']['median_ms']:.1f} ms vs "
                       f"{init['torch']['median_ms']:.1f} ms = {init_ratio:.3f}× | ≤ 0.05× | "
                       f"{verdict(init_ratio <= 0.05)} |")
    if life:
        life_ms = life["ddprun"]["wall"]["median_ms"]
        targets.append(f"| a 2-rank job's whole life (chapter 01 under ddprun): wall time | "
                       f"{life_ms:.1f} ms (its processes only loaded and ended: "
                       f"{life['floor']['wall']['median_ms']:.1f} ms; torch "
                       f"{life['torch']['wall']['median_ms']:.0f} ms) | "
                       f"< 15 ms | {verdict(life_ms < 15)} |")
    if speed:
        for chapter, target in (("08", 5.0), ("09", 1.5)):
            ratios = [sp[(chapter, w, "dist")] / sp[(chapter, w, "torch")] for w in (1, 2)]
            targets.append(f"| chapter {chapter} samples/s vs its twin (1 and 2 ranks) | "
                           f"{ratios[0]:.2f}×, {ratios[1]:.2f}× | ≥ {target:g}× | "
                           f"{verdict(min(ratios) >= target)} |")
    if hooked:
        by = {(t["impl"], t["hook"]): t for t in hooked["timed"]}
        ratios = [by[("dist", h)]["step_ms"] / by[("torch", h)]["step_ms"]
                  for h in ("allreduce", "fp16", "powersgd")]
        targets.append(f"| chapter 09 step time vs torch with the same hook, 2 ranks (allreduce, "
                       f"fp16, PowerSGD) | {', '.join(f'{r:.2f}×' for r in ratios)} | ≤ 1× | "
                       f"{verdict(max(ratios) <= 1)} |")
        same = all(s["bytes"] == s["closed_form"] for s in hooked["bytes"])
        targets.append(f"| hooks' bytes per step against their closed forms | "
                       f"{'all equal' if same else 'some differ'} | equal | {verdict(same)} |")
    if par:
        tp = {(r["impl"], r["size"]): r for r in par["tp"]}
        ratios = [tp[("dist", name)]["step_ms"] / tp[("torch", name)]["step_ms"]
                  for name, _, _ in args.tp_sizes]
        names = ", ".join(n for n, _, _ in args.tp_sizes)
        targets.append(f"| chapter 15 step time vs its twin ({names}) | "
                       f"{', '.join(f'{r:.2f}×' for r in ratios)} | ≤ 1× | "
                       f"{verdict(max(ratios) <= 1)} |")
        same = all(r["bytes_ok"] for r in par["tp"] if r["impl"] == "dist")
        targets.append(f"| chapter 15's bytes per step against their closed forms | "
                       f"{'all equal' if same else 'some differ'} | equal | {verdict(same)} |")
        if par["pp"]:
            pp = {(r["impl"], r["schedule"], r["stages"], r["microbatches"]): r for r in par["pp"]}
            keys = [(k, p, m) for (i, k, p, m) in pp if i == "dist" and p > 1]
            ratios = [pp[("dist",) + key]["samples_per_s"] / pp[("torch",) + key]["samples_per_s"]
                      for key in keys]
            targets.append(f"| chapter 16 samples/s vs its twin (p > 1, every m, both schedules) | "
                           f"{min(ratios):.2f}× to {max(ratios):.2f}× | ≥ 1× | "
                           f"{verdict(min(ratios) >= 1)} |")
            m8 = [(k, p) for (k, p, m) in keys if m == 8]
            if m8:
                off = [abs(pp[("dist", k, p, 8)]["bubble"] - pp[("dist", k, p, 8)]["closed_form"])
                       / pp[("dist", k, p, 8)]["closed_form"] for k, p in m8]
                text = ", ".join(f"{k} p = {p}: {100 * pp[('dist', k, p, 8)]['bubble']:.1f}% vs "
                                 f"{100 * pp[('dist', k, p, 8)]['closed_form']:.1f}%" for k, p in m8)
                targets.append(f"| chapter 16's bubble at m = 8 within 10% of (p - 1)/(m + p - 1) "
                               f"| {text} | ≤ 10% off | {verdict(max(off) <= 0.10)} |")
    if targets:
        lines += ["## Targets", "", "| what | measured | target | |", "|---|---|---|---|"]
        lines += targets + [""]
    # ---- training
    if speed:
        lines += ["## Training throughput (samples/s, the training steps only)", "",
                  "| chapter | ranks | dist | torch | ratio |", "|---|---|---|---|---|"]
        for chapter in ("08", "09"):
            for w in (1, 2):
                d, t = sp[(chapter, w, "dist")], sp[(chapter, w, "torch")]
                lines.append(f"| {chapter} | {w} | {d:,.0f} | {t:,.0f} | {d / t:.2f}× |")
        lines.append("")
    if shard:
        lines += sharding_report(args, shard)
    if hooked:
        lines += hooks_report(args, hooked)
    if par:
        lines += parallel_report(args, par["tp"], par["pp"])
    if init:
        lines += ["## Start-up", "",
                  f"Launch to an initialised 2-rank group, median of {args.repeat}: dist "
                  f"{init['dist']['median_ms']:.1f} ms, torch {init['torch']['median_ms']:.1f} ms "
                  "(`import torch` included: a PyTorch program pays it). Loopback round trip of one "
                  f"byte: median {rtt['median_us']:.1f} µs, 10th percentile {rtt['p10_us']:.1f} µs.",
                  ""]
    if life:
        lines += ["## A job's whole life", "",
                  f"From the start of the first process to the exit of the last, {life['runs']} runs "
                  "each, measured from outside (CPU: user + system of every process). ratio = job / "
                  "torch's.", "",
                  "| job | wall median (ms) | wall min–max (ms) | CPU median (ms) | wall ratio |",
                  "|---|---|---|---|---|"]
        for name, what in (("ddprun", "chapter 01 under `ddprun --standalone --nproc-per-node 2`"),
                           ("floor", "the same 3 processes, each only loaded and ended "
                                     "(chapter 01 with `--help`)"),
                           ("direct", "chapter 01, two processes started with RANK etc."),
                           ("torch", "PyTorch's 2-rank gloo job, started the same way")):
            w, c = life[name]["wall"], life[name]["cpu"]
            lines.append(f"| {what} | {w['median_ms']:.1f} | {w['min_ms']:.1f}–{w['max_ms']:.1f} | "
                         f"{c['median_ms']:.1f} | "
                         f"{w['median_ms'] / life['torch']['wall']['median_ms']:.4f}× |")
        lines.append("")
    # ---- collectives
    for world in args.worlds:
        for op in OPS:
            sizes = sorted({r["bytes"] for r in rows if r["op"] == op and r["world"] == world})
            if not sizes:
                continue
            note = " (torch: all_reduce + slice; its gloo has no reduce_scatter)" if op == "reduce_scatter" else ""
            lines += [f"## {op}, {world} ranks{note}", "",
                      "| size | dist time (µs) | torch time (µs) | time ratio | dist busbw (GB/s) | "
                      "torch busbw (GB/s) | busbw ratio | #wrong |",
                      "|---|---|---|---|---|---|---|---|"]
            for b in sizes:
                d, t = by.get(("dist", op, world, b)), by.get(("torch", op, world, b))
                if d is None or t is None:
                    continue
                bw = f"{d['busbw'] / t['busbw']:.2f}×" if t["busbw"] > 0 else "–"
                lines.append(f"| {fmt_bytes(b)} | {d['time_us']:.1f} | {t['time_us']:.1f} | "
                             f"{d['time_us'] / t['time_us']:.3f}× | {d['busbw']:.3f} | {t['busbw']:.3f} | "
                             f"{bw} | {d['wrong'] + t['wrong']} |")
            lines.append("")
    with open(os.path.join(args.out, "report.md.tmp"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(os.path.join(args.out, "report.md.tmp"), os.path.join(args.out, "report.md"))


def plots(args, rows):
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        log("gnuplot is not installed (apt-get install gnuplot-nox): no PNGs")
        return
    for op in OPS:
        series = []
        for world in args.worlds:
            for impl in ("dist", "torch"):
                pts = sorted((r["bytes"], r["busbw"], r["time_us"]) for r in rows
                             if r["op"] == op and r["world"] == world and r["impl"] == impl)
                if pts:
                    path = os.path.join(args.out, f"{op}_{impl}_w{world}.dat")
                    with open(path, "w") as f:
                        f.writelines(f"{b} {bw} {t}\n" for b, bw, t in pts)
                    series.append((path, f"{impl}, {world} ranks"))
        for what, col, ylabel, logy in (("busbw", 2, "busbw (GB/s)", False),
                                        ("latency", 3, "time per call (µs)", True)):
            png = os.path.join(args.out, f"{what}_{op}.png")
            ticks = ", ".join(f"'{fmt_bytes(1 << k)}' {1 << k}" for k in range(2, 31, 4))
            script = [f"set terminal pngcairo size 900,560 font 'DejaVu Sans,11' noenhanced",
                      f"set output '{png}'", "set logscale x 2", f"set xtics ({ticks})",
                      f"set title '{op}: {what} against size'", "set xlabel 'size (bytes)'",
                      f"set ylabel '{ylabel}'", "set key left top", "set grid"]
            if logy:
                script.append("set logscale y 10")
            script.append("plot " + ", ".join(
                f"'{p}' using 1:{col} with linespoints title '{t}'" for p, t in series))
            subprocess.run([gnuplot], input="\n".join(script), text=True, check=True, timeout=60)


def main():
    # ./tutorial bench passes its flags here unchecked: an unknown or abbreviated one is an error
    # that names it, with the usage line of every flag (argparse's own, exit 2).
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0],
                                allow_abbrev=False)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin"),
                   help="the built programs (default build/release/bin)")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench"),
                   help="where the report, the plots and the raw rows go (default build/bench)")
    p.add_argument("--max-mib", type=int, default=256,
                   help="the collectives' largest size, in MiB (default 256)")
    p.add_argument("--worlds", default="2,4", help="world sizes for the collectives (default 2,4)")
    p.add_argument("--repeat", type=int, default=5, help="init runs per implementation (median; default 5)")
    p.add_argument("--sweeps", type=int, default=2,
                   help="sweeps of the collectives and training runs per side, alternating; "
                        "each row keeps its best (default 2)")
    p.add_argument("--life-runs", type=int, default=10,
                   help="runs of each whole 2-rank job in bench/job_life.py (default 10)")
    p.add_argument("--sharding-samples", type=int, default=None,
                   help="chapter 12's training images per run, one epoch (default 2048; 512 "
                        "with --quick)")
    p.add_argument("--tp-hidden", type=int, default=None,
                   help="chapter 15's hidden width in the parallel section (default 512; 64 "
                        "with --quick)")
    p.add_argument("--tp-batch", type=int, default=128,
                   help="chapter 15's global batch in the parallel section (default 128)")
    p.add_argument("--tp-steps", type=int, default=None,
                   help="chapter 15's timed training steps (default 100; 20 with --quick)")
    p.add_argument("--pp-stages", default=None,
                   help="chapter 16's stage counts, beside one process (default 2,4; 2 with "
                        "--quick)")
    p.add_argument("--pp-microbatches", default=None,
                   help="chapter 16's micro-batch counts (default 1,4,8; 1,8 with --quick)")
    p.add_argument("--pp-hidden", type=int, default=None,
                   help="chapter 16's hidden width (default 256; 32 with --quick)")
    p.add_argument("--pp-steps", type=int, default=None,
                   help="chapter 16's steps per schedule (default 10; 4 with --quick)")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"what to run, of {','.join(SECTIONS)} (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="sizes to 1 MiB, 1 init run, 3 job-life runs and 1 sweep, chapter 12 at "
                        "2 ranks on 512 images: a smoke test")
    p.add_argument("--check-args", action="store_true",
                   help="check the other arguments, then exit 0 without running anything "
                        "(./tutorial bench does this before it builds)")
    args = p.parse_args()
    if not re.fullmatch(r"[1-9][0-9]*(,[1-9][0-9]*)*", args.worlds):
        p.error(f"argument --worlds: want world sizes like 2,4, got '{args.worlds}'")
    args.worlds = [int(w) for w in args.worlds.split(",")]
    args.sections = [s for s in args.sections.split(",") if s]
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown or not args.sections:
        sys.exit(f"bench: --sections {','.join(unknown)}: each must be one of {','.join(SECTIONS)}")
    args.sharding_worlds = args.worlds
    quick = args.quick
    for name, full, small in (("pp_stages", "2,4", "2"), ("pp_microbatches", "1,4,8", "1,8")):
        text = getattr(args, name) or (small if quick else full)
        if not re.fullmatch(r"[1-9][0-9]*(,[1-9][0-9]*)*", text):
            p.error(f"argument --{name.replace('_', '-')}: want counts like 2,4, got '{text}'")
        setattr(args, name, [int(v) for v in text.split(",")])
    for name, full, small in (("tp_hidden", 512, 64), ("tp_steps", 100, 20), ("pp_hidden", 256, 32),
                              ("pp_steps", 10, 4)):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
        if getattr(args, name) < 2:
            why = "step 1 is a warm-up" if name.endswith("steps") else "too small to time"
            sys.exit(f"bench: --{name.replace('_', '-')} must be at least 2 ({why})")
    args.pp_layers, args.pp_batch = 8, 256
    args.tp_sizes = [s for s in TP_SIZES if not quick or s[2] < 4]  # --quick: no TP = 4
    if args.tp_batch % 2 or args.tp_hidden % 4:
        sys.exit("bench: --tp-batch must be even (2 x 2 splits it) and --tp-hidden a multiple "
                 "of 4 (TP = 4 splits it)")
    if any(args.pp_batch % m for m in args.pp_microbatches) or max(args.pp_stages) > args.pp_layers:
        sys.exit(f"bench: each of --pp-microbatches must divide chapter 16's batch "
                 f"({args.pp_batch}), and --pp-stages be at most its {args.pp_layers} layers")
    if quick:
        args.max_mib, args.repeat, args.sweeps, args.life_runs = 1, 1, 1, 3
        args.sharding_worlds = [2]
    if args.sharding_samples is None:
        args.sharding_samples = 512 if args.quick else 2048
    if args.sweeps < 1 or args.repeat < 1 or args.life_runs < 1:
        sys.exit("bench: --sweeps, --repeat and --life-runs must be at least 1")
    if args.sharding_samples < 64:
        sys.exit("bench: --sharding-samples must be at least 64 (ch12_sharding's least)")
    if args.check_args:
        return
    needed = {"startup": ["bench_loopback", "bench_init", "ch01_get_dist_info"],
              "collectives": ["bench_collectives"],
              "training": ["ch08_ddp_linear", "ch09_ddp_classifier"],
              "sharding": ["ch12_sharding"],
              "hooks": ["ch09_ddp_classifier"],
              "parallel": ["ch15_tensor_parallel", "ch16_pipeline_parallel"]}
    missing = [name for section in args.sections for name in ["ddprun"] + needed[section]
               if not os.path.exists(os.path.join(args.bin, name))]
    if missing:
        sys.exit(f"bench: no {', '.join(sorted(set(missing)))} in {args.bin}: build first "
                 "(cmake --workflow --preset release, or ./tutorial bench)")
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rtt = init = life = rows = speed = shard = hooked = par = None
    if "startup" in args.sections:
        rtt = loopback(args)
        init = init_times(args)
        life = job_life(args)
    if "collectives" in args.sections:
        rows = collectives(args)
    if "training" in args.sections:
        speed = throughput(args)
    if "sharding" in args.sections:
        shard = sharding(args)
        with open(os.path.join(args.out, "sharding.json"), "w") as f:
            json.dump(shard, f, indent=1)
    if "hooks" in args.sections:
        hooked = hooks(args)
        with open(os.path.join(args.out, "hooks.json"), "w") as f:
            json.dump(hooked, f, indent=1)
    if "parallel" in args.sections:
        par = {"tp": tensor_parallel(args), "pp": pipeline(args)}
        with open(os.path.join(args.out, "parallel.json"), "w") as f:
            json.dump(par, f, indent=1)
    wrong = sum(r["wrong"] for r in rows or [])
    report(args, rtt, init, life, rows, speed, shard, hooked, par)
    if rows:
        plots(args, rows)
    log(f"report: {os.path.join(args.out, 'report.md')}")
    if wrong:
        raise SystemExit(f"bench: {wrong} wrong elements: see #wrong in the report")
    differ = [s for s in (hooked or {}).get("bytes", []) if s["bytes"] != s["closed_form"]]
    if differ:
        raise SystemExit(f"bench: {len(differ)} hook row(s) sent other than the closed form's "
                         "bytes: see the hooks section of the report")
    differ = [r for r in (par or {}).get("tp", []) if r["impl"] == "dist" and not r["bytes_ok"]]
    if differ:
        raise SystemExit(f"bench: chapter 15 sent other than the closed form's bytes at "
                         f"{', '.join(r['size'] for r in differ)}: see the report's tensor "
                         "parallel section")


if __name__ == "__main__":
    main()
