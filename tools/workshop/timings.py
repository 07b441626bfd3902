#!/usr/bin/env python3
"""Minutes per chapter and per exercise, and the workshop agendas built from them (INSTRUCTOR.md).

  timings.py measure BIN_DIR   run every chapter lesson (./tutorial run NN) and grade every
                               exercise's solution, timing each; writes tools/workshop/measured.toml
  timings.py write             rewrite INSTRUCTOR.md's generated blocks (the table, the agendas)
                               and every chapter README's "**Time:**" line
  timings.py check             exit 1 if INSTRUCTOR.md's generated blocks or a README's Time line
                               differ from what this script computes now, if a lesson or exercise
                               of chapters/lessons.txt has no measurement, if an agenda overruns
                               its slot, if the guide names a slide, lesson or exercise that does
                               not exist, or if a deck states a time of its own

Every time estimate of the course comes from here: a README's Time line (reading its main path,
running the lesson, its first exercise), INSTRUCTOR.md's table and agendas. Decks state none.

What is counted (deterministic, from the repository): the slides of each deck and the ones the
guide's "Show" line names; the words a participant reads for an exercise (its "Try this" item)
and the lines of its starter; the lines that differ between starter and solution. What is
measured (measured.toml, by `measure` on a real machine): each lesson's run and each solution's
grading, in wall seconds, and the build of one exercise program. The MODEL below turns both into
minutes; its constants are assumptions, stated in INSTRUCTOR.md, to be replaced by what a room
really takes.
"""
import difflib
import math
import os
import re
import subprocess
import sys
import time
import tomllib
from collections import namedtuple
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "INSTRUCTOR.md"
MEASURED = ROOT / "tools/workshop/measured.toml"
sys.path.insert(0, str(ROOT / "tools" / "pylib"))
from disttut.lessons import read_table  # noqa: E402  (the lesson table, parsed once)
from disttut.readme import main_path  # noqa: E402  (what a README's reader reads)

MODEL = {
    "slide_min": 1.5,        # presenting one slide, with a question or two
    "demo_talk_min": 2.0,    # typing a demo and talking over its output, beside the run itself
    "read_wpm": 150,         # reading an exercise's task (technical prose)
    "read_lines_per_min": 20,  # reading the starter's code
    "write_min_per_line": 1.5,  # writing one line of the solution (thinking included)
    "attempts": 3,           # builds and gradings before a PASS
    "round_to_min": 5,       # agenda slots are whole multiples of this
    "readme_wpm": 150,       # reading a chapter README's main path (technical prose, as above)
}

# The agendas: (what, item). An item is "present NN" (its Show slides and demo), "deck NN" (the
# whole deck and demo), "exercise NN-exK", or a fixed slot "name=minutes".
AGENDAS = {
    "90 minutes": (90, [
        "welcome=5", "present 00", "present 04", "exercise 04-ex1", "present 08",
        "exercise 08-ex2", "wrap-up and questions=5"]),
    "3 hours": (180, [
        "welcome=5", "present 00", "present 01", "present 04", "exercise 04-ex1", "break=10",
        "present 05", "exercise 05-ex2", "present 07", "exercise 07-ex3", "break=10",
        "present 08", "exercise 08-ex2", "wrap-up and questions=5"]),
    "one day": (480, [
        "welcome and set-up check=15", "deck 00", "deck 01", "exercise 01-ex2", "present 02",
        "present 03", "break=15", "deck 04", "exercise 04-ex1", "lunch=60", "deck 05",
        "exercise 05-ex2", "present 06", "exercise 06-ex2", "deck 07", "exercise 07-ex3",
        "break=15", "deck 08", "exercise 08-ex2", "present 09", "present 10", "exercise 10-ex3",
        "wrap-up and questions=10"]),
    "two days, day 1": (480, [
        "welcome and set-up check=15", "deck 00", "deck 01", "exercise 01-ex2", "deck 02",
        "exercise 02-ex2", "deck 03", "exercise 03-ex1", "break=15", "deck 04",
        "exercise 04-ex1", "lunch=60", "deck 05", "exercise 05-ex2", "deck 06", "exercise 06-ex2",
        "break=15", "deck 07", "exercise 07-ex3", "wrap-up and questions=10"]),
    "two days, day 2": (480, [
        "questions from day 1=10", "deck 08", "exercise 08-ex2", "deck 09", "exercise 09-ex2",
        "exercise 09-ex3", "break=15", "deck 10", "exercise 10-ex1", "exercise 10-ex3",
        "lunch=60", "deck 11", "exercise 11-ex1", "exercise 11-ex2", "break=15", "deck 12",
        "exercise 12-ex1", "wrap-up and questions=10"]),
}


