"""The repository's files, with git or without it.

  repo_files(root, pattern=None)   paths relative to root, sorted

In a git checkout: the files git knows of, tracked or new and not ignored (matching the git
pathspec `pattern`, e.g. "*.py"). Where git is missing or root is not a checkout (the fresh
Debian root of ./tutorial test --fresh, a check's own scratch tree): every file below root but
those in build/ and in hidden folders (matching the glob `pattern` by name).
"""
import subprocess
from pathlib import Path


def repo_files(root, pattern=None):
    root = Path(root)
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others",
                                 "--exclude-standard", *([pattern] if pattern else [])],
                                capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        listed = None
    if listed is not None and listed.returncode == 0:
        return sorted(p for p in listed.stdout.splitlines() if (root / p).is_file())
    return sorted(str(p.relative_to(root)) for p in root.rglob(pattern or "*")
                  if p.is_file() and not any(part == "build" or part.startswith(".")
                                             for part in p.relative_to(root).parts))
