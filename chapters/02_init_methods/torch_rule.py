"""What PyTorch does when rank and world_size come from the arguments, the URL query and the
environment: each case of the README's table, run with real torch (gloo, three ranks on this
machine), and the outcome printed.

    /usr/bin/python3 chapters/02_init_methods/torch_rule.py          # the README's cases
    /usr/bin/python3 chapters/02_init_methods/torch_rule.py 'tcp:// | rank | - | RANK, WORLD_SIZE'

A case names the init_method's scheme and what each source gives: "rank, world_size", "rank",
"world_size" or "-" (nothing). Three processes run every case at once, and each source gives them
a different numbering, so the rank a process ends up with says which source won:

    environment   RANK=r,         WORLD_SIZE=3
    URL query     ?rank=(r+1)%3   &world_size=3
    arguments     rank=(r+2)%3,   world_size=3

The outcome is the winning source ("arguments", "URL query", "environment"), or the exception
init_process_group raised ("ValueError: rank parameter missing", "AssertionError", ...): the words
the README's table and chapter 02's exercise 1 use, which tests/chapters/init_rule_check.py
compares with these runs.
"""
import json
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut import processes  # noqa: E402
from disttut.ports import free_ports  # noqa: E402

PYTHON = "/usr/bin/python3"
WORLD = 3
SOURCES = ("arguments", "URL query", "environment")
DEADLINE_S = 120


def parse_case(text):
    """'tcp:// | rank, world_size | - | RANK, WORLD_SIZE' -> a dict (the README's four columns)."""
    cells = [c.strip().strip("`").strip() for c in text.split("|")]
    if len(cells) != 4:
        raise ValueError(f"a case has four parts (init_method | arguments | URL query | "
                         f"environment), got {text!r}")
    scheme, arguments, query, environment = cells

    def names(cell):
        return [] if cell in ("-", "–", "") else [n.strip().lower() for n in cell.split(",")]

    case = {"scheme": scheme.split("://")[0], "arguments": names(arguments),
            "query": names(query), "environment": names(environment)}
    if case["scheme"] not in ("env", "tcp", "file"):
        raise ValueError(f"unknown init_method {scheme!r} in {text!r}")
    for key in ("arguments", "query", "environment"):
        if set(case[key]) - {"rank", "world_size"}:
            raise ValueError(f"{key}: only rank and world_size, got {text!r}")
    return case


def case_text(case):
    def cell(values, upper=False):
        if not values:
            return "-"
        return ", ".join(v.upper() if upper else v for v in values)
    return (f"{case['scheme']}:// | {cell(case['arguments'])} | {cell(case['query'])} | "
            f"{cell(case['environment'], upper=True)}")


def outcome_of(error):
    """The words for an exception from init_process_group: its type, and for torch's
    ValueErrors what follows 'rendezvous: ' (the part that does not name a path or a port)."""
    name = type(error).__name__
    if isinstance(error, AssertionError):
        return "AssertionError"
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{name}: {message.split('rendezvous: ')[-1]}"


def worker(r, cases, ports, folder):
    """One of the three ranks: every case in turn, one JSON line per case on stdout."""
    import torch.distributed as dist

    values = {"environment": r, "URL query": (r + 1) % WORLD, "arguments": (r + 2) % WORLD}
    for number, (case, port) in enumerate(zip(cases, ports)):
        for name in ("RANK", "WORLD_SIZE"):
            os.environ.pop(name, None)
        if "rank" in case["environment"]:
            os.environ["RANK"] = str(r)
        if "world_size" in case["environment"]:
            os.environ["WORLD_SIZE"] = str(WORLD)
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        query = "&".join(f"{n}={values['URL query'] if n == 'rank' else WORLD}"
                         for n in case["query"])
        url = {"env": "env://", "tcp": f"tcp://127.0.0.1:{port}",
               "file": f"file://{folder}/case{number}"}[case["scheme"]]
        url += f"?{query}" if query else ""
        kwargs = {n: values["arguments"] if n == "rank" else WORLD for n in case["arguments"]}
        try:
            dist.init_process_group("gloo", init_method=url, timeout=timedelta(seconds=30),
                                    **kwargs)
            rank, world = dist.get_rank(), dist.get_world_size()
            dist.destroy_process_group()
            winner = [s for s in SOURCES if values[s] == rank]
            outcome = winner[0] if world == WORLD and len(winner) == 1 else f"rank {rank} of {world}"
        except Exception as error:  # what init raised is the outcome
            outcome = outcome_of(error)
        print(json.dumps({"case": number, "outcome": outcome}), flush=True)


def torch_outcomes(cases):
    """Runs every case on three ranks with torch; returns one outcome per case, the words every
    rank agreed on (or a line that says they did not)."""
    ports = free_ports(len(cases))
    with tempfile.TemporaryDirectory() as folder:
        spec = json.dumps({"cases": cases, "ports": ports, "folder": folder})
        ranks = {r: processes.start([PYTHON, __file__, "--worker", str(r), spec])
                 for r in range(WORLD)}
        try:
            ended = processes.finish(ranks, DEADLINE_S)
        except processes.DeadlinePassed as late:
            raise SystemExit(f"torch_rule: ranks {late.late} were stopped at the deadline "
                             f"({DEADLINE_S} s)") from None
    results = []
    for number in range(len(cases)):
        seen = set()
        for code, out, err in ended.values():
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            found = [line["outcome"] for line in lines if line["case"] == number]
            seen.add(found[0] if found else f"no result (exit code {code}: "
                     f"{err.strip().splitlines()[-1:] or ''})")
        results.append(seen.pop() if len(seen) == 1 else "ranks disagree: " + " / ".join(sorted(seen)))
    return results


def readme_cases(readme):
    """The cases of the README's table of torch's rule: the rows under its header line
    '| | init_method | arguments | URL query | environment | torch 1.13 | this library |'.
    Returns (case, torch column, library column) for each row."""
    rows, in_table = [], False
    for line in Path(readme).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[1:5] == ["init_method", "arguments", "URL query",
                                                   "environment"]:
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if in_table and not set(line) <= set("|-: "):
            rows.append((parse_case(" | ".join(cells[1:5])), cell_words(cells[5]),
                         cell_words(cells[6])))
    return rows


def cell_words(cell):
    """A table cell without Markdown: '`ValueError`: rank parameter missing' -> the words."""
    return cell.replace("`", "").replace("**", "").strip()


def main(argv):
    if argv[:1] == ["--worker"]:
        spec = json.loads(argv[2])
        worker(int(argv[1]), spec["cases"], spec["ports"], spec["folder"])
        return 0
    if argv:
        cases = [parse_case(a) for a in argv]
    else:
        cases = [case for case, _, _ in readme_cases(Path(__file__).with_name("README.md"))]
    import torch
    print(f"torch {torch.__version__}: rank and world_size from three sources, {WORLD} ranks")
    for case, outcome in zip(cases, torch_outcomes(cases)):
        print(f"{case_text(case):55} -> {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