def round_up(minutes):
    step = MODEL["round_to_min"]
    return max(step, step * math.ceil(minutes / step - 1e-9))


# ---- what the repository says ---------------------------------------------------------------

def lessons():
    problems = []
    table = read_table(ROOT, problems)
    if problems:
        raise SystemExit("timings: chapters/lessons.txt: " + "; ".join(problems))
    return table


def deck_path(chapter):
    found = sorted((ROOT / "slides/decks").glob(f"{chapter}_*.md"))
    return found[0] if found else None


def deck_titles(deck):
    """The `## ` titles of a deck's slides, in order, and the number of slides."""
    text = deck.read_text()
    body = text.split("\n---\n", 2)[-1] if text.startswith("---\n") else text
    slides = body.split("\n---\n")
    titles = [m.group(1).strip() for s in slides for m in re.finditer(r"^##? (.+)$", s, re.M)]
    return titles, len(slides)


# One lesson's section of INSTRUCTOR.md: the deck its **Show** line names, the slide titles it
# shows, the lessons it runs, and its text with whitespace collapsed.
Section = namedtuple("Section", "deck shown demos text")
NO_SECTION = Section(None, [], [], "")


def guide_sections():
    """INSTRUCTOR.md's lesson sections: key ("00" for smoke and the introduction, NN, or a lesson
    name) -> Section."""
    sections = {}
    text = GUIDE.read_text()
    for m in re.finditer(r"^### (\d\d|smoke|[a-z]+)\b.*?(?=^### |^## |\Z)", text, re.M | re.S):
        key = "00" if m.group(1) == "smoke" else m.group(1)
        show = re.search(r"^\*\*Show\*\* \(deck (\S+?)\):(.*)$", m.group(0), re.M)
        sections[key] = Section(deck=ROOT / show.group(1) if show else None,
                                shown=re.findall(r'"([^"]+)"', show.group(2)) if show else [],
                                demos=re.findall(r"^\./tutorial run (\S+)", m.group(0), re.M),
                                text=" ".join(m.group(0).split()))
    return sections


def stale_citations(key, text):
    """The guide's "(README, ...)" citations in chapter `key`'s section that name nothing in that
    chapter's README: a quoted title that is no heading, deep dive or bold lead-in there, a
    section that is not a heading, a step that does not exist. (Its "deck, ..." parts are the
    slide titles checked above.)"""
    folders = sorted((ROOT / "chapters").glob(f"{key}_*/README.md"))
    if not folders:
        return []
    readme = folders[0].read_text()
    plain = lambda s: " ".join(re.sub(r"<[^>]+>|`|\*", "", s).split()).lower()  # noqa: E731
    titles = [plain(s) for s in re.findall(r"^#+ (.*)$", readme, re.M)
              + re.findall(r"<summary>(.*?)</summary>", readme)
              + re.findall(r"\*\*([^*]+)\*\*", readme)]
    headings = {plain(s) for s in re.findall(r"^## (.*)$", readme, re.M)}
    found = []
    for cite in re.findall(r"\(README, ([^()]*(?:\([^()]*\)[^()]*)*)\)", text):
        readme_part = re.split(r";\s*deck\b", cite)[0]
        for quoted in re.findall(r'"([^"]+)"', readme_part):
            if not any(plain(quoted) in title for title in titles):
                found.append(f'INSTRUCTOR.md: chapter {key}\'s section cites (README, "{quoted}"), '
                             f"which names no heading, deep dive or bold title of its README")
        for section in re.findall(r"\b(Goal|Run it|Expected output|Walk-through|Pitfalls|"
                                  r"Try this|Next)\b", re.sub(r'"[^"]*"', "", readme_part)):
            if section.lower() not in headings:
                found.append(f"INSTRUCTOR.md: chapter {key}'s section cites the README's "
                             f"{section}, which it does not have")
        for step in re.findall(r"\bStep (\d+)\b", re.sub(r'"[^"]*"', "", readme_part)):
            if f"Step {step}" not in readme:
                found.append(f"INSTRUCTOR.md: chapter {key}'s section cites the README's Step "
                             f"{step}, which it does not have")
    return found


