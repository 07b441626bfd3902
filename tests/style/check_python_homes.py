#!/usr/bin/env python3
"""Where the project's Python may reach (tools/pylib/disttut/__init__.py says why):

  1. no tool, bench script or chapter file (tools/, bench/, chapters/) imports a test: none puts a
     folder under tests/ on sys.path or loads a file under tests/ as a module;
  2. a chapter's twin (chapters/NN_name/twin*.py) runs alone: it imports nothing of the project's
     package (disttut) and puts no folder outside chapters/ on its path;
  3. the helpers the package holds are written once: no other file defines free_port(s), except
     the twins, which keep their own copy (2).

Every finding names the file and line; exit 1 if there is any, 0 otherwise.

usage: check_python_homes.py [REPO_ROOT]          (default: the checkout this file is in)
       check_python_homes.py --self-test          each rule catches what it is for
"""
import ast
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.tree import repo_files  # noqa: E402

PACKAGE_HELPERS = ("free_port", "free_ports")  # disttut.ports
PACKAGE = "tools/pylib/disttut/"


def is_twin(path):
    return re.fullmatch(r"chapters/[^/]+/twin\w*\.py", path) is not None


def path_calls(tree):
    """sys.path.insert/append calls and importlib's spec_from_file_location calls."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            on_sys_path = (f.attr in ("insert", "append") and isinstance(f.value, ast.Attribute)
                           and f.value.attr == "path" and isinstance(f.value.value, ast.Name)
                           and f.value.value.id == "sys")
            if on_sys_path or f.attr == "spec_from_file_location":
                yield node


def strings(node):
    """The string constants inside an expression: the folder names it joins."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


def check_file(path, text, problems):
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        problems.append(f"{path}:{e.lineno}: does not parse: {e.msg}")
        return
    outside_tests = path.startswith(("tools/", "bench/", "chapters/"))
    for call in path_calls(tree):
        words = " ".join(strings(call))
        if outside_tests and re.search(r"(^|[/ ])tests($|[/ ])", words):
            problems.append(f"{path}:{call.lineno}: reaches into tests/ ({words.strip()}): a "
                            "tool or chapter imports no test; move what it needs to "
                            f"{PACKAGE}")
        if is_twin(path) and re.search(r"(^|[/ ])(tools|tests|bench)($|[/ ])", words):
            problems.append(f"{path}:{call.lineno}: a twin puts {words.strip()} on its path: a "
                            "twin runs alone (a sibling module in chapters/ is fine)")
    for node in ast.walk(tree):
        if is_twin(path) and isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names]
            if any(n == "disttut" or n.startswith("disttut.") for n in names):
                problems.append(f"{path}:{node.lineno}: a twin imports disttut: a twin runs "
                                "alone, so it keeps its own copy")
        if (isinstance(node, ast.FunctionDef) and node.name in PACKAGE_HELPERS
                and not is_twin(path) and not path.startswith(PACKAGE)):
            problems.append(f"{path}:{node.lineno}: defines {node.name}() again: import it "
                            "from disttut.ports")


def python_files(root):
    """The Python files git knows of (tracked, or new and not ignored); outside a git checkout,
    every .py file but those in build/ and hidden folders."""
    return repo_files(root, "*.py")


def check(root):
    problems = []
    files = python_files(root)
    for path in files:
        check_file(path, (root / path).read_text(), problems)
    return files, problems


def self_test():
    """Each rule against a file that breaks it, and the package's own file that may."""
    cases = {
        "tools/grader/check.py":
            'import sys\nsys.path.insert(0, str(ROOT / "tests/readme"))\n',
        "bench/x.py":
            'import os, sys\nsys.path.insert(0, os.path.join(ROOT, "tests", "support"))\n',
        "chapters/05_barrier/post_c.py":
            'import importlib.util\nimportlib.util.spec_from_file_location("m", "tests/x.py")\n',
        "chapters/11_fault_tolerance/twin.py": 'from disttut.ports import free_port\n',
        "chapters/12_sharding/twin.py":
            'import sys\nsys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "pylib"))\n',
        "tools/multinode/two_machines.py": 'def free_port():\n    return 0\n',
    }
    allowed = {
        "tests/chapters/x.py": 'import sys\nsys.path.insert(0, str(ROOT / "tests" / "support"))\n',
        "chapters/12_sharding/twin.py":
            'import sys\nsys.path.insert(0, os.path.join(HERE, "..", "09_ddp_classifier"))\n',
        "chapters/02_init_methods/twin.py": 'def free_ports(host, count):\n    return []\n',
        "tools/pylib/disttut/ports.py": 'def free_port():\n    return 0\n',
        "tools/grader/grading.py":
            'import sys\nsys.path.insert(0, str(ROOT / "tools" / "pylib"))\n'
            'from disttut.ports import free_port\n',
    }
    failed = []
    for path, text in cases.items():
        found = []
        check_file(path, text, found)
        if not found:
            failed.append(f"not caught: {path}: {text!r}")
    for path, text in allowed.items():
        found = []
        check_file(path, text, found)
        if found:
            failed.append(f"refused, though allowed: {path}: {found}")
    with tempfile.TemporaryDirectory() as tmp:  # the whole run, on a tree with one finding
        root = Path(tmp)  # not a git checkout: python_files walks it, as in a fresh root
        (root / "tools").mkdir()
        (root / "tools" / "t.py").write_text('import sys\nsys.path.insert(0, "tests/readme")\n')
        files, problems = check(root)
        if files != ["tools/t.py"] or len(problems) != 1:
            failed.append(f"a checkout with one tool that imports a test: files {files}, "
                          f"findings {problems}")
    for f in failed:
        print("SELF-TEST FAIL:", f)
    if not failed:
        print(f"self-test: OK ({len(cases)} files caught, {len(allowed)} allowed)")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return 0 if argv[1:2] in (["-h"], ["--help"]) else 2
    root = Path(argv[1]).resolve() if len(argv) == 2 else Path(__file__).resolve().parents[2]
    files, problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} finding(s) in {len(files)} Python files")
        return 1
    print(f"python homes: OK ({len(files)} Python files: no tool or chapter imports a test, the "
          "twins run alone, free_port is written once outside them)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
