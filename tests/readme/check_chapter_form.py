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
    a support.h/.cpp beside it, or the library);
  - its main path (the text outside fenced code blocks, collapsed <details> and HTML comments)
    has at most MAX_WORDS words, about 8 minutes of reading, and so has the landing page,
    README.md;
  - every term on a main path is defined before its first use, or is in the glossary
    (docs/glossary.md, its "- **term**" entries): a term that a page defines in bold ("a
    **bucket**, a group of ...") and that is not in the glossary may not appear on that page's
    main path before its definition; a symbol (a Greek letter but the operators Σ and π, or a
    subscripted letter such as n_u) must be defined in bold on the page where it first appears,
    glossary or not, since a formula whose symbols are defined elsewhere cannot be read.
And for every source file under chapters/, common/ and tools/: each slide region (a
"--8<-- [start:NAME]" ... "[end:NAME]" pair) is cut by some deck (an "include: FILE#NAME" line
in slides/decks/), since a marker nobody reads is noise in the lesson; and no marker follows a
return statement, where it reads as dead code.

usage: check_chapter_form.py [REPO_ROOT]    exit 0 when every chapter keeps the form, 1 otherwise
       check_chapter_form.py --self-test  the budget and term checks catch what they are for
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.readme import main_path  # noqa: E402  (timings.py counts the same words)

SECTIONS = ["Goal", "Run it", "Expected output", "Walk-through",
            "What changed since the last chapter", "Pitfalls", "Try this", "Next"]
MAX_MAIN_LINES = 260
MAX_WORDS = 1500
GLOSSARY = "docs/glossary.md"
SYMBOL = re.compile(r"[\u0370-\u03a2\u03a4-\u03bf\u03c1-\u03ff]|(?<![\w])[a-zA-Z]_[a-zA-Z0-9]{1,2}(?![\w])")
BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
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


def glossary_terms(root):
    """The terms of the glossary's "- **term**: ..." entries, lower-cased: every word in bold in
    an entry ("- **backend**: ... **Gloo** (CPU, TCP) or **NCCL** ...") is defined there."""
    path = root / GLOSSARY
    if not path.exists():
        return set()
    terms, entry = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("- **"):
            entry = True
        elif not line.startswith("  "):
            entry = False
        if entry:
            terms.update(term.strip().lower() for term in BOLD.findall(line))
    return terms


def in_glossary(term, glossary):
    """The term, or the singular of a plural one ("stages", "batches"), is a glossary entry."""
    word = term.lower()
    return (word in glossary or (word.endswith("s") and word[:-1] in glossary)
            or (word.endswith("es") and word[:-2] in glossary))


def check_words(root, readme, problems):
    where = readme.relative_to(root)
    text = main_path(readme.read_text())
    # Words as a reader counts them, whichever way is larger: separated by spaces, or split at
    # punctuation too (`dist::all_reduce` is then two), so no way of counting finds it over.
    count = max(len(text.split()), len(re.findall(r"\w+", text)))
    if count > MAX_WORDS:
        problems.append(f"{where}: its main path has {count} words, more than {MAX_WORDS} "
                        "(cut repetition, or move depth into a collapsed <details> deep dive "
                        "or a linked page)")


def check_terms(root, readme, glossary, problems):
    where = readme.relative_to(root)
    text = main_path(readme.read_text())
    no_code = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), text)
    for m in BOLD.finditer(text):
        term = m.group(1).strip()
        if (term.endswith((":", ".", "!", "?")) or len(term.split()) > 4 or "`" in term
                or in_glossary(term, glossary)):
            continue
        earlier = re.search(r"(?<![\w-])" + re.escape(term) + r"(?![\w-])",
                            no_code[:m.start()], re.I)
        if earlier:
            line = text.count("\n", 0, earlier.start()) + 1
            problems.append(f"{where}:{line}: '{term}' is used before the page defines it (in "
                            f"bold, line {text.count(chr(10), 0, m.start()) + 1}); define it "
                            f"first, or add it to {GLOSSARY}")
    bold_spans = [(m.start(), m.end()) for m in BOLD.finditer(text)]
    seen = set()
    for m in SYMBOL.finditer(text):
        symbol = m.group(0)
        if symbol in seen:
            continue
        seen.add(symbol)
        if not any(start <= m.start() < end for start, end in bold_spans):
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{where}:{line}: the symbol '{symbol}' is used before this page "
                            f"defines it: write its definition in bold where it first appears "
                            f"(\"**{symbol}**, the ...\")")


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


def self_test():
    """The budget and the term checks catch what they are for, and pass a page that keeps them:
    a main path one word over the budget (words in code blocks and deep dives not counted), a
    term used before its bold definition, a symbol never defined in bold; a glossary term, a
    plural of one, and a symbol defined in bold where it first appears pass."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "docs/glossary.md").write_text("# Glossary\n\n- **bucket**: a group.\n"
                                               "- **stage**: how much.\n")
        filler = " ".join(["word"] * (MAX_WORDS - 40))
        good = (f"# Title\n\n{filler}\n\nA **shard** is a part; the shard goes.\n"
                "Buckets and **stages** (glossary). **Ψ**, the values, then 16Ψ.\n\n"
                "```\n" + " ".join(["code"] * 500) + "\n```\n\n<details>\n<summary>Deep "
                "dive: more</summary>\n\n" + " ".join(["deep"] * 500) + "\n</details>\n")
        bad = (f"# Title\n\n{filler} " + " ".join(["more"] * 60) + "\n\nThe shard goes; a "
               "**shard** is a part. The n_u values.\n")
        glossary = glossary_terms(root)
        results = {}
        for name, text in (("good", good), ("bad", bad)):
            page = root / f"{name}.md"
            page.write_text(text)
            found = []
            check_words(root, page, found)
            check_terms(root, page, glossary, found)
            results[name] = found
        want = ["main path has", "'shard' is used before", "symbol 'n_u'"]
        missed = [w for w in want if not any(w in p for p in results["bad"])]
        if results["good"] or missed or len(results["bad"]) != len(want):
            print("FAIL: chapter_form's self-test:", "good page:", results["good"], "bad page:",
                  results["bad"], "missed:", missed)
            return 1
    print("chapter form self-test: OK (the budget, a term before its definition and an "
          "undefined symbol are caught)")
    return 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
    problems = []
    glossary = glossary_terms(root)
    if not glossary:
        problems.append(f"{GLOSSARY}: no '- **term**: ...' entries")
    check_words(root, root / "README.md", problems)
    check_terms(root, root / "README.md", glossary, problems)
    for chapter in sorted((root / "chapters").glob("[0-9][0-9]_*")):
        if (chapter / "README.md").exists():
            check_readme(root, chapter / "README.md", problems)
            check_words(root, chapter / "README.md", problems)
            check_terms(root, chapter / "README.md", glossary, problems)
            check_try_this(root, chapter, problems)
        check_main_length(root, chapter, problems)
    check_markers(root, problems)
    for problem in problems:
        print("FAIL:", problem)
    print("chapter form:", "OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
