#!/usr/bin/env python3
"""CONTRIBUTING.md tells the truth about the files and the layers it names.

  check_contributing.py [ROOT]      check ROOT/CONTRIBUTING.md (ROOT: the repository)
  check_contributing.py --self-test

1. Every file or folder it names exists: each `code span` and link target that looks like a path
   (has a '/' or a file suffix), each file name in its prose, and each path at the start of a
   line of its "rooms" block. A bare file name (`backend_test.cpp`) must be a file somewhere in
   the repository; a glob (`tensor*.cpp`) must match one. Placeholders (NN, exK, <name>,
   YOUR_..., a one-letter name such as dist/X.h) and command lines are not paths.
2. Its "## The layers" section holds a fenced block, one floor per line, top floor first:
   `floor name: module module ...` (modules as tests/style/include_graph.py names them). Every
   module of the library's include graph is on exactly one floor, and every include points to its
   own floor or one below: never up.
Exit 0 when both hold, 1 with one line per problem otherwise.
"""
import fnmatch
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "style"))
from include_graph import graph  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.tree import repo_files  # noqa: E402

SUFFIXES = (".cpp", ".h", ".py", ".md", ".txt", ".sh", ".toml", ".json", ".mjs", ".cu", ".cmake")
PLACEHOLDER = re.compile(r"NN|exK|<|>|YOUR_|\.\.\.|\$|\*\*|(^|/)[A-Z](/|\.)")


def looks_like_path(token):
    if " " in token or PLACEHOLDER.search(token) or token.startswith("-"):
        return False
    if token.startswith(("http://", "https://", "#", "dist::", "torch.")):
        return False
    return "/" in token or token.endswith(SUFFIXES)


def exists(token, root, files):
    token = token.split("#")[0].rstrip(":,.")
    token = token.removeprefix("./")
    if not token:
        return True
    if "*" in token or "?" in token:
        pattern = token if "/" in token else "*/" + token
        return any(fnmatch.fnmatch(f, pattern) or fnmatch.fnmatch(f, token) for f in files)
    if (root / token).exists():
        return True
    if token.endswith("/"):  # a folder named by its last part(s): common/src's rooms, support/
        return any(f.startswith(token) or ("/" + token) in f for f in files)
    if "/" not in token.rstrip("/"):
        return any(f.split("/")[-1] == token for f in files)
    # a path given relative to a folder named just above it (common/src's rooms)
    return any(f.endswith("/" + token.rstrip("/")) or ("/" + token) in f for f in files)


def check_paths(text, root, files):
    problems = []
    tokens = re.findall(r"`([^`\n]+)`", text)
    tokens += re.findall(r"\]\(([^)\s]+)\)", text)
    # file names in plain prose too ("the sections STYLE.md lists")
    prose = re.sub(r"`[^`\n]*`|```.*?```|\]\([^)]*\)", " ", text, flags=re.S)
    tokens += re.findall(r"(?<![\w/.-])([\w./-]+\.(?:md|cpp|h|py|sh|txt|toml|json))\b", prose)
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        if "the rooms" in block or re.search(r"^\S+/\s", block, re.M):
            tokens += re.findall(r"^\s*(\S+)\s", block, re.M)
    for token in sorted(set(tokens)):
        if looks_like_path(token) and not exists(token, root, files):
            problems.append(f"CONTRIBUTING.md names `{token}`, which is not in the repository")
    return problems


def check_layers(text, root):
    section = re.search(r"^## The layers\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not section:
        return ["CONTRIBUTING.md has no '## The layers' section"]
    block = re.search(r"```\n(.*?)```", section.group(1), re.S)
    if not block:
        return ["'## The layers' has no fenced block of floors"]
    floor_of, problems = {}, []
    for number, line in enumerate(l for l in block.group(1).splitlines() if l.strip()):
        name, _, modules = line.partition(":")
        for module in modules.split():
            if module in floor_of:
                problems.append(f"module {module} is on two floors")
            floor_of[module] = (number, name.strip())
    edges = graph(root)
    for module in sorted(set(edges) - set(floor_of)):
        problems.append(f"module {module} is on no floor of '## The layers'")
    for module in sorted(set(floor_of) - set(edges)):
        problems.append(f"'## The layers' names {module}, which is not a module of common/")
    for a in sorted(edges):
        for b in sorted(edges[a]):
            if a in floor_of and b in floor_of and floor_of[b][0] < floor_of[a][0]:
                problems.append(f"{a} ({floor_of[a][1]}) includes {b}, "
                                f"a floor up ({floor_of[b][1]})")
    return problems


def check(root):
    text = (root / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return check_paths(text, root, repo_files(root)) + check_layers(text, root)


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "common/include/dist").mkdir(parents=True)
        (root / "common/src").mkdir(parents=True)
        (root / "common/include/dist/top.h").write_text('#include "dist/low.h"\n')
        (root / "common/include/dist/low.h").write_text("")
        good = ("# C\n\nSee `common/include/dist/top.h` and [low](common/include/dist/low.h).\n\n"
                "## The layers\n\n```\nupper: top\nground: low\n```\n")
        (root / "CONTRIBUTING.md").write_text(good)
        clean = check(root)
        bad = good.replace("low.h)", "gone.h)").replace("upper: top\nground: low",
                                                           "ground: low\nupper: top")
        (root / "CONTRIBUTING.md").write_text(bad)
        found = check(root)
    wanted = ["names `common/include/dist/gone.h`", "top (upper) includes low, a floor up"]
    missed = [w for w in wanted if not any(w in p for p in found)]
    if clean or missed:
        print(f"FAIL: clean tree gave {clean}; the planted faults gave {found}")
        return 1
    print("ok: a clean page passes; a missing file and an upward include are both found")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    root = Path(argv[0]).resolve() if argv else Path(__file__).resolve().parents[2]
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in CONTRIBUTING.md")
        return 1
    print("ok: every file CONTRIBUTING.md names exists, and its layers match the include graph")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
