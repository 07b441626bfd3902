"""Chapter 06's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
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
