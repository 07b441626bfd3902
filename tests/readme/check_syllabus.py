#!/usr/bin/env python3
"""Checks the syllabus against the lesson table, chapters/lessons.txt, where it is written once.

  - the table itself: six fields a row, known kinds, rank fields N, N,M or MxN, no lesson twice;
    every chapter folder chapters/NN_name/ has a row NN and every row NN one folder; every
    exercise row NN-exK follows its chapter and has one solution chapters/NN_name/solutions/exK_*.cpp,
    a starter of the same name in exercises/ (with a TODO(exercise)) and an entry in the chapter's
    exercises/grader.py, and every solution there has a row;
  - README.md's Syllabus table: a row for every lesson that is not an exercise, in the table's
    order (`smoke`, `multinode`, then NN with [name](chapters/NN_name/README.md) and its deck
    slides/decks/NN_name.md);
  - the introduction deck's syllabus slides (slides/decks/00_introduction.md, "## The syllabus" and
    "## The syllabus, continued"): a row NN | name for
    every chapter, in order;
  - slides/README.md's list of decks: one row per chapter, in order, and one row for each deck in
    slides/decks/ (the introduction too), each naming a deck that exists;
  - the introduction deck's list of test labels (its line "Labels: `unit`, ..."): exactly the
    labels the CMake files give tests (LABELS of set_tests_properties, gtest_discover_tests and
    add_test, a function's ${label} followed to its callers);
  - the cheat sheet, CHEATSHEET.md: every chapter in its "Ch" columns is a chapter of the table, and
    every `./tutorial run|check|reset NAME` names a lesson (NN-exK: an exercise) of the table.

Each disagreement is reported with the file, its line and the row of the table it should match;
exit 1 if there is any, 0 otherwise.

usage: check_syllabus.py [REPO_ROOT]      (default: the checkout this file is in)
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.lessons import read_table  # noqa: E402  (the table's own rules are checked there)


def check_exercise(lesson, folder, file, problems):
    """A participant's exercise: the starter exercises/FILE (the solution's name), with the part to
    write marked, and an entry for it in the chapter's grader."""
    starter = folder / "exercises" / file
    if not starter.is_file():
        problems.append(f"{lesson.where()}: wants the starter chapters/{folder.name}/exercises/"
                        f"{file} (the solution's file name), for ./tutorial check")
    elif "TODO(exercise)" not in starter.read_text():
        problems.append(f"chapters/{folder.name}/exercises/{file}: the starter marks no part "
                        "to write with TODO(exercise)")
    grader = folder / "exercises" / "grader.py"
    if not grader.is_file() or not re.search(rf'^\s*"{lesson.exercise}": Exercise\(',
                                             grader.read_text(), re.M):
        problems.append(f"{lesson.where()}: chapters/{folder.name}/exercises/grader.py wants an "
                        f"entry \"{lesson.exercise}\": Exercise(...) in EXERCISES")


def check_table(root, lessons, problems):
    folders = {p.name[:2]: p for p in sorted((root / "chapters").glob("[0-9][0-9]_*")) if p.is_dir()}
    chapters = {l.chapter for l in lessons if l.chapter and not l.exercise}
    for number, folder in folders.items():
        if number not in chapters:
            problems.append(f"chapters/{folder.name} has no row {number} in chapters/lessons.txt")
    seen = set()
    for lesson in lessons:
        if lesson.chapter and lesson.chapter not in folders:
            problems.append(f"{lesson.where()}: there is no folder chapters/{lesson.chapter}_name/")
        if lesson.chapter and not lesson.exercise:
            seen.add(lesson.chapter)
        if lesson.exercise:
            if lesson.chapter not in seen:
                problems.append(f"{lesson.where()}: an exercise comes after its chapter's row")
            if lesson.chapter in folders:
                solutions = list((folders[lesson.chapter] / "solutions").glob(f"{lesson.exercise}_*.cpp"))
                if len(solutions) != 1:
                    problems.append(f"{lesson.where()}: wants one solution "
                                    f"chapters/{folders[lesson.chapter].name}/solutions/"
                                    f"{lesson.exercise}_*.cpp, found {len(solutions)}")
                else:
                    check_exercise(lesson, folders[lesson.chapter], solutions[0].name, problems)
    names = {l.name for l in lessons}
    for number, folder in folders.items():
        for solution in sorted((folder / "solutions").glob("ex*_*.cpp")):
            name = f"{number}-{solution.name.split('_')[0]}"
            if name not in names:
                problems.append(f"chapters/{folder.name}/solutions/{solution.name} has no row "
                                f"{name} in chapters/lessons.txt")
    return folders


def table_rows(root, file, heading, problems):
    """(line number, cells) for each body row of the first Markdown table after `heading`, and
    of the first table after `heading, continued` where a long table goes on, on a slide of its
    own."""
    lines = (root / file).read_text().splitlines()
    start = next((i for i, t in enumerate(lines) if t.strip() == heading), None)
    if start is None:
        problems.append(f"{file}: no '{heading}' followed by a table")
        return []
    rows = first_table(lines, start)
    more = next((i for i, t in enumerate(lines) if t.strip() == heading + ", continued"), None)
    return rows + (first_table(lines, more) if more is not None else [])


