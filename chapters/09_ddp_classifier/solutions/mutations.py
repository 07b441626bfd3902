"""Chapter 09's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # The rank's offset forgotten: every rank takes its positions for rank 0's.
        Mutation(name="rank_offset_forgotten",
                 find="dist::get_rank() + static_cast<std::int64_t>(k)",
                 replace="static_cast<std::int64_t>(k)",
                 expect="without the padding each"),
    ],
    "ex2": [
        Mutation(name="loss_not_scaled",
                 find="loss.grad *= 1.0 / kMicro;\n",
                 replace="",
                 expect="the bigger batch's steps give"),
    ],
    "ex3": [
        Mutation(name="negative_overlap",
                 find="return std::max(0LL, std::min(a.end_us, b.end_us) - "
                      "std::max(a.start_us, b.start_us));",
                 replace="return std::min(a.end_us, b.end_us) - "
                         "std::max(a.start_us, b.start_us);",
                 expect="ran during backward"),
    ],
}
