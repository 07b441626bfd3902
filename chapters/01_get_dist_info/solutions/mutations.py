"""Chapter 01's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="local_rank_guard",
                 find="dist::read_launch_env().rank.value_or(0) == 0",
                 replace="dist::read_launch_env().local_rank.value_or(0) == 0",
                 expect="for the launcher's RANK before init"),
        # MAX over the ranks is 1 whenever any rank says yes: no count at all.
        Mutation(name="max_not_sum",
                 find="dist::all_reduce(flags, dist::ReduceOp::SUM);",
                 replace="dist::all_reduce(flags, dist::ReduceOp::MAX);",
                 expect="rank 0 counts 'naive guard before init 1"),
        # The starter's print line changed: the grader can no longer read the answers.
        Mutation(name="answers_reworded",
                 find='<< ", launcher\'s RANK before init: "',
                 replace='<< ", launcher\'s RANK before init = "',
                 expect="not three 'guard: yes/no' answers"),
    ],
    "ex2": [
        Mutation(name="machine_from_world_size",
                 find="info.rank / info.local_world_size",
                 replace="info.rank / info.world_size",
                 expect="ranks are numbered machine by machine"),
        # Each rank on its right machine and slot, but counted at machine + slot: two machines'
        # slots land on one entry.
        Mutation(name="pair_index_added",
                 find="const int pair = machine * info.local_world_size + slot;",
                 replace="const int pair = machine + slot;",
                 expect="ranks on each (machine, local_rank); it should be"),
    ],
}
