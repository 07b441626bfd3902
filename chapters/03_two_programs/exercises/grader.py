"""Chapter 03's exercises, graded by what the ranks print (./tutorial check 03-ex1, 03-ex2).

Exercise 1 is one program started two ways, so its runner starts it both: by hand, one process
per rank with --rank and --world-size and no launcher's variables (as two terminals do), then
under ddprun with no flags. Exercise 2 runs under ddprun; its ranks call init late on purpose,
and the judge reads the times they print.
"""
import shlex

from grading import Exercise, Fail, free_port, run_ddprun, run_together

# What a launcher sets, unset for the processes started by hand: nothing tells them their rank.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                      "SLURM_NTASKS")
BY_HAND_TIMEOUT_S = 15  # each process's --timeout: a rank whose partner never comes stops soon


def run_by_hand_then_launched(bin_dir, program, world, exercise):
    """`program --rank r --world-size W` for every r, started together with the highest rank
    first (as someone switching terminals), then `ddprun ... program` with no flags. Returns the
    run by hand, with the launched one as its `launched`."""
    unset = [f"-u{name}" for name in LAUNCHER_VARIABLES]
    commands = [["env", *unset, program, "--rank", str(r), "--world-size", str(world),
                 "--timeout", str(BY_HAND_TIMEOUT_S), *exercise.args]
                for r in reversed(range(world))]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    by_hand = run_together(commands, world, exercise.deadline_s, env)
    if by_hand.returncode != 0:
        raise Fail(f"started by hand on {world} ranks (`{shlex.join(commands[-1][len(unset) + 1:])}`"
                   f" and the others, no RANK or WORLD_SIZE set), a rank exited with code "
                   f"{by_hand.returncode}. {by_hand.report()}",
                   "started by hand, nothing sets RANK and WORLD_SIZE: the flags are all a "
                   "process knows of its rank and the world size")
    by_hand.launched = run_ddprun(bin_dir, program, world, list(exercise.args),
                                  exercise.deadline_s)
    if by_hand.launched.returncode != 0:
        raise Fail(f"under ddprun on {world} ranks (no flags), a rank exited with code "
                   f"{by_hand.launched.returncode}. {by_hand.launched.report()}",
                   "under ddprun no flag is given: then the launcher's variables must decide")
    return by_hand


def judge_one_program(run):
    w = run.world
    for how, job, source in (("by hand", run, "--rank"), ("under ddprun", run.launched, "RANK")):
        for rank in range(w):
            right = f"Rank: {rank}, World size: {w} (rank from {source})"
            said = job.value(rank, r"^(Rank: .*)$", str, "Rank: R, World size: W")
            if said != right:
                raise Fail(f"{how}, the process of rank {rank} says '{said}'; it should say "
                           f"'{right}'")
            total = job.value(rank, r"^all_reduce\(rank \+ 1\) = (.*)$", str,
                              "all_reduce(rank + 1) = ...")
            if total != f"tensor([{w * (w + 1) // 2}])":
                raise Fail(f"{how}, rank {rank}'s all_reduce(rank + 1) is {total}; over {w} ranks "
                           f"it is tensor([{w * (w + 1) // 2}])")


def judge_late_arrival(run):
    w, stagger_ms = run.world, int(STAGGER_MS)
    called, returned, latest = [], [], []
    for rank in range(w):
        times = run.value(rank, r"init called at (\d+ ns, returned at \d+) ns", str,
                          "init called at T ns, returned at T ns")
        c, _, r = times.partition(" ns, returned at ")
        called.append(int(c))
        returned.append(int(r))
        latest.append(run.value(rank, r"the last rank called init at (-?\d+) ns", int,
                                "the last rank called init at T ns"))
    last = max(range(w), key=lambda r: called[r])
    for rank in range(w):
        late_ms = (called[rank] - called[0]) / 1e6
        if late_ms < rank * stagger_ms - 150:
            raise Fail(f"rank {rank} says it called init {late_ms:.0f} ms after rank 0; it slept "
                       f"{rank * stagger_ms} ms first",
                       "a late rank sleeps first: its call time is the moment it calls init, "
                       "after its sleep")
        if latest[rank] != called[last]:
            raise Fail(f"rank {rank} says the last rank called init at {latest[rank]} ns; the "
                       f"last call was rank {last}'s, at {called[last]} ns",
                       "every rank needs the latest of all the ranks' call times: which "
                       "reduction of them gives the latest?")
        if returned[rank] < called[last]:
            raise Fail(f"rank {rank} says init returned at {returned[rank]} ns, before rank "
                       f"{last} called it at {called[last]} ns",
                       "init returns only once every rank has called it: when is the return "
                       "time taken?")


STAGGER_MS = "300"

EXERCISES = {
    "ex1": Exercise(
        title="one program for both ranks",
        judge=judge_one_program,
        worlds=(2, 3),
        runner=run_by_hand_then_launched,
        hint="the flags when they are given, the launcher's variables when they are not"),
    "ex2": Exercise(
        title="ranks that start late",
        judge=judge_late_arrival,
        worlds=(2, 3),
        args=("--stagger-ms", STAGGER_MS),
        hint="init waits for the last rank: time its call and its return, and share the "
             "latest call with every rank"),
}
