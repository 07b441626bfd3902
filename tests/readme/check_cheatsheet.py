#!/usr/bin/env python3
"""Checks that every name on the cheat sheet, CHEATSHEET.md, is real.

  - C++: every `dist::NAME` (and `dist::NAME::MEMBER`) is declared in common/include/dist/*.h,
    outside comments, and every member the C++ column uses (`ddp.no_sync()`, `.async_op = true`)
    is declared there too;
  - the launchers' table: every variable in the torchrun/ddprun column is one ddprun sets
    (tools/ddprun/launch.cpp), every variable in the mpirun and srun columns one the library reads
    (common/src/base/env.cpp), and every launcher variable the library reads is on the sheet;
  - every DIST_* variable on the sheet is read by the library or ddprun;
  - every `./tutorial COMMAND` is a command of ./tutorial, with flags it knows;
  - with torch importable (Debian's python3-torch, 1.13): every `dist.NAME(...)` of the PyTorch
    column is a function of torch.distributed that takes the keyword arguments shown, and so are
    torch.manual_seed, torch.randint, DistributedSampler, DistributedDataParallel, BatchSampler and
    ZeroRedundancyOptimizer.
    Without torch that part is skipped, and the output says so.

(The lessons and chapters the sheet names are checked by check_syllabus.py.)

Each problem is reported with the sheet's line; exit 1 if there is any, 0 otherwise.

usage: check_cheatsheet.py [REPO_ROOT] [--sheet FILE]   (default: the checkout this file is in)
       check_cheatsheet.py [REPO_ROOT] --self-test     the checks catch each wrong name of
                                                       tests/readme/fixtures/bad_cheatsheet.md
"""
import re
import sys
from pathlib import Path

CODE = re.compile(r"`([^`]+)`")
SHEET = "CHEATSHEET.md"  # how messages name the sheet
UPPER = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b")  # a variable's name, inside a code span


