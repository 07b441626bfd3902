"""Chapter 10's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="plain_barrier",
                 find="dist::monitored_barrier(std::chrono::seconds(1))",
                 replace="dist::barrier()",
                 expect="a plain barrier(), or none, says nothing of a straggler"),
    ],
    "ex2": [
        # The op left out of the comparison, as PyTorch's own fingerprint leaves it out.
        Mutation(name="op_not_compared",
                 find="same = same && call == mine;",
                 replace="same = same && call[0] == mine[0] && call[1] == mine[1];",
                 expect="the all_reduce whose reduce ops differ"),
    ],
    "ex3": [
        # The mistake made on every rank: the calls agree, and nothing fails.
        Mutation(name="mistake_on_every_rank",
                 find="if (mistake && rank == dist::get_world_size() - 1) root = rank;",
                 replace="if (mistake) root = dist::get_world_size() - 1;",
                 expect="the same call on every rank"),
    ],
}