def try_this_item(chapter_dir, short):
    """The words of the "Try this" item whose starter is exercises/<short>_*.cpp (no solution)."""
    readme = (chapter_dir / "README.md").read_text()
    section = readme.split("\n## Try this", 1)[-1].split("\n## ", 1)[0]
    section = re.sub(r"<details>.*?</details>", "", section, flags=re.S)
    for item in re.split(r"\n(?=\d+\. )", section):
        if f"exercises/{short}_" in item:
            return item
    return ""


def exercise_counts(lesson):
    chapter_dir = next((ROOT / "chapters").glob(f"{lesson.chapter}_*"))
    starters = sorted(chapter_dir.glob(f"exercises/{lesson.exercise}_*.cpp"))
    if not starters:
        return None
    starter = starters[0].read_text().splitlines()
    solution_path = chapter_dir / "solutions" / starters[0].name
    solution = solution_path.read_text().splitlines() if solution_path.exists() else []
    # The lines a participant writes: the solution's non-blank lines that the starter lacks.
    changed = sum(1 for line in difflib.unified_diff(starter, solution, lineterm="", n=0)
                  if line.startswith("+") and not line.startswith("+++") and line[1:].strip())
    words = len(re.findall(r"[A-Za-z0-9_'’-]+", try_this_item(chapter_dir, lesson.exercise)))
    return {"words": words, "lines": len(starter), "changed": changed}


# ---- the minutes ------------------------------------------------------------------------------

def chapter_minutes(chapter, slides, run_s, whole_deck):
    """A chapter presented: `slides` of its deck, then its demo (the introduction's short form
    has none: smoke is the next chapter's warm-up)."""
    demo = 0.0 if chapter == "00" and not whole_deck else MODEL["demo_talk_min"] + run_s / 60
    return slides * MODEL["slide_min"] + demo


def exercise_minutes(counts, grade_s, build_s):
    read = counts["words"] / MODEL["read_wpm"] + counts["lines"] / MODEL["read_lines_per_min"]
    write = counts["changed"] * MODEL["write_min_per_line"]
    feedback = MODEL["attempts"] * (grade_s + build_s) / 60
    return read + write + feedback