def strip_comments(text):
    """C++ source without // and /* */ comments (string literals kept; none hold comment marks)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def body_of(text, name):
    """The braces' content of `class|struct|enum [class] NAME {...}`, or None."""
    m = re.search(r"\b(?:class|struct|enum(?:\s+class)?)\s+" + re.escape(name) + r"\b[^;{]*\{", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def declares(text, name):
    """NAME declared at namespace or class scope: a type, a function, or a field/enumerator."""
    n = re.escape(name)
    return bool(re.search(r"\b(?:class|struct|enum(?:\s+class)?|using)\s+" + n + r"\b", text) or
                re.search(r"[\w>&*\]]\s+" + n + r"\s*\(", text) or          # a function
                re.search(r"\b" + n + r"\s*(?:=[^=]|;|\{|,|\})", text))      # a field, an enumerator


def sheet_tables(lines):
    """(heading, header cells, [(line number, cells)]) for each Markdown table of the sheet."""
    tables, heading, i = [], "", 0
    while i < len(lines):
        text = lines[i].strip()
        if text.startswith("#"):
            heading = text.lstrip("#").strip()
        if text.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1].strip()):
            header = [c.strip() for c in text.strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append((i + 1, [c.strip() for c in lines[i].strip().strip("|").split("|")]))
                i += 1
            tables.append((heading, header, rows))
            continue
        i += 1
    return tables


def check_cpp(lines, tables, headers, problems):
    where_names = []  # (line, code) of every C++ code span
    for number, text in enumerate(lines, 1):
        for code in CODE.findall(text):
            if "dist::" in code:
                where_names.append((number, code))
    for heading, header, rows in tables:
        if header and header[0].startswith("C++"):
            for number, cells in rows:
                where_names += [(number, c) for c in CODE.findall(cells[0]) if "dist::" not in c]
    checked = 0
    for number, code in where_names:
        for m in re.finditer(r"\bdist::(\w+)(?:::(\w+))?", code):
            name, member = m.group(1), m.group(2)
            checked += 1
            if not declares(headers, name):
                problems.append(f"{SHEET}:{number}: dist::{name} is declared in no header of "
                                f"common/include/dist/ (outside comments)")
            elif member and not re.search(r"\b" + re.escape(member) + r"\b", body_of(headers, name) or ""):
                problems.append(f"{SHEET}:{number}: dist::{name} has no member {member} in "
                                f"common/include/dist/")
        # Members: `x.name(` and designated initializers `.name =` (not a number like 0.5).
        for m in re.finditer(r"(?<![\w.])(?:[a-z_]\w*)?\.([a-z_]\w*)\s*(?=\(|=)", code):
            checked += 1
            if not declares(headers, m.group(1)):
                problems.append(f"{SHEET}:{number}: .{m.group(1)} (in `{code}`) is declared in no "
                                f"header of common/include/dist/")
    return checked


def check_launchers(root, lines, tables, problems):
    launch = (root / "tools/ddprun/launch.cpp").read_text()
    ddprun_sets = set(re.findall(r'\{"([A-Z][A-Z0-9_]+)",', launch)) | set(
        re.findall(r'emplace_back\("([A-Z][A-Z0-9_]+)"', launch))
    env_cpp = (root / "common/src/base/env.cpp").read_text()
    library_reads = {v for v in re.findall(r'"([A-Z][A-Z0-9_]+)"', env_cpp) if not v.endswith("_")}
    if not ddprun_sets or not library_reads:
        problems.append("could not read the variables of tools/ddprun/launch.cpp or common/src/base/env.cpp")
        return
    table = next(((h, header, rows) for h, header, rows in tables
                  if len(header) >= 4 and "ddprun" in header[1]), None)
    if table is None:
        problems.append(f"{SHEET}: no launchers' table (a header cell naming torchrun and ddprun, "
                        "then mpirun and srun)")
        return
    _, header, rows = table
    on_sheet = set()
    for number, cells in rows:
        for column, cell in enumerate(cells[1:4], 1):
            for var in (v for code in CODE.findall(cell) for v in UPPER.findall(code)):
                on_sheet.add(var)
                if column == 1 and var not in ddprun_sets:
                    problems.append(f"{SHEET}:{number}: {var}, under {header[1]}, is not a variable "
                                    f"ddprun sets (tools/ddprun/launch.cpp)")
                if column > 1 and var not in library_reads:
                    problems.append(f"{SHEET}:{number}: {var}, under {header[column]}, is not a "
                                    f"variable the library reads (common/src/base/env.cpp)")
    for var in sorted(library_reads - on_sheet):
        problems.append(f"{SHEET}: the launchers' table lacks {var}, which common/src/base/env.cpp reads")
    # DIST_* variables anywhere on the sheet: the library's or ddprun's own.
    sources = "\n".join(p.read_text() for d in ("common/src", "tools/ddprun")
                        for p in sorted((root / d).rglob("*.cpp")))
    for number, text in enumerate(lines, 1):
        for var in re.findall(r"\bDIST_[A-Z0-9_]+\b", text):
            if f'"{var}"' not in sources:
                problems.append(f"{SHEET}:{number}: {var} is read nowhere in common/src or tools/ddprun")


def check_tutorial(root, lines, problems):
    script = (root / "tutorial").read_text()
    dispatch = script[script.index("case $cmd in"):]
    dispatch = dispatch[:dispatch.index("esac")]
    commands = set(re.findall(r"^\s*([a-z]+)\)", dispatch, flags=re.M))
    for number, text in enumerate(lines, 1):
        for m in re.finditer(r"\./tutorial ([a-z]+)([^#`\n]*)", text):
            if m.group(1) not in commands:
                problems.append(f"{SHEET}:{number}: ./tutorial has no command '{m.group(1)}' "
                                f"(it has: {', '.join(sorted(commands))})")
            before_args = m.group(2).split(" -- ")[0]
            for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", before_args):
                if not re.search(r"\s" + re.escape(flag) + r"[\s)|=]", script):
                    problems.append(f"{SHEET}:{number}: ./tutorial {m.group(1)} knows no flag {flag}")


def check_torch(lines, tables, problems):
    """torch.distributed names and keyword arguments of the PyTorch column, against the torch here."""
    try:
        import inspect
        import torch
        import torch.distributed as dist
        import torch.nn.parallel
        import torch.utils.data
        from torch.distributed.optim import ZeroRedundancyOptimizer
    except Exception as e:  # no torch: this part cannot run here
        return f"skipped the torch names: torch is not importable ({type(e).__name__}: {e})"
    known = {
        "torch.manual_seed": torch.manual_seed,
        "torch.randint": torch.randint,
        "DistributedSampler": torch.utils.data.DistributedSampler,
        "DistributedDataParallel": torch.nn.parallel.DistributedDataParallel,
        "BatchSampler": torch.utils.data.BatchSampler,
        "ZeroRedundancyOptimizer": ZeroRedundancyOptimizer,
    }
    checked = 0
    for heading, header, rows in tables:
        if len(header) < 2 or not header[1].startswith("PyTorch"):
            continue
        for number, cells in rows:
            for code in CODE.findall(cells[1]):
                for m in re.finditer(r"(?<![\w.])(dist\.\w+(?:\.\w+)?|torch\.\w+|[A-Z]\w+)(\(([^()]*)\))?", code):
                    name, call, args = m.group(1), m.group(2), m.group(3) or ""
                    missing = object()
                    if name.startswith("dist."):
                        obj = dist
                        for part in name.split(".")[1:]:
                            obj = getattr(obj, part, missing)
                            if obj is missing:
                                break
                    elif name in known:
                        obj = known[name]
                    else:
                        continue
                    checked += 1
                    if obj is missing:
                        problems.append(f"{SHEET}:{number}: torch {torch.__version__} has no {name}")
                        continue
                    if not call:
                        continue
                    try:
                        params = inspect.signature(obj).parameters
                    except (TypeError, ValueError):  # a builtin without a signature (torch.randint)
                        continue
                    for kw in re.findall(r"\b([a-z_]+)=", args):
                        if kw not in params and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
                            problems.append(f"{SHEET}:{number}: {name} of torch {torch.__version__} "
                                            f"takes no argument {kw}= (it takes {', '.join(params)})")
    return f"{checked} torch names against torch {torch.__version__}"


# What --self-test expects the check to say about tests/readme/fixtures/bad_cheatsheet.md: one
# wrong name of each kind, by its line. A check that cannot fail is no test.
SELF_TEST = [
    ":8: dist::all_reduce_mean is declared in no header",
    ":9: dist::ReduceOp has no member MEAN",
    ":10: .sync_gradients (in `ddp.sync_gradients();`) is declared in no header",
    ":11: .shufle (in `dist::DistributedSampler s(n, {.shufle = true});`) is declared in no header",
    ":17: NODE_RANK, under torchrun · ddprun, is not a variable ddprun sets",
    ":17: SLURM_JOB_ID, under `srun` (Slurm), is not a variable the library reads",
    "the launchers' table lacks SLURM_NODEID",
    ":23: ./tutorial has no command 'grade'",
    ":24: ./tutorial run knows no flag --ranks",
    ":25: DIST_TRACE is read nowhere",
]
SELF_TEST_TORCH = [  # only where torch can be imported
    "has no dist.all_reduce_mean",
    ":9: dist.all_reduce of torch",
    "takes no argument reduce_op=",
    ":10: DistributedSampler of torch",
    "takes no argument shuffel=",
]


def self_test(root):
    import subprocess
    fixture = Path(__file__).resolve().parent / "fixtures" / "bad_cheatsheet.md"
    r = subprocess.run([sys.executable, __file__, str(root), "--sheet", str(fixture)],
                       capture_output=True, text=True, timeout=120)
    wanted = SELF_TEST + ([] if "skipped the torch names" in r.stdout else SELF_TEST_TORCH)
    missing = [want for want in wanted if want not in r.stdout]
    if r.returncode != 1 or missing:
        print(r.stdout + r.stderr)
        print(f"FAILED: the check exited {r.returncode} (want 1) and missed: {missing}")
        return 1
    print(f"OK: the check catches all {len(wanted)} wrong names of {fixture.name}")
    return 0


def main():
    args = [a for a in sys.argv[1:]]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    sheet = None
    if "--sheet" in args:
        i = args.index("--sheet")
        if i + 1 >= len(args):
            print("--sheet needs a file")
            return 2
        sheet = Path(args[i + 1])
        del args[i:i + 2]
    testing = "--self-test" in args
    args = [a for a in args if a != "--self-test"]
    if len(args) > 1:
        print(__doc__)
        return 2
    root = Path(args[0]) if args else Path(__file__).resolve().parents[2]
    if testing:
        return self_test(root)
    sheet = sheet or root / "CHEATSHEET.md"
    global SHEET
    SHEET = sheet.name
    lines = sheet.read_text().splitlines()
    headers = strip_comments("\n".join(p.read_text() for p in sorted((root / "common/include/dist").glob("*.h"))))
    problems = []
    tables = sheet_tables(lines)
    cpp = check_cpp(lines, tables, headers, problems)
    check_launchers(root, lines, tables, problems)
    check_tutorial(root, lines, problems)
    torch_note = check_torch(lines, tables, problems)
    for problem in problems:
        print(problem)
    if problems:
        print(f"FAILED: {len(problems)} name(s) on {sheet.name} that do not exist")
        return 1
    print(f"OK: {sheet.name}: {cpp} C++ names in common/include/dist/, the launchers' variables, "
          f"the ./tutorial commands; {torch_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
