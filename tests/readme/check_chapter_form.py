#!/usr/bin/env python3
"""Every chapter keeps the form STYLE.md promises a reader, so that each reads like the last.

For each chapters/NN_name/:
  - README.md opens with its title, then a time estimate before "## Goal": a line
    "**Time:** about N minutes ..." (what a reader plans an hour around);
  - it has the sections Goal, Run it, Expected output, Walk-through, What changed since the last
    chapter, Pitfalls, Try this and Next, in that order (others may sit between them);
  - deep dives are collapsed, so the main path stays short: every <details> has a <summary> and is
    closed, and "Deep dive" appears only in a <summary>;
  - "Try this" gives each exercise's starter (exercises/exK_*.cpp) before its solution, and the
    solution only inside a collapsed <details> whose <summary> is "Solution (grade yours first:
    <code>./tutorial check NN-exK</code>)": a participant meets the grader before the answer;
  - main.cpp stays a lesson a reader can hold: at most MAX_MAIN_LINES lines (support code goes in
    a support.h/.cpp beside it, or the library).
And for every source file under chapters/, common/ and tools/: each slide region (a
"--8<-- [start:NAME]" ... "[end:NAME]" pair) is cut by some deck (an "include: FILE#NAME" line
in slides/decks/), since a marker nobody reads is noise in the lesson; and no marker follows a
return statement, where it reads as dead code.

usage: check_chapter_form.py [REPO_ROOT]    exit 0 when every chapter keeps the form, 1 otherwise
"""
import re
import sys
from pathlib import Path

SECTIONS = ["Goal", "Run it", "Expected output", "Walk-through",
            "What changed since the last chapter", "Pitfalls", "Try this", "Next"]
MAX_MAIN_LINES = 260
TIME = re.compile(r"^\*\*Time:\*\* about \d+ minutes\b")
MARKER = re.compile(r"--8<-- \[(start|end):([A-Za-z0-9_.-]+)\]")
INCLUDE = re.compile(r"<!--\s*include:\s*([^#\s]+)#([A-Za-z0-9_.-]+)\s*-->")
SOURCES = ("*.cpp", "*.h", "*.cu", "*.py", "*.mjs")


def check_readme(root, readme, problems):
    where = readme.relative_to(root)
    lines = readme.read_text().splitlines()
    if not lines or not lines[0].startswith("# "):
        problems.append(f"{where}:1: the first line is not the chapter's title ('# ...')")
    headings = [(n, line[3:].strip()) for n, line in enumerate(lines, 1) if line.startswith("## ")]
    goal = next((n for n, title in headings if title == "Goal"), None)
    if not any(TIME.match(line) for line in lines[: (goal or len(lines))]):
        problems.append(f"{where}: no time estimate before '## Goal' (a line '**Time:** about N "
                        "minutes ...')")
    at = 0
    titles = [title for _, title in headings]
    for section in SECTIONS:
        try:
            at = titles.index(section, at) + 1
        except ValueError:
            problems.append(f"{where}: no section '## {section}' after '## {SECTIONS[0]}' ... in "
                            f"the order {' · '.join(SECTIONS)}")
            break
    depth, opened = 0, 0
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("<details"):
            depth, opened = depth + 1, n
            following = next((l.strip() for l in lines[n:] if l.strip()), "")
            if not following.startswith("<summary>"):
                problems.append(f"{where}:{n}: <details> without a <summary> on the next line")
        elif stripped.startswith("</details>"):
            depth -= 1
            if depth < 0:
                problems.append(f"{where}:{n}: </details> without a <details>")
                depth = 0
        if "deep dive" in line.lower() and "<summary>" not in line and depth == 0:
            problems.append(f"{where}:{n}: a deep dive outside a collapsed <details> block")
    if depth:
        problems.append(f"{where}:{opened}: <details> never closed")


def check_try_this(root, chapter, problems):
    readme = chapter / "README.md"
    where = readme.relative_to(root)
    text = readme.read_text()
    section = text.split("\n## Try this\n", 1)[-1].split("\n## ", 1)[0]
    outside = re.sub(r"<details>.*?</details>", "", section, flags=re.S)
    for starter in sorted((chapter / "exercises").glob("ex*_*.cpp")):
        short = starter.name.split("_")[0]
        name = f"{chapter.name[:2]}-{short}"
        if f"(exercises/{starter.name})" not in outside:
            problems.append(f"{where}: 'Try this' links no starter exercises/{starter.name} "
                            "outside a <details>")
        if f"solutions/{starter.name}" in outside:
            problems.append(f"{where}: 'Try this' shows solutions/{starter.name} outside its "
                            "collapsed <details>: grade first, then read the answer")
        summary = (f"<summary>Solution (grade yours first: <code>./tutorial check {name}</code>)"
                   "</summary>")
        block = re.search(rf"<details>\s*{re.escape(summary)}(.*?)</details>", section, re.S)
        if block is None or f"solutions/{starter.name}" not in block.group(1):
            problems.append(f"{where}: 'Try this' wants solutions/{starter.name} in a <details> "
                            f"whose summary is '{summary}'")


def check_main_length(root, chapter, problems):
    main = chapter / "main.cpp"
    if main.exists():
        count = len(main.read_text().splitlines())
        if count > MAX_MAIN_LINES:
            problems.append(f"{main.relative_to(root)}: {count} lines; a lesson's main.cpp keeps to "
                            f"{MAX_MAIN_LINES} (move support code to support.h/.cpp or the library)")


def check_markers(root, problems):
    wanted = set()
    for deck in (root / "slides/decks").glob("*.md"):
        for file, name in INCLUDE.findall(deck.read_text()):
            wanted.add((file, name))
    for folder in ("chapters", "common", "tools"):
        for pattern in SOURCES:
            for path in sorted((root / folder).rglob(pattern)):
                rel = path.relative_to(root).as_posix()
                previous = ""
                for n, line in enumerate(path.read_text().splitlines(), 1):
                    marker = MARKER.search(line)
                    if not marker:
                        if line.strip():
                            previous = line.strip()
                        continue
                    if re.match(r"^return\b.*;$", previous):
                        problems.append(f"{rel}:{n}: a slide marker after a return statement")
                    if marker.group(1) == "start" and (rel, marker.group(2)) not in wanted:
                        problems.append(f"{rel}:{n}: region '{marker.group(2)}' is cut by no deck; "
                                        "remove its markers (decks can cut a function as "
                                        "FILE#name() or main()'s steps as FILE#step:N)")


def main(argv):
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
    problems = []
    for chapter in sorted((root / "chapters").glob("[0-9][0-9]_*")):
        if (chapter / "README.md").exists():
            check_readme(root, chapter / "README.md", problems)
            check_try_this(root, chapter, problems)
        check_main_length(root, chapter, problems)
    check_markers(root, problems)
    for problem in problems:
        print("FAIL:", problem)
    print("chapter form:", "OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
