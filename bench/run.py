#!/usr/bin/env python3
"""Runs every benchmark beside its PyTorch counterpart, in one invocation, and writes a report.

    bench/run.py --bin build/release/bin --out build/bench        (what ./tutorial bench runs)
    bench/run.py --quick ...                                      sizes to 1 MiB, 1 run of each

What it runs, in this order (each program checks its own results; a wrong result fails the run):
  1. bench_loopback: one byte there and back on 127.0.0.1, the floor for small messages
  2. bench_init and bench/torch_init.py: launch to an initialised 2-rank group, median of --repeat;
     then bench/job_life.py: a 2-rank job's whole life (chapter 01 under ddprun, and PyTorch's
     2-rank job), wall and CPU time from outside, --life-runs runs each
  3. bench_collectives and bench/torch_collectives.py at each --worlds size: the nccl-tests rows,
     --sweeps times each, alternating; a row keeps its best time
  4. chapters 08 and 09 and their twins, as taught (default flags) plus --throughput, at 1 and 2
     ranks: the training steps' samples/s, the best of --sweeps runs each, alternating
Then OUT/report.md (tables with our/PyTorch ratios and the targets of bench/README.md), and, when
gnuplot is installed, OUT/busbw_<op>.png and OUT/latency_<op>.png. Raw rows: OUT/*.json.

Times are not pass/fail: this machine is shared and noisy, so the report gives ratios measured in
the same run. The exit status is 1 only if a program fails or a result is wrong.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter")
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
    return [os.path.join(args.bin, "ddprun"), "--standalone", "--nproc-per-node", str(nproc)] + program


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


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def verdict(ok):
    return "met" if ok else "**not met**"


def report(args, rtt, init, life, rows, speed):
    by = {(r["impl"], r["op"], r["world"], r["bytes"]): r for r in rows}
    lines = ["# Benchmark report", "",
             f"Machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M %Z')}; sizes up to "
             f"{args.max_mib} MiB; every row checked (#wrong = 0). `dist` is this project (Gloo "
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
    init_ratio = init["dist"]["median_ms"] / init["torch"]["median_ms"]
    sp = {(s["chapter"], s["world"], s["impl"]): s["samples_per_s"] for s in speed}
    lines += ["## Targets", "",
              "| what | measured | target | |", "|---|---|---|---|"]
    if small:
        worst = max(small)
        lines.append(f"| all_reduce ≤ 4 KiB, 2 ranks: time vs PyTorch | worst {worst:.3f}× "
                     f"(4 B … 4 KiB) | ≤ 0.25× | {verdict(worst <= 0.25)} |")
        floor = max(small_dist) / rtt["median_us"]
        lines.append(f"| all_reduce ≤ 4 KiB, 2 ranks: time vs loopback round trip "
                     f"({rtt['median_us']:.1f} µs) | worst {floor:.2f}× | ≤ 5× | {verdict(floor <= 5)} |")
    if large:
        lines.append(f"| all_reduce ≥ 16 MiB, 2 ranks: busbw vs PyTorch | worst {min(large):.2f}× | "
                     f"≥ 1.2× | {verdict(min(large) >= 1.2)} |")
    else:
        lines.append("| all_reduce ≥ 16 MiB, 2 ranks: busbw vs PyTorch | not measured (--max-mib < 16) "
                     "| ≥ 1.2× | |")
    lines.append(f"| launch to initialised 2-rank group | {init['dist']['median_ms']:.1f} ms vs "
                 f"{init['torch']['median_ms']:.1f} ms = {init_ratio:.3f}× | ≤ 0.05× | "
                 f"{verdict(init_ratio <= 0.05)} |")
    life_ms = life["ddprun"]["wall"]["median_ms"]
    lines.append(f"| a 2-rank job's whole life (chapter 01 under ddprun): wall time | "
                 f"{life_ms:.1f} ms (its processes only loaded and ended: "
                 f"{life['floor']['wall']['median_ms']:.1f} ms; torch "
                 f"{life['torch']['wall']['median_ms']:.0f} ms) | "
                 f"< 15 ms | {verdict(life_ms < 15)} |")
    for chapter, target in (("08", 5.0), ("09", 1.5)):
        ratios = [sp[(chapter, w, "dist")] / sp[(chapter, w, "torch")] for w in (1, 2)]
        lines.append(f"| chapter {chapter} samples/s vs its twin (1 and 2 ranks) | "
                     f"{ratios[0]:.2f}×, {ratios[1]:.2f}× | ≥ {target:g}× | "
                     f"{verdict(min(ratios) >= target)} |")
    # ---- training
    lines += ["", "## Training throughput (samples/s, the training steps only)", "",
              "| chapter | ranks | dist | torch | ratio |", "|---|---|---|---|---|"]
    for chapter in ("08", "09"):
        for w in (1, 2):
            d, t = sp[(chapter, w, "dist")], sp[(chapter, w, "torch")]
            lines.append(f"| {chapter} | {w} | {d:,.0f} | {t:,.0f} | {d / t:.2f}× |")
    lines += ["", "## Start-up", "",
              f"Launch to an initialised 2-rank group, median of {args.repeat}: dist "
              f"{init['dist']['median_ms']:.1f} ms, torch {init['torch']['median_ms']:.1f} ms "
              "(`import torch` included: a PyTorch program pays it). Loopback round trip of one byte: "
              f"median {rtt['median_us']:.1f} µs, 10th percentile {rtt['p10_us']:.1f} µs.", "",
              "## A job's whole life", "",
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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin"))
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--worlds", default="2,4", help="world sizes for the collectives (default 2,4)")
    p.add_argument("--repeat", type=int, default=5, help="init runs per implementation (median)")
    p.add_argument("--sweeps", type=int, default=2,
                   help="sweeps of the collectives and training runs per side, alternating; "
                        "each row keeps its best (default 2)")
    p.add_argument("--life-runs", type=int, default=10,
                   help="runs of each whole 2-rank job in bench/job_life.py (default 10)")
    p.add_argument("--quick", action="store_true",
                   help="sizes to 1 MiB, 1 init run, 3 job-life runs and 1 sweep: a smoke test")
    args = p.parse_args()
    args.worlds = [int(w) for w in args.worlds.split(",")]
    if args.quick:
        args.max_mib, args.repeat, args.sweeps, args.life_runs = 1, 1, 1, 3
    if args.sweeps < 1 or args.repeat < 1 or args.life_runs < 1:
        sys.exit("bench: --sweeps, --repeat and --life-runs must be at least 1")
    if not os.path.exists(os.path.join(args.bin, "bench_collectives")):
        sys.exit(f"bench: no bench_collectives in {args.bin}: build first "
                 "(cmake --workflow --preset release, or ./tutorial bench)")
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rtt = loopback(args)
    init = init_times(args)
    life = job_life(args)
    rows = collectives(args)
    speed = throughput(args)
    wrong = sum(r["wrong"] for r in rows)
    report(args, rtt, init, life, rows, speed)
    plots(args, rows)
    log(f"report: {os.path.join(args.out, 'report.md')}")
    if wrong:
        raise SystemExit(f"bench: {wrong} wrong elements: see #wrong in the report")


if __name__ == "__main__":
    main()