def compute(measured, problems):
    table = lessons()
    sections = guide_sections()
    chapters, exercises = {}, {}
    for lesson in table:
        if lesson.chapter and not lesson.exercise:
            if deck_path(lesson.chapter) is None:
                problems.append(f"chapter {lesson.chapter} has no deck in slides/decks/")
                continue
            if lesson.chapter not in measured["run"]:
                problems.append(f"{MEASURED.relative_to(ROOT)} has no run time for {lesson.name} "
                                "(run: tools/workshop/timings.py measure build/cpu/bin)")
            chapters[lesson.chapter] = lesson
        elif lesson.exercise:
            counts = exercise_counts(lesson)
            if counts is None:
                problems.append(f"{lesson.name} has no starter (chapters/{lesson.chapter}_*/"
                                f"exercises/{lesson.exercise}_*.cpp)")
                continue
            if lesson.name not in measured["grade"]:
                problems.append(f"{MEASURED.relative_to(ROOT)} has no grading time for "
                                f"{lesson.name} (run: tools/workshop/timings.py measure "
                                "build/cpu/bin)")
            exercises[lesson.name] = (lesson, counts)
    if "smoke" not in measured["run"]:
        problems.append(f"{MEASURED.relative_to(ROOT)} has no run time for smoke")

    names = {l.name for l in table}
    for key, (deck, shown, demos, _) in sections.items():
        if deck is not None and not deck.is_file():
            problems.append(f"INSTRUCTOR.md: section {key}'s **Show** line names {deck}, which "
                            "does not exist")
            continue
        titles = deck_titles(deck)[0] if deck else []
        for title in shown:
            if title not in titles:
                problems.append(f"INSTRUCTOR.md: section {key} shows \"{title}\", which is not a "
                                f"slide title of {deck.relative_to(ROOT)}")
        for demo in demos:
            if demo not in names:
                problems.append(f"INSTRUCTOR.md: section {key}'s demo runs '{demo}', which is not "
                                "a lesson of chapters/lessons.txt")
    for key, section in sections.items():
        problems += stale_citations(key, section.text)
    for name, (lesson, _) in exercises.items():
        wanted = f"`{name}` ({lesson.summary})"
        if wanted not in sections.get(lesson.chapter, NO_SECTION).text:
            problems.append(f"INSTRUCTOR.md: chapter {lesson.chapter}'s section does not name "
                            f"{wanted} (its row in chapters/lessons.txt)")
    for key in ["00", *chapters]:
        section = sections.get(key, NO_SECTION)
        if section.deck != deck_path(key) or not section.shown:
            problems.append(f"INSTRUCTOR.md: chapter {key} needs a section with a **Show** line "
                            f"naming slides of {deck_path(key).relative_to(ROOT)}")

    rows = []
    for key in ["00", *chapters]:
        shown = len(sections.get(key, NO_SECTION).shown)
        _, slides = deck_titles(deck_path(key))
        run_s = measured["run"].get("smoke" if key == "00" else key, 0.0)
        rows.append(("chapter", key, slides, shown, run_s,
                     chapter_minutes(key, shown, run_s, False),
                     chapter_minutes(key, slides, run_s, True)))
    for name, (lesson, counts) in exercises.items():
        grade_s = measured["grade"].get(name, 0.0)
        rows.append(("exercise", name, counts, grade_s,
                     exercise_minutes(counts, grade_s, measured["build_s"])))
    minutes = {}
    for row in rows:
        if row[0] == "chapter":
            minutes[f"present {row[1]}"], minutes[f"deck {row[1]}"] = row[5], row[6]
        else:
            minutes[f"exercise {row[1]}"] = row[4]
    return rows, minutes


# ---- the generated blocks ---------------------------------------------------------------------

def table_block(rows, measured):
    out = ["| chapter | slides (shown in a short workshop) | run, s | minutes: short / whole deck |",
           "|---|---|---|---|"]
    for row in rows:
        if row[0] == "chapter":
            _, key, slides, shown, run_s, short, whole = row
            name = "00 (introduction, smoke)" if key == "00" else key
            out.append(f"| {name} | {slides} ({shown}) | {run_s:.1f} | {round_up(short)} / "
                       f"{round_up(whole)} |")
    out += ["", "| exercise | task words | starter lines | lines to write | grading, s | "
            "minutes |", "|---|---|---|---|---|---|"]
    for row in rows:
        if row[0] == "exercise":
            _, name, counts, grade_s, mins = row
            out.append(f"| {name} | {counts['words']} | {counts['lines']} | {counts['changed']} | "
                       f"{grade_s:.1f} | {round_up(mins)} |")
    out += ["", f"Measured {measured['date']} on {measured['machine']}; building one exercise "
            f"program took {measured['build_s']:.1f} s."]
    return "\n".join(out)


def agenda_block(name, minutes, problems):
    slot, items = AGENDAS[name]
    out = ["| start | minutes | what |", "|---|---|---|"]
    clock = 0
    for item in items:
        what, _, fixed = item.partition("=")
        if fixed:
            length = int(fixed)
        elif what in minutes:
            length = round_up(minutes[what])
        else:
            problems.append(f"agenda '{name}': no minutes for '{what}'")
            continue
        kind, _, key = what.partition(" ")
        label = {"present": f"chapter {key}, the slides the guide shows, and its demo",
                 "deck": f"chapter {key}, the whole deck and its demo",
                 "exercise": f"exercise `{key}` (`./tutorial check {key}`)"}.get(kind, what)
        if key == "00" and kind in ("present", "deck"):
            label = "the introduction deck and `./tutorial run smoke`"
        out.append(f"| {clock // 60}:{clock % 60:02d} | {length} | {label} |")
        clock += length
    out.append(f"| {clock // 60}:{clock % 60:02d} | | end ({slot - clock} minutes to spare of "
               f"{slot}) |")
    if clock > slot:
        problems.append(f"agenda '{name}' takes {clock} minutes, more than its {slot}")
    return "\n".join(out)