def first_table(lines, start):
    """(line number, cells) for each body row of the first table after line index `start`."""
    rows, in_table = [], False
    for i in range(start + 1, len(lines)):
        text = lines[i].strip()
        if text.startswith("|"):
            cells = [c.strip() for c in text.strip("|").split("|")]
            if in_table and not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append((i + 1, cells))
            in_table = True
        elif in_table or text.startswith("#"):
            break
    return rows


def compare(file, got, want, problems):
    """got: [(line, key)]; want: [(key, lesson)]. Reports missing, extra and misordered rows."""
    got_keys = [k for _, k in got]
    want_keys = [k for k, _ in want]
    for key, lesson in want:
        if key not in got_keys:
            problems.append(f"{file}: no row for {key}, which {lesson.where()} lists")
    for line, key in got:
        if key not in want_keys:
            problems.append(f"{file}:{line}: row {key} is not a lesson of chapters/lessons.txt")
    common_got = [(line, k) for line, k in got if k in want_keys]
    common_want = [(k, l) for k, l in want if k in got_keys]
    for (line, key), (want_key, lesson) in zip(common_got, common_want):
        if key != want_key:
            problems.append(f"{file}:{line}: row {key} stands where {lesson.where()} has "
                            f"{want_key}: the rows are not in the table's order")
            break


def chapter_key(lesson, folders):
    return f"{lesson.chapter} {folders[lesson.chapter].name[3:]}" if lesson.chapter in folders else lesson.name


def check_readme(root, lessons, folders, problems):
    file = "README.md"
    got = []
    for line, cells in table_rows(root, file, "## Syllabus", problems):
        number, lesson = cells[0], cells[1]
        if re.fullmatch(r"\d\d", number):
            m = re.fullmatch(r"\[([a-z0-9_]+)\]\(chapters/(\d\d_[a-z0-9_]+)/README\.md\)", lesson)
            if not m or m.group(2) != f"{number}_{m.group(1)}":
                problems.append(f"{file}:{line}: chapter {number}'s lesson cell should read "
                                f"[name](chapters/{number}_name/README.md), got: {lesson}")
                continue
            got.append((line, f"{number} {m.group(1)}"))
            decks = re.findall(r"\(slides/decks/([^)]+)\)", cells[3] if len(cells) > 3 else "")
            if decks != [f"{number}_{m.group(1)}.md"]:
                problems.append(f"{file}:{line}: chapter {number}'s slides cell should link "
                                f"slides/decks/{number}_{m.group(1)}.md")
        else:
            m = re.match(r"`([a-z0-9_-]+)`", lesson)
            got.append((line, m.group(1) if m else lesson))
    want = [(chapter_key(l, folders) if l.chapter else l.name, l) for l in lessons if not l.exercise]
    compare(file, got, want, problems)


def check_chapter_list(root, file, heading, key_of_row, lessons, folders, problems):
    """A table that lists the chapters: key_of_row(cells) is "NN name", or None for other rows."""
    got = [(line, key) for line, cells in table_rows(root, file, heading, problems)
           if (key := key_of_row(cells))]
    want = [(chapter_key(l, folders), l) for l in lessons if l.chapter and not l.exercise]
    compare(file, got, want, problems)


def deck_row_key(cells):
    """slides/README.md's deck list: [NN_name.md](decks/NN_name.md), the introduction aside."""
    m = re.fullmatch(r"\[(\d\d)_([a-z0-9_]+)\.md\]\(decks/\1_\2\.md\)", cells[0])
    return f"{m.group(1)} {m.group(2)}" if m and m.group(1) != "00" else None


def check_deck_files(root, problems):
    """slides/README.md lists every deck of slides/decks/, and only decks that exist."""
    file = "slides/README.md"
    rows = table_rows(root, file, "# Slides", problems)
    listed = {}
    for line, cells in rows:
        m = re.fullmatch(r"\[([0-9a-z_]+\.md)\]\(decks/([0-9a-z_]+\.md)\)", cells[0])
        if not m or m.group(1) != m.group(2):
            problems.append(f"{file}:{line}: a deck row starts [NN_name.md](decks/NN_name.md), got: {cells[0]}")
            continue
        listed[m.group(1)] = line
        if not (root / "slides/decks" / m.group(1)).is_file():
            problems.append(f"{file}:{line}: lists {m.group(1)}, which is not in slides/decks/")
    for deck in sorted(p.name for p in (root / "slides/decks").glob("*.md")):
        if deck not in listed:
            problems.append(f"{file}: the deck list has no row for slides/decks/{deck}")


CMAKE_KEYWORDS = re.compile(r"^[A-Z][A-Z_]+$")  # the next property name ends a LABELS list


def cmake_files(root):
    for path in sorted(root.rglob("CMakeLists.txt")) + sorted(root.rglob("*.cmake")):
        rel = path.relative_to(root).parts
        if rel[0] in ("build", ".git") or "node_modules" in rel or "fixtures" in rel:
            continue
        yield path


