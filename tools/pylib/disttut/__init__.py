"""disttut: the project's own Python helpers, written once for tools/, bench/, tests/ and the
chapters' check scripts.

  disttut.lessons    the lesson table, chapters/lessons.txt, parsed strictly (read_table)
  disttut.readme     what a chapter README's reader reads on the main path (main_path)
  disttut.ports      free_port, free_ports: ports nothing listens on now
  disttut.processes  start, finish, run, stop_group: processes with a deadline, stopped whole
                     (their process groups) when it passes
  disttut.ddprun     ddprun's command line (ddprun, ddprun_node), and a run of it with a deadline
  disttut.tree       repo_files: the repository's files, from git or, without it, from the tree

Only Python's standard library is used. A script reaches the package by adding ONE folder,
tools/pylib, to its path, by a path relative to its own (no .pth file, no install), e.g. from
tools/grader/ or tests/chapters/:

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "pylib"))
    from disttut.ports import free_port  # noqa: E402

The package imports nothing from tests/ (tools never import a test). The chapters' twins
(chapters/NN_name/twin.py) do not import it either: a twin is a program a reader copies and runs
alone, so the few lines it needs (a free port, say) stay in the twin.
"""
