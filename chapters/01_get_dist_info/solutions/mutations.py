"""Chapter 01's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
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
