"""Chapter 06's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="rank_outside_low_bits",
                 find="return (seed << 16) | static_cast<std::uint64_t>(rank);",
                 replace="return (seed << 32) | static_cast<std::uint64_t>(rank);",
                 expect="the same low 32 bits"),
    ],
    "ex2": [
        Mutation(name="private_meets_shared",
                 find="return (std::uint64_t{1} << 31) | (seed << 16) | "
                      "static_cast<std::uint64_t>(rank);",
                 replace="return seed + static_cast<std::uint64_t>(rank);",
                 expect="replays the shared order"),
    ],
}
