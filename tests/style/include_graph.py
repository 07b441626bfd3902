#!/usr/bin/env python3
"""The dist library's include graph, by module, and its cycles.

  include_graph.py [--dot] [ROOT]
  include_graph.py --self-test    (the checker finds a planted cycle, and passes a tree without one)

A module is a public header common/include/dist/X.h with common/src/**/X.cpp, or a private header
common/src/F/Y.h with common/src/F/Y.cpp (only the exact stem is merged: X_part.cpp is a module of
its own). Every `#include "..."` in common/ is resolved against
common/include, common/src and the including file's folder. Prints each module's includes, one line
per module, then every cycle found (a strongly connected component of more than one module, or a
module that includes itself through another file), and exits 1 if there is one, 0 if the graph is
acyclic. --dot prints the graph in Graphviz's dot language instead.
"""
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path, root):
    """A file's module name: its path under common/include or common/src, without the suffix; a
    .cpp whose stem is a public header's (common/src/group/work.cpp, dist/work.h) is that header's
    module, whichever folder of common/src it is in."""
    rel = path.relative_to(root / "common")
    parts = rel.parts[1:]  # drop include/ or src/
    name = "/".join(parts)
    for suffix in (".cpp", ".cu", ".h"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    public_header = root / "common/include/dist" / (path.stem + ".h")
    if path.suffix in (".cpp", ".cu") and public_header.is_file():
        return path.stem
    return name.removeprefix("dist/")


def resolve(include, including, root):
    for base in (root / "common/include", root / "common/src", including.parent):
        candidate = (base / include).resolve()
        if candidate.is_file():
            return candidate
    return None  # a system or third-party header given in quotes


def graph(root):
    files = [p for p in (root / "common").rglob("*") if p.suffix in (".h", ".cpp", ".cu")]
    edges = {}
    for f in files:
        a = module_of(f, root)
        edges.setdefault(a, set())
        for inc in INCLUDE.findall(f.read_text(encoding="utf-8")):
            target = resolve(inc, f, root)
            if target is None or root / "common" not in target.parents:
                continue
            b = module_of(target, root)
            if b != a:
                edges[a].add(b)
    return edges


def cycles(edges):
    """Tarjan's strongly connected components of more than one module."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "common/include/dist").mkdir(parents=True)
        (root / "common/src").mkdir(parents=True)
        (root / "common/include/dist/a.h").write_text('#include "dist/b.h"\n')
        (root / "common/include/dist/b.h").write_text("#include <vector>\n")
        (root / "common/src/b.cpp").write_text('#include "dist/b.h"\n#include "helper.h"\n')
        (root / "common/src/helper.h").write_text("")
        acyclic = cycles(graph(root))
        (root / "common/src/helper.h").write_text('#include "dist/a.h"\n')  # b -> helper -> a -> b
        planted = cycles(graph(root))
    if acyclic or planted != [["a", "b", "helper"]]:
        print(f"FAIL: acyclic tree gave {acyclic}; planted cycle gave {planted}")
        return 1
    print("ok: no cycle in the acyclic tree; the planted cycle a -> b -> helper -> a found")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    dot = "--dot" in argv
    rest = [a for a in argv if a != "--dot"]
    root = Path(rest[0]).resolve() if rest else Path(__file__).resolve().parents[2]
    edges = graph(root)
    if dot:
        print("digraph dist {")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    for a in sorted(edges):
        print(f"{a} -> {', '.join(sorted(edges[a])) or '(nothing)'}")
    found = cycles(edges)
    for c in found:
        print(f"CYCLE: {' <-> '.join(c)}")
    print(f"{len(edges)} modules, {sum(len(e) for e in edges.values())} includes, "
          f"{len(found)} cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
