#!/usr/bin/env python3
"""ddprun runs Python programs as torchrun does (torch/distributed/run.py, config_from_args).

  python_programs_check.py DDPRUN

Each case runs DDPRUN at 2 ranks on a stand-in Python: a small program, named python3 and put first
on PATH (or named by PYTHON_EXEC), that prints the command line it was given and exits 0. So each
case checks the exact argv every rank gets, in order, without torch:

  SCRIPT.py ARGS                   python3 -u SCRIPT.py ARGS               (python3 from PATH)
  PYTHON_EXEC=P SCRIPT.py ARGS     P -u SCRIPT.py ARGS
  -m / --module MOD ARGS           python3 -u -m MOD ARGS
  --local-rank-arg[=underscore]    --local-rank=N (--local_rank=N) right after SCRIPT or MOD, before
                                   ARGS, where torch.distributed.launch puts it (2.x / 1.x)
  --no-python PROG.py ARGS         PROG.py ARGS, as it is
  PROG ARGS (not .py)              PROG ARGS, as it is: the chapters' programs, python3 itself
and the misuses, each refused once with exit code 2 before any rank starts: a script that is not
there, -m with --no-python, -m with a file name, a PYTHON_EXEC that cannot be run.
Exit 0 when every case holds, 1 otherwise; each run has a 60 s deadline.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
from disttut.ddprun import ddprun as ddprun_line  # noqa: E402

DEADLINE_S = 60
NPROC = 2

# The stand-in Python: one line per rank, its LOCAL_RANK, its own name and every argument, in one
# write() so that the two ranks' lines do not interleave.
STAND_IN = """#!{python}
import json, os, sys
words = [os.environ["LOCAL_RANK"], os.path.basename(sys.argv[0]), *sys.argv[1:]]
os.write(1, (json.dumps(words) + "\\n").encode())
"""


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class Check:
    def __init__(self, ddprun, folder):
        self.ddprun, self.folder, self.failures = ddprun, folder, []
        fake_bin = folder / "bin"
        fake_bin.mkdir()
        stand_in = STAND_IN.format(python=sys.executable)
        self.python3 = executable(fake_bin / "python3", stand_in)
        self.other_python = executable(folder / "other-python", stand_in)
        self.program = executable(folder / "prog", stand_in)  # a program that is not .py
        self.tool_py = executable(folder / "tool.py", stand_in)  # a .py that runs by itself
        (folder / "train.py").write_text("raise SystemExit('the stand-in runs instead')\n")
        self.env = dict(os.environ, PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
        self.env.pop("PYTHON_EXEC", None)

    def run(self, args, env=None):
        bin_dir = os.path.dirname(os.path.abspath(self.ddprun))
        return subprocess.run(ddprun_line(bin_dir, NPROC, args), cwd=self.folder,
                              env=env or self.env, capture_output=True, text=True,
                              timeout=DEADLINE_S, check=False)

    def argv(self, name, args, expected, env=None, notice=None):
        """Every local rank n was given expected(n), in order; with `notice`, ddprun said it."""
        r = self.run(args, env)
        got = {}
        for line in r.stdout.splitlines():
            try:
                words = json.loads(line)
                got[int(words[0])] = words[1:]
            except (ValueError, IndexError):
                got.setdefault("lines not from the stand-in", []).append(line)
        want = {n: expected(n) for n in range(NPROC)}
        if r.returncode != 0 or got != want:
            self.failures.append(f"{name}: ddprun {' '.join(args)}\n  exit code {r.returncode}\n"
                                 f"  wanted {want}\n  got    {got}\n{r.stderr}")
        elif notice is not None and f"ddprun: {notice}\n" not in r.stderr:
            self.failures.append(f"{name}: ddprun did not say '{notice}':\n{r.stderr}")
        else:
            print(f"ok: {name}: every rank ran {' '.join(want[NPROC - 1])}")

    def refused(self, name, args, message, env=None):
        """Exit code 2, `message` said once, and no rank started (no summary)."""
        r = self.run(args, env)
        if r.returncode != 2 or r.stderr.count(message) != 1 or "summary" in r.stderr \
                or r.stdout:
            self.failures.append(f"{name}: ddprun {' '.join(args)}: exit code {r.returncode}, "
                                 f"wanted 2 and '{message}' once\n{r.stdout}{r.stderr}")
        else:
            print(f"ok: {name}: refused: {message}")


def main(argv):
    if len(argv) != 2:
        raise SystemExit(__doc__)
    ddprun = str(Path(argv[1]).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        c = Check(ddprun, Path(tmp))
        args = ["--lr", "0.1"]

        # ---- A script: python3 from PATH, -u, the script, its arguments
        c.argv("a script", ["train.py", *args], lambda n: ["python3", "-u", "train.py", *args],
               notice="each rank runs python3 -u train.py (PYTHON_EXEC chooses another Python)")
        c.argv("a script by its path", ["./train.py"], lambda n: ["python3", "-u", "./train.py"])
        c.argv("PYTHON_EXEC", ["train.py", *args],
               lambda n: ["other-python", "-u", "train.py", *args],
               env=dict(c.env, PYTHON_EXEC=str(c.other_python)),
               notice=f"each rank runs {c.other_python} -u train.py (PYTHON_EXEC chooses "
                      "another Python)")

        # ---- A module: -m and --module
        for flag in ("-m", "--module"):
            c.argv(f"a module ({flag})", [flag, "pkg.train", *args],
                   lambda n: ["python3", "-u", "-m", "pkg.train", *args],
                   notice="each rank runs python3 -u -m pkg.train (PYTHON_EXEC chooses another "
                          "Python)")

        # ---- --local-rank-arg: right after the script or module, before its arguments
        for flag, word in (("--local-rank-arg", "--local-rank"),
                           ("--local-rank-arg=dash", "--local-rank"),
                           ("--local-rank-arg=underscore", "--local_rank")):
            c.argv(f"a script with {flag}", [flag, "train.py", *args],
                   lambda n: ["python3", "-u", "train.py", f"{word}={n}", *args])
            c.argv(f"a module with {flag}", [flag, "-m", "pkg.train", *args],
                   lambda n: ["python3", "-u", "-m", "pkg.train", f"{word}={n}", *args])
            c.argv(f"a program with {flag}", [flag, str(c.program), *args],
                   lambda n: ["prog", f"{word}={n}", *args])

        # ---- As it is: --no-python, a program that is not .py, and python3 named by hand
        c.argv("--no-python", ["--no-python", "./tool.py", *args],
               lambda n: ["tool.py", *args])
        c.argv("--no_python with --local-rank-arg=underscore",
               ["--no_python", "--local-rank-arg=underscore", "./tool.py", *args],
               lambda n: ["tool.py", f"--local_rank={n}", *args])
        c.argv("a compiled program", [str(c.program), *args], lambda n: ["prog", *args])
        c.argv("python3 named before the script", [str(c.python3), "train.py", *args],
               lambda n: ["python3", "train.py", *args])

        # ---- Misuses
        c.refused("a script that is not there", ["nope.py"],
                  "ddprun: error: cannot run the Python script nope.py: No such file or directory")
        c.refused("-m with --no-python", ["--no-python", "-m", "pkg.train"],
                  "ddprun: error: -m runs PROGRAM as a Python module, but --no-python runs it as "
                  "it is")
        c.refused("-m with a file", ["-m", "train.py"],
                  "ddprun: error: -m expects a module name like pkg.train, not a file: got "
                  "'train.py'")
        c.refused("--module=VALUE", ["--module=pkg.train"],
                  "ddprun: error: --module takes no value, got 'pkg.train'")
        c.refused("a PYTHON_EXEC that is not there", ["train.py"],
                  "ddprun: error: cannot run /nonexistent/python, the Python for train.py: No such "
                  "file or directory", env=dict(c.env, PYTHON_EXEC="/nonexistent/python"))
        c.refused("-m and no module", ["-m"], "ddprun: error: missing PROGRAM")

    for failure in c.failures:
        print("FAIL:", failure)
    print("OK" if not c.failures else f"{len(c.failures)} failure(s)")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
