#!/usr/bin/env python3
"""The project's Python helpers (tools/pylib/disttut), each against what it promises.

usage: disttut_test.py        (unittest; exit 0 when every test passes)
"""
import os
import signal
import sys
import tempfile
import time
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "pylib"))
from disttut import processes  # noqa: E402
from disttut.ddprun import ddprun, ddprun_node  # noqa: E402
from disttut.lessons import read_table  # noqa: E402
from disttut.ports import free_port, free_ports  # noqa: E402
from disttut.readme import main_path  # noqa: E402
from disttut.tree import repo_files  # noqa: E402


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


class Processes(unittest.TestCase):
    def test_finish_returns_each_exit_code_and_output(self):
        procs = {"a": processes.start(["sh", "-c", "echo out; echo err >&2; exit 3"]),
                 "b": processes.start(["true"])}
        got = processes.finish(procs, 10)
        self.assertEqual(list(got), ["a", "b"])
        self.assertEqual(got["a"], (3, "out\n", "err\n"))
        self.assertEqual(got["b"].returncode, 0)

    def test_one_deadline_for_all_not_one_each(self):
        # Processes of 1, 2.5 and 4 s under a 2 s deadline: at 2 s the last two still run. Waited
        # with 2 s each in turn, every one would end in its own time (2.5 < 1 + 2, 4 < 2.5 + 2).
        start = time.monotonic()
        procs = {i: processes.start(["sleep", str(s)]) for i, s in enumerate((1, 2.5, 4))}
        with self.assertRaises(processes.DeadlinePassed) as late:
            processes.finish(procs, 2, grace_s=1)
        self.assertEqual(late.exception.late, [1, 2])
        self.assertEqual(late.exception.results[0].returncode, 0)
        self.assertEqual(late.exception.results[2].returncode, -signal.SIGTERM)
        self.assertLess(time.monotonic() - start, 2 + 1 + 0.4)

    def test_the_deadline_stops_the_whole_group(self):
        # The shell starts a child that would outlive it; the group's SIGTERM reaches it too.
        with tempfile.TemporaryDirectory() as tmp:
            pid_file = Path(tmp) / "child"
            job = processes.start(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"])
            deadline = time.monotonic() + 5
            while not pid_file.exists() or not pid_file.read_text().strip():
                self.assertLess(time.monotonic(), deadline, "the child never started")
                time.sleep(0.01)
            child = int(pid_file.read_text())
            with self.assertRaises(processes.DeadlinePassed) as late:
                processes.run(["sh", "-c", "sleep 60"], 0.2)  # a plain one, for the message
            self.assertIn("no end within 0.2 s", str(late.exception))
            try:
                with self.assertRaises(processes.DeadlinePassed):
                    processes.finish({"job": job}, 0.2, grace_s=2)
                time.sleep(0.2)
                self.assertFalse(alive(child), "the job's child outlived the deadline")
            finally:
                if alive(child):
                    os.kill(child, signal.SIGKILL)

    def test_sigkill_follows_when_sigterm_is_ignored(self):
        job = processes.start(["sh", "-c", "trap '' TERM; sleep 60"])
        time.sleep(0.2)  # the trap is set
        start = time.monotonic()
        with self.assertRaises(processes.DeadlinePassed) as late:
            processes.finish({"job": job}, 0.1, grace_s=0.5)
        self.assertEqual(late.exception.results["job"].returncode, -signal.SIGKILL)
        self.assertLess(time.monotonic() - start, 0.1 + 2 * 0.5 + 1.0)


class Ports(unittest.TestCase):
    def test_free_ports_differ_and_can_be_bound(self):
        import socket
        ports = free_ports(5)
        self.assertEqual(len(set(ports)), 5)
        with socket.socket() as s:
            s.bind(("127.0.0.1", free_port()))


class DdprunLine(unittest.TestCase):
    def test_standalone_and_one_machine_of_several(self):
        self.assertEqual(ddprun("bin", 2, ["prog", "--x"], flags=["--max-restarts", "1"]),
                         ["bin/ddprun", "--standalone", "--nproc-per-node", "2",
                          "--max-restarts", "1", "prog", "--x"])
        self.assertEqual(ddprun_node("bin", 2, 1, 4, ["prog"], flags=["--master-port", "9"]),
                         ["bin/ddprun", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node",
                          "4", "--master-port", "9", "prog"])


class Lessons(unittest.TestCase):
    def test_the_repository_table_reads_clean(self):
        problems = []
        lessons = read_table(ROOT, problems)
        self.assertEqual(problems, [])
        self.assertIn("01", [lesson.name for lesson in lessons])

    def test_a_bad_row_is_named_by_its_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "chapters").mkdir()
            (Path(tmp) / "chapters" / "lessons.txt").write_text(
                "# comment\n01 | ch01 | 2 | ddprun | - | ok\n01 | ch01 | 2,3 | ddprun | - | again\n"
                "02 | ch02 | 2\n")
            problems = []
            lessons = read_table(Path(tmp), problems)
        self.assertEqual(len(lessons), 2)
        self.assertTrue(any(p.startswith("chapters/lessons.txt:3 (01): listed twice")
                            for p in problems), problems)
        self.assertTrue(any("ranks is one number" in p for p in problems), problems)
        self.assertTrue(any(p.startswith("chapters/lessons.txt:4: want six fields")
                            for p in problems), problems)


class Tree(unittest.TestCase):
    def test_outside_git_every_file_but_build_and_hidden_ones(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for name in ("a.py", "b.txt", "sub/c.py", "build/d.py", ".hidden/e.py"):
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text("")
            self.assertEqual(repo_files(root), ["a.py", "b.txt", "sub/c.py"])
            self.assertEqual(repo_files(root, "*.py"), ["a.py", "sub/c.py"])

    def test_in_this_checkout_the_files_git_knows(self):
        files = repo_files(ROOT, "*.py")
        self.assertIn("tools/pylib/disttut/tree.py", files)
        self.assertFalse(any(f.startswith("build/") for f in files))


class Readme(unittest.TestCase):
    def test_main_path_drops_code_details_and_comments_keeping_lines(self):
        text = "a\n```\ncode\n```\nb <!-- note -->\n<details>\nx\n</details>\nc\n"
        kept = main_path(text)
        self.assertEqual(kept.split(), ["a", "b", "c"])
        self.assertEqual(kept.count("\n"), text.count("\n"))


if __name__ == "__main__":
    unittest.main()