def blocks(problems):
    measured = read_measured()
    rows, minutes = compute(measured, problems)
    made = {"table": table_block(rows, measured)}
    for name in AGENDAS:
        made[f"agenda {name}"] = agenda_block(name, minutes, problems)
    return made


def read_measured():
    if not MEASURED.exists():
        return {"run": {}, "grade": {}, "build_s": 0.0, "date": "never", "machine": "-"}
    data = tomllib.loads(MEASURED.read_text())
    return {"run": data.get("run", {}), "grade": data.get("grade", {}),
            "build_s": float(data.get("build_s", 0.0)), "date": data.get("date", "?"),
            "machine": data.get("machine", "?")}


BLOCK = re.compile(r"(<!-- timings: (.+?) -->\n)(.*?)(<!-- /timings -->)", re.S)


def replace_blocks(text, made, problems):
    seen = set()

    def sub(m):
        seen.add(m.group(2))
        if m.group(2) not in made:
            problems.append(f"INSTRUCTOR.md: no generated block is called '{m.group(2)}'")
            return m.group(0)
        return f"{m.group(1)}{made[m.group(2)]}\n{m.group(4)}"

    new = BLOCK.sub(sub, text)
    for name in made:
        if name not in seen:
            problems.append(f"INSTRUCTOR.md has no block <!-- timings: {name} -->")
    return new


# ---- the chapters' Time lines -----------------------------------------------------------------

TIME_LINE = re.compile(r"^\*\*Time:\*\* .*$", re.M)
DECK_TIME = re.compile(r"\b[Aa]bout \d+ minutes\b|\b\d+ minutes (?:with|of) (?:the )?exercises\b")


def time_lines(measured, minutes):
    """Each chapter README's Time line: reading its main path, running the lesson (the demo's
    talk and run), its first exercise; each rounded up as the agendas are, and their sum."""
    lines = {}
    for lesson in lessons():
        if not lesson.chapter or lesson.exercise:
            continue
        chapter_dir = next((ROOT / "chapters").glob(f"{lesson.chapter}_*"))
        words = len(main_path((chapter_dir / "README.md").read_text()).split())
        read = round_up(words / MODEL["readme_wpm"])
        run = round_up(MODEL["demo_talk_min"] + measured["run"].get(lesson.chapter, 0.0) / 60)
        exercises = sorted((name for name in minutes if name.startswith(
            f"exercise {lesson.chapter}-ex")), key=lambda n: int(n.rsplit("ex", 1)[1]))
        first = round_up(minutes[exercises[0]]) if exercises else 0
        line = (f"**Time:** about {read + run + first} minutes: {read} to read, {run} to run it"
                + (f", {first} for exercise 1" if exercises else ""))
        others = [f"{round_up(minutes[n])}" for n in exercises[1:]]
        if others:
            line += (f" (exercise{'s' if len(others) > 1 else ''} "
                     + ", ".join(f"{i + 2}: {m}" for i, m in enumerate(others)) + ")")
        line += (". [How these are estimated](../../INSTRUCTOR.md#minutes-per-chapter-and-per-"
                 "exercise).")
        lines[chapter_dir / "README.md"] = line
    return lines


def update_time_lines(lines, write, problems):
    for readme, line in lines.items():
        text = readme.read_text()
        found = TIME_LINE.search(text)
        if not found:
            problems.append(f"{readme.relative_to(ROOT)} has no '**Time:**' line")
        elif found.group(0) != line:
            if write:
                tmp = readme.with_suffix(".tmp")
                tmp.write_text(text[:found.start()] + line + text[found.end():])
                tmp.replace(readme)
            else:
                problems.append(f"{readme.relative_to(ROOT)}: its Time line is not what the model "
                                f"gives (run tools/workshop/timings.py write):\n  has:  "
                                f"{found.group(0)}\n  want: {line}")


