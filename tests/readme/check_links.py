#!/usr/bin/env python3
"""Every relative link in the project's Markdown leads somewhere: the file exists, and a
"#anchor" names a heading of that file (GitHub's anchors: the heading lower-cased, punctuation
dropped, spaces as hyphens, "-1", "-2" for repeats) or an explicit <a id="..."> in it.

Pages move (the landing page's reference parts now live in docs/); a reader who follows a link
and lands nowhere stops reading. Links to the web are not followed (nothing here reaches the
internet); links inside code blocks are code, not links. A deck's diagrams/NAME.svg is made when
the slides are built (slides/tools/diagrams.mjs), so it is checked against that script's list.

usage: check_links.py [REPO_ROOT] [--self-test]    exit 0 when every link resolves, 1 otherwise
"""
import re
import subprocess
import sys
from pathlib import Path

LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
HTML_HREF = re.compile(r"<a\s+[^>]*href=\"([^\"]+)\"")
HTML_ID = re.compile(r"<a\s+[^>]*(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def strip_code(text):
    """The text without fenced code blocks and inline code spans, line numbers kept."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return out


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"<[^>]+>", "", heading)               # tags
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text, flags=re.UNICODE)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        lines = strip_code(path.read_text(encoding="utf-8"))
        raw = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", raw[n]) if line else None
            if m:
                base = slug(m.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            found.update(HTML_ID.findall(raw[n]))
        cache[path] = found
    return cache[path]


def targets(text):
    """(line number, target) of every link outside code."""
    for n, line in enumerate(strip_code(text), 1):
        for regex in (LINK, IMAGE, HTML_HREF):
            for m in regex.finditer(line):
                yield n, m.group(1)


def check_file(root, md, problems):
    where = md.relative_to(root)
    for n, target in targets(md.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = md if not file else (md.parent / file).resolve()
        if file and not dest.exists() and not generated_diagram(root, md, file):
            problems.append(f"{where}:{n}: link to {target}: {file} does not exist")
            continue
        if not dest.is_relative_to(root):
            problems.append(f"{where}:{n}: link to {target} leaves the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}:{n}: link to {target}: {dest.relative_to(root)} has no "
                            f"heading whose anchor is #{anchor}")


def generated_diagram(root, md, file):
    """A deck's diagrams/NAME.svg that slides/tools/diagrams.mjs writes when the slides build."""
    script = root / "slides/tools/diagrams.mjs"
    return (md.parent == root / "slides/decks" and file.startswith("diagrams/") and
            script.exists() and Path(file).name in script.read_text())


def markdown_files(root):
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard",
                                 "*.md"], capture_output=True, text=True, check=True).stdout
        files = [root / line for line in listed.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in root.rglob("*.md") if "build" not in p.parts
                 and "node_modules" not in p.parts]
    return sorted(p for p in files if p.exists() and "fixtures" not in p.parts
                  and "bad_decks" not in p.parts)


def self_test():
    """The check catches a missing file and a missing anchor, and passes good links."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "docs/a.md").write_text("# Page A\n\n## The `dist` library\n\n## Step 1\n## Step 1\n")
        (root / "README.md").write_text(
            "[ok](docs/a.md#the-dist-library) [ok2](docs/a.md#step-1-1) [ok3](#top)\n"
            "# Top\n```\n[in code](nowhere.md)\n```\n"
            "[bad file](docs/b.md) [bad anchor](docs/a.md#nope)\n")
        problems = []
        for md in (root / "README.md", root / "docs/a.md"):
            check_file(root, md, problems)
        want = ["docs/b.md does not exist", "no heading whose anchor is #nope"]
        if len(problems) != 2 or not all(any(w in p for p in problems) for w in want):
            print("FAIL: the link check's self-test found:", *problems, sep="\n  ")
            return 1
    print("links self-test: OK (a missing file and a missing anchor are caught)")
    return 0


def main(argv):
    args = [a for a in argv[1:] if a != "--self-test"]
    if "--self-test" in argv:
        return self_test()
    root = Path(args[0] if args else Path(__file__).resolve().parents[2]).resolve()
    problems = []
    files = markdown_files(root)
    for md in files:
        check_file(root, md, problems)
    for problem in problems:
        print("FAIL:", problem)
    print(f"links: {len(files)} Markdown files,", "OK" if not problems else
          f"{len(problems)} broken link(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
