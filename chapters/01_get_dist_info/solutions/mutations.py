"""Chapter 01's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="local_rank_guard",
                 find="dist::read_launch_env().rank.value_or(0) == 0",
                 replace="dist::read_launch_env().local_rank.value_or(0) == 0",
                 expect="for the launcher's RANK before init"),
    ],
    "ex2": [
        Mutation(name="machine_from_world_size",
                 find="info.rank / info.local_world_size",
                 replace="info.rank / info.world_size",
                 expect="ranks are numbered machine by machine"),
    ],
}
