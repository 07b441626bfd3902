"""Chapter 04's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="per_rank_means",
                 find="totals.item(0) / totals.item(1)",
                 replace="totals.item(0) / dist::get_world_size()",
                 expect="global mean is"),
    ],
    "ex2": [
        Mutation(name="first_rank_only",
                 find="for (const dist::Tensor& t : everyone) by_hand += t;",
                 replace="by_hand += everyone[0];",
                 expect="sum from all_gather is"),
    ],
}
