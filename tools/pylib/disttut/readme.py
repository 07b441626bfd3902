"""What a chapter README's reader reads on the way through, its main path.

  main_path(text)   the README without fenced code blocks, collapsed <details> deep dives and
                    HTML comments (each replaced by as many newlines, so line numbers hold)

The test `chapter_form` (tests/readme/check_chapter_form.py) counts its words against the
1,500-word budget; tools/workshop/timings.py turns the same words into reading minutes.
"""
import re


def main_path(text):
    """The text a reader reads on the way through: without fenced code blocks, collapsed
    <details> blocks and HTML comments (replaced by as many newlines, so line numbers hold)."""
    def blank(m):
        return "\n" * m.group(0).count("\n")
    text = re.sub(r"^\s*```.*?^\s*```", blank, text, flags=re.S | re.M)
    text = re.sub(r"<details>.*?</details>", blank, text, flags=re.S)
    return re.sub(r"<!--.*?-->", blank, text, flags=re.S)
