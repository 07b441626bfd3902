"""The lesson table, chapters/lessons.txt: the syllabus, written once, parsed strictly here.

  read_table(root, problems)   [Lesson] in the table's order; each row that breaks the table's
                               rules adds a line to `problems` naming chapters/lessons.txt:LINE

A row is six fields separated by '|': lesson | program | ranks | kind | needs | summary. CMake
reads the same table (chapters/CMakeLists.txt, dist_read_lessons), and so do ./tutorial and the
slides' build; the test `syllabus` (tests/readme/check_syllabus.py) checks the rest of the
repository against it.
"""
import re

KINDS = ("ddprun", "driver", "two_programs", "netns")
RANKS = re.compile(r"^([1-9]\d*x)?[1-9]\d*(,([1-9]\d*x)?[1-9]\d*)*$")
NAME = re.compile(r"^(\d\d)(-ex([1-9]\d*))?$|^[a-z][a-z0-9_]*$")


class Lesson:
    def __init__(self, line, fields):
        self.line = line
        self.name, self.program, self.ranks, self.kind, self.needs, self.summary = fields
        m = re.match(r"^(\d\d)(?:-(ex\d+))?$", self.name)
        self.chapter = m.group(1) if m else None  # "04" for 04 and 04-ex1
        self.exercise = m.group(2) if m else None  # "ex1" for 04-ex1

    def where(self):
        return f"chapters/lessons.txt:{self.line} ({self.name})"


def read_table(root, problems):
    lessons = []
    for number, text in enumerate((root / "chapters/lessons.txt").read_text().splitlines(), 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in text.split("|", 5)]
        if len(fields) != 6 or not all(fields):
            problems.append(f"chapters/lessons.txt:{number}: want six fields separated by '|' "
                            f"(lesson | program | ranks | kind | needs | summary), got: {text}")
            continue
        lesson = Lesson(number, fields)
        if not NAME.match(lesson.name):
            problems.append(f"{lesson.where()}: a lesson is NN, NN-exK or a lowercase word")
        if lesson.kind not in KINDS:
            problems.append(f"{lesson.where()}: kind '{lesson.kind}' is not one of {', '.join(KINDS)}")
        if not RANKS.match(lesson.ranks):
            problems.append(f"{lesson.where()}: ranks '{lesson.ranks}' is not N, N,M or MxN")
        if lesson.kind == "ddprun" and not lesson.ranks.isdigit():
            problems.append(f"{lesson.where()}: a ddprun lesson's ranks is one number (--nproc-per-node)")
        if any(l.name == lesson.name for l in lessons):
            problems.append(f"{lesson.where()}: listed twice")
        lessons.append(lesson)
    return lessons