def cmake_test_labels(root):
    """{label: [where]} for every label the CMake files give a test."""
    texts = {p: re.sub(r"#[^\n]*", "", p.read_text()) for p in cmake_files(root)}
    functions = {}  # name -> parameter names
    for text in texts.values():
        for m in re.finditer(r"\bfunction\(\s*(\w+)([^)]*)\)", text):
            functions[m.group(1)] = m.group(2).split()
    labels = {}
    for path, text in texts.items():
        for m in re.finditer(r"\bLABELS\s+((?:[^\s)]+\s*)+?)(?=\)|\s[A-Z][A-Z_]+\s)", text):
            for token in m.group(1).split():
                if CMAKE_KEYWORDS.match(token):
                    break
                for value in token.strip('"').split(";"):
                    var = re.fullmatch(r"\$\{(\w+)\}", value)
                    if not var:
                        labels.setdefault(value, []).append(str(path.relative_to(root)))
                        continue
                    # ${label} inside a function: the argument its callers pass in that place.
                    for name, params in functions.items():
                        if var.group(1) not in params:
                            continue
                        k = params.index(var.group(1))
                        for other, body in texts.items():
                            for call in re.finditer(r"\b" + name + r"\(([^)]*)\)", body):
                                args = call.group(1).split()
                                if len(args) > k and args[k] != "${" + var.group(1) + "}":
                                    labels.setdefault(args[k].strip('"'), []).append(
                                        str(other.relative_to(root)))
    return labels


def check_labels(root, problems):
    file = "slides/decks/00_introduction.md"
    lines = (root / file).read_text().splitlines()
    at = [(i + 1, t) for i, t in enumerate(lines) if t.startswith("Labels:")]
    if len(at) != 1:
        problems.append(f"{file}: want one line starting 'Labels:' that lists the test labels, found {len(at)}")
        return
    line, text = at[0]
    listed = re.findall(r"`([a-z0-9_-]+)`", text)
    labels = cmake_test_labels(root)
    if not labels:
        problems.append("no LABELS found in the CMake files: the label reader is broken")
        return
    for label in sorted(set(labels) - set(listed)):
        problems.append(f"{file}:{line}: the labels lack `{label}`, which {labels[label][0]} gives tests")
    for label in listed:
        if label not in labels:
            problems.append(f"{file}:{line}: `{label}` is a label no CMake file gives a test")
    if len(listed) != len(set(listed)):
        problems.append(f"{file}:{line}: a label is listed twice")


def check_cheatsheet(root, lessons, problems):
    file = "CHEATSHEET.md"
    path = root / file
    if not path.is_file():
        problems.append(f"{file} does not exist")
        return
    names = {l.name for l in lessons}
    chapters = {l.chapter for l in lessons if l.chapter and not l.exercise}
    ch_column = None
    for number, text in enumerate(path.read_text().splitlines(), 1):
        cells = [c.strip() for c in text.strip().strip("|").split("|")] if text.strip().startswith("|") else None
        if cells and "Ch" in cells:
            ch_column = cells.index("Ch")
        elif not cells:
            ch_column = None
        elif ch_column is not None and ch_column < len(cells) and not re.fullmatch(r":?-+:?", cells[ch_column]):
            for chapter in re.findall(r"\d+", cells[ch_column]) or [cells[ch_column]]:
                if chapter not in chapters:
                    problems.append(f"{file}:{number}: chapter '{chapter}' is not a chapter of chapters/lessons.txt")
        for m in re.finditer(r"\./tutorial (?:run|check|reset)((?: \[?\|? ?[0-9a-z][0-9a-z-]*\]?)+)", text):
            for name in re.findall(r"[0-9a-z][0-9a-z-]*", m.group(1)):
                if name not in names:
                    problems.append(f"{file}:{number}: ./tutorial names '{name}', which is not a lesson of "
                                    f"chapters/lessons.txt")


def main():
    if len(sys.argv) > 2 or sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
        return 0 if sys.argv[1:] in (["-h"], ["--help"]) else 2
    root = Path(sys.argv[1]) if len(sys.argv) == 2 else Path(__file__).resolve().parents[2]
    problems = []
    lessons = read_table(root, problems)
    folders = check_table(root, lessons, problems)
    check_readme(root, lessons, folders, problems)
    check_chapter_list(root, "slides/decks/00_introduction.md", "## The syllabus",
                       lambda cells: " ".join(cells[:2]), lessons, folders, problems)
    check_chapter_list(root, "slides/README.md", "# Slides", deck_row_key, lessons, folders, problems)
    check_deck_files(root, problems)
    check_labels(root, problems)
    check_cheatsheet(root, lessons, problems)
    for problem in problems:
        print(problem)
    if problems:
        print(f"FAILED: {len(problems)} disagreement(s) with chapters/lessons.txt, the CMake files or slides/decks/")
        return 1
    print(f"OK: README.md, the introduction deck (its syllabus and test labels), slides/README.md and "
          f"CHEATSHEET.md follow chapters/lessons.txt and the CMake files ({len(lessons)} lessons)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