def check_decks(problems):
    """A deck states no time of its own: the README's Time line and INSTRUCTOR.md are the one
    source, so the three cannot disagree."""
    for deck in sorted((ROOT / "slides/decks").glob("*.md")):
        for number, text in enumerate(deck.read_text().splitlines(), 1):
            m = DECK_TIME.search(text)
            if m and "timeout" not in text.lower() and "wait" not in text.lower():
                problems.append(f"{deck.relative_to(ROOT)}:{number}: states a time ('{m.group(0)}'); "
                                "times come from the README's Time line and INSTRUCTOR.md")


# ---- measuring ---------------------------------------------------------------------------------

def timed(argv, **kw):
    start = time.monotonic()
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            timeout=600, **kw)
    if result.returncode not in (0, 77):
        raise SystemExit(f"timings: {' '.join(map(str, argv))} failed:\n{result.stderr[-2000:]}")
    return round(time.monotonic() - start, 1)


def measure(bin_dir):
    bin_dir = Path(bin_dir).resolve()
    table = lessons()
    run, grade = {}, {}
    for lesson in table:
        if lesson.name == "smoke" or (lesson.chapter and not lesson.exercise):
            run[lesson.name] = timed([str(ROOT / "tutorial"), "run", lesson.name], cwd=ROOT)
            print(f"run {lesson.name}: {run[lesson.name]} s", flush=True)
        elif lesson.exercise:
            program = bin_dir / f"{lesson.program}_solution"
            grade[lesson.name] = timed([sys.executable, str(ROOT / "tools/grader/check.py"),
                                        str(bin_dir), lesson.name, "--program", str(program)])
            print(f"grade {lesson.name}: {grade[lesson.name]} s", flush=True)
    # One exercise program rebuilt after an edit: what a participant waits for before grading.
    first = next(l for l in table if l.exercise)
    starter = next((ROOT / "chapters").glob(f"{first.chapter}_*/exercises/{first.exercise}_*.cpp"))
    os.utime(starter)
    build_s = timed(["cmake", "--build", str(bin_dir.parent), "--target", first.program])
    machine = f"{os.cpu_count()} cores, {os.uname().sysname} {os.uname().machine}"
    lines = ["# Written by tools/workshop/timings.py measure: wall seconds on a real machine.",
             "# INSTRUCTOR.md's table and agendas are computed from these (timings.py write).",
             f'date = "{time.strftime("%Y-%m-%d")}"', f'machine = "{machine}"',
             f"build_s = {build_s}", "", "[run]  # ./tutorial run LESSON, the lesson's default ranks"]
    lines += [f'"{k}" = {v}' for k, v in run.items()]
    lines += ["", "[grade]  # tools/grader/check.py with the solution in the starter's place"]
    lines += [f'"{k}" = {v}' for k, v in grade.items()]
    tmp = MEASURED.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(MEASURED)
    print(f"wrote {MEASURED.relative_to(ROOT)}")


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) < 2 or argv[1] not in ("measure", "write", "check") or \
            (argv[1] == "measure") != (len(argv) == 3):
        print("usage: timings.py measure BIN_DIR | write | check (--help says more)",
              file=sys.stderr)
        return 2
    if argv[1] == "measure":
        measure(argv[2])
        return 0
    problems = []
    made = blocks(problems)
    measured = read_measured()
    update_time_lines(time_lines(measured, compute(measured, [])[1]), argv[1] == "write",
                      problems)
    check_decks(problems)
    text = GUIDE.read_text()
    new = replace_blocks(text, made, problems)
    if argv[1] == "write":
        tmp = GUIDE.with_suffix(".tmp")
        tmp.write_text(new)
        tmp.replace(GUIDE)
    elif new != text:
        diff = difflib.unified_diff(text.splitlines(), new.splitlines(), "INSTRUCTOR.md",
                                    "computed", lineterm="", n=1)
        problems.append("INSTRUCTOR.md's generated blocks are out of date (run "
                        "tools/workshop/timings.py write):\n" + "\n".join(list(diff)[:40]))
    for p in problems:
        print(f"timings: {p}")
    if not problems:
        print("timings: INSTRUCTOR.md agrees with the repository and measured.toml")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
