#!/usr/bin/env python3
"""Every error message a chapter quotes is a real one, produced here where it can be.

A learner searches for the exact text they see, so a Pitfalls table that paraphrases an error
sends them nowhere. Each chapter lists the messages it quotes in chapters/NN_name/messages.toml,
one table per message, by who produces it:

  [[torch]]      quote = "...", code = "python source"
                 PyTorch (Debian's torch 1.13, CPU) produces it: the code runs under /usr/bin/python3
                 and its output (stdout, stderr, the traceback) must contain the quote.
  [[program]]    quote = "...", command = ["{bin}/ddprun", ...]
                 one of this project's programs produces it: the command runs ({bin} is the build's
                 bin folder) and its output must contain the quote.
  [[binary]]     quote = "...", library = "torch" | "nccl", why = "..."
                 only a GPU (or a version not installed here) produces it: the quote's text must be
                 in that library's installed files (torch's shared libraries and Python sources, or
                 libnccl.so.2 of the CUDA toolkit), so at least it is the library's own wording.
                 Skipped, and said so, where the library is not installed.

A quote may leave out parts with "..." or "…": the parts around it must appear in that order.

Where the words depend on which side of a race wins (a peer's connection found "closed" or
"reset", depending on whether the peer's goodbye arrived before this rank's own message left), an
entry lists the other documented wordings too, `alternatives = ["...", ...]`: the output must hold
the quote or one of them, and the README or deck must quote every one, so a reader who meets either
finds it. A test of a real message must never depend on the race.

The checker also reads every Pitfalls table (the rows under a "| Symptom |" header) of each
chapter's README.md and deck (slides/decks/NN_*.md): a span in backticks in the Symptom column that
holds two words or more (not code such as `--seed 1`) is a quoted message and must be listed; and
every listed quote must appear in the README or the deck, so the list cannot go stale.

usage: check_quoted_messages.py REPO_ROOT BIN_DIR [NN ...]   (default: every chapter)
exit 0 when every message checks, 1 otherwise
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PYTHON = "/usr/bin/python3"
TIMEOUT_S = 120
PARALLEL_RUNS = 3
SPAN = re.compile(r"`([^`]+)`")
WORD = re.compile(r"^[A-Za-z][a-z']+[:,.;!?]?$")
ELISION = re.compile(r"\s*(?:\.\.\.|…)\s*")


def fragments(quote):
    return [part for part in ELISION.split(quote) if part]


def contains(text, quote):
    """True when the fragments of quote appear in text, in order."""
    at = 0
    for part in fragments(quote):
        found = text.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def is_message(span):
    """A span of prose (two words or more), not of code such as `--seed 1` or `x = f(y)`."""
    return sum(1 for token in span.split() if WORD.match(token)) >= 2


def pitfall_quotes(path):
    """(line number, quote) for each message quoted in the Symptom column of path's Pitfalls tables."""
    quotes, in_table = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if re.match(r"^\|\s*Symptom\s*\|", line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if in_table and not re.match(r"^\|[-:| ]+\|$", line):
            symptom = line.split("|")[1]
            quotes += [(number, q) for q in SPAN.findall(symptom) if is_message(q)]
    return quotes


def library_files(library):
    if library == "torch":
        found = glob.glob("/usr/lib/x86_64-linux-gnu/libtorch*.so.*") + glob.glob(
            "/usr/lib/x86_64-linux-gnu/libc10*.so*")
        found += glob.glob("/usr/lib/python3/dist-packages/torch/**/*.py", recursive=True)
        return found
    if library == "nccl":
        return glob.glob("/usr/local/cuda/lib*/libnccl.so*") + glob.glob(
            "/usr/lib/x86_64-linux-gnu/libnccl.so*")
    raise ValueError(f"unknown library {library!r} (want torch or nccl)")


def in_library(library, quote, cache={}):
    """True/False: the quote's fragments are in one of the library's files; None: not installed."""
    if library not in cache:
        cache[library] = [Path(f).read_bytes() for f in library_files(library) if os.path.isfile(f)]
    blobs = cache[library]
    if not blobs:
        return None
    wanted = [part.encode() for part in fragments(quote)]
    return any(all(part in blob for part in wanted) for blob in blobs)


def run(argv, cwd):
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
        return done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        return f"(no result: {argv[0]} ran past {TIMEOUT_S} s) " + str(e.stdout or "")


def check_chapter(root, bin_dir, chapter, problems):
    readme = chapter / "README.md"
    decks = sorted((root / "slides/decks").glob(chapter.name + ".md"))
    texts = {readme: readme.read_text(), **{d: d.read_text() for d in decks}}
    listed_file = chapter / "messages.toml"
    listed = tomllib.loads(listed_file.read_text()) if listed_file.exists() else {}
    unknown = set(listed) - {"torch", "program", "binary"}
    if unknown:
        problems.append(f"{listed_file}: unknown tables {sorted(unknown)} (want torch, program, "
                        "binary)")
    entries = [(kind, e) for kind in ("torch", "program", "binary") for e in listed.get(kind, [])]
    quotes = {q for _, e in entries for q in [e["quote"], *e.get("alternatives", [])]}

    for path, text in texts.items():
        for number, quote in pitfall_quotes(path):
            if quote not in quotes:
                problems.append(f"{path.relative_to(root)}:{number}: the Pitfalls table quotes "
                                f"`{quote}`, which {listed_file.relative_to(root)} does not list "
                                "(say who produces it: torch, program or binary)")
    def produce(kind_entry):
        """What torch or the program prints for one entry, in a scratch folder of its own."""
        kind, entry = kind_entry
        if kind == "torch":
            argv = [PYTHON, "-c", entry["code"]]
        elif kind == "program":
            argv = [a.replace("{bin}", str(bin_dir)) for a in entry["command"]]
        else:
            return None
        with tempfile.TemporaryDirectory() as scratch:
            return run(argv, scratch)

    # The runs are independent (each its own folder, ports picked free): a few at a time.
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        outputs = list(pool.map(produce, entries))
    checked = 0
    for (kind, entry), output in zip(entries, outputs):
        quote = entry["quote"]
        wordings = [quote, *entry.get("alternatives", [])]
        where = f"{listed_file.relative_to(root)}: `{quote}`"
        for wording in wordings:
            if not any(wording in text for text in texts.values()):
                problems.append(f"{listed_file.relative_to(root)}: `{wording}`: neither the "
                                "README nor the deck quotes it any more")
        if kind == "binary":
            found = in_library(entry["library"], quote)
            if found is None:
                print(f"skip: {where}: {entry['library']} is not installed here")
                continue
            if not found:
                problems.append(f"{where}: not found in {entry['library']}'s files; quote "
                                "the library's own words")
            checked += 1
            continue
        if not any(contains(output, wording) for wording in wordings):
            tail = "\n      ".join(output.strip().splitlines()[-6:])
            problems.append(f"{where}: {kind} does not say that; it says:\n      {tail}")
        checked += 1
    print(f"{chapter.name}: {checked} of {len(entries)} quoted messages checked")


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    root, bin_dir = Path(argv[1]).resolve(), Path(argv[2]).resolve()
    wanted = argv[3:]
    problems = []
    for chapter in sorted((root / "chapters").glob("[0-9][0-9]_*")):
        if (chapter / "README.md").exists() and (not wanted or chapter.name[:2] in wanted):
            check_chapter(root, bin_dir, chapter, problems)
    for problem in problems:
        print("FAIL:", problem)
    print("quoted messages:", "OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
