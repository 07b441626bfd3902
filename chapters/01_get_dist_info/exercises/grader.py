"""Chapter 01's exercises, graded by what the ranks print (./tutorial check 01-ex1, 01-ex2).

A guard or a machine number that is right on one machine can still be wrong on two, so besides
one-machine jobs each exercise runs as "two machines" on this one: one ddprun per machine, with
--nnodes 2, its --node-rank and a shared --master-port, as the README shows.
"""
from grading import Exercise, Fail, ddprun_node, free_port, run_ddprun, run_together

# world_size -> (machines, ranks per machine) for the runs of both exercises.
LAYOUTS = {1: (1, 1), 3: (1, 3), 4: (2, 2), 6: (3, 2)}


def run_machines(bin_dir, program, world, exercise):
    """One ddprun per machine of LAYOUTS[world], started together; killed at the deadline."""
    machines, per_machine = LAYOUTS[world]
    if machines == 1:
        return run_ddprun(bin_dir, program, world, list(exercise.args), exercise.deadline_s)
    port = str(free_port())
    commands = [ddprun_node(bin_dir, machines, m, per_machine, [program, *exercise.args],
                            flags=["--master-addr", "127.0.0.1", "--master-port", port])
                for m in range(machines)]
    return run_together(commands, world, exercise.deadline_s)


def where(run, rank):
    machines, per_machine = LAYOUTS[run.world]
    return (f"(rank {rank} runs on machine {rank // per_machine} of {machines}, "
            f"{per_machine} ranks per machine)")


def judge_main_process(run):
    w = run.world
    for rank in range(w):
        line = run.value(rank, r"^(main process\? .*)$", str, "main process? ...")
        try:
            said = dict(part.split(": ") for part in line[len("main process? "):].split(", "))
        except ValueError:
            raise Fail(f"rank {rank} printed '{line}', not three 'guard: yes/no' answers",
                       "keep the starter's print lines: the grader reads them") from None
        right = {"naive guard before init": "yes", "launcher's RANK before init":
                 "yes" if rank == 0 else "no", "after init": "yes" if rank == 0 else "no"}
        for guard, answer in right.items():
            if said.get(guard) != answer:
                raise Fail(f"rank {rank} answers '{said.get(guard)}' for the {guard}; it should "
                           f"answer '{answer}' {where(run, rank)}",
                           "before init only the launcher's variables know the rank; of those, "
                           "which one numbers the processes of the whole job, not of one "
                           "machine?")
    counts = run.value(0, r"^main processes: (.*)$", str, "main processes: ...")
    right = f"naive guard before init {w}, launcher's RANK before init 1, after init 1"
    if counts != right:
        raise Fail(f"rank 0 counts '{counts}'; over the {w} processes it is '{right}'",
                   "each rank knows only its own three answers: a count over the ranks needs "
                   "every rank's, added up by a collective")


def judge_machine_and_gpu(run):
    machines, per_machine = LAYOUTS[run.world]
    for rank in range(run.world):
        line = run.value(rank, r"^(machine .*)$", str, "machine M, local_rank S")
        right = (f"machine {rank // per_machine}, local_rank {rank % per_machine} "
                 f"(cuda:{rank % per_machine} under nccl)")
        if line != right:
            raise Fail(f"rank {rank} says '{line}'; it is on '{right}' {where(run, rank)}",
                       "ranks are numbered machine by machine, local_world_size of them on each: "
                       "how many ranks come before this machine's first one?")
    taken = run.value(0, r"^ranks on each \(machine, local_rank\): (.*)$", str,
                      "ranks on each (machine, local_rank): tensor(...)")
    right = "tensor([" + ", ".join(["1"] * run.world) + "])"
    if taken != right:
        raise Fail(f"rank 0 counts {taken} ranks on each (machine, local_rank); it should be "
                   f"{right}: one rank per GPU slot")


EXERCISES = {
    "ex1": Exercise(
        title="who thinks it is the main process, before and after init",
        judge=judge_main_process,
        worlds=(1, 3, 4),  # 4: two machines of two ranks, where LOCAL_RANK 0 is two processes
        runner=run_machines,
        hint="before init only the launcher's variables tell a process who it is in the job; "
             "a count over the ranks needs every rank's answer"),
    "ex2": Exercise(
        title="rank from machine and local rank",
        judge=judge_machine_and_gpu,
        worlds=(3, 4, 6),  # one machine of 3, two of 2, three of 2
        runner=run_machines,
        hint="ranks are numbered machine by machine, local_world_size of them on each"),
}
