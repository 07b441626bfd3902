"""Chapter 07's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="contiguous_block",
                 find="for (std::int64_t i = rank; i < total_size; i += world) "
                      "mine.push_back(indices[i]);",
                 replace="for (std::int64_t i = rank * num_samples; "
                         "i < (rank + 1) * num_samples; ++i)\n"
                         "    mine.push_back(indices[i]);  // a contiguous block",
                 expect="post D's sampler gives rank"),
    ],
    "ex2": [
        Mutation(name="epoch_not_in_seed",
                 find="g.manual_seed(static_cast<std::uint64_t>(seed + epoch));",
                 replace="g.manual_seed(static_cast<std::uint64_t>(seed));\n"
                         "  static_cast<void>(epoch);  // left out of the seed",
                 expect="the epoch is not in the seed"),
        Mutation(name="contiguous_block",
                 find="for (std::size_t i = static_cast<std::size_t>(rank); i < all.size(); "
                      "i += world) {\n    mine.push_back(all[i]);\n  }",
                 replace="const std::size_t per = all.size() / static_cast<std::size_t>(world);\n"
                         "  for (std::size_t i = per * static_cast<std::size_t>(rank); "
                         "i < per * static_cast<std::size_t>(rank + 1); ++i) {\n"
                         "    mine.push_back(all[i]);\n  }",
                 expect="a block of the draw in a row"),
        Mutation(name="seed_per_rank",
                 find="g.manual_seed(static_cast<std::uint64_t>(seed + epoch));",
                 replace="g.manual_seed(static_cast<std::uint64_t>(seed + epoch + "
                         "dist::get_rank()));",
                 expect="a draw of this rank's own"),
    ],
    "ex3": [
        Mutation(name="max_for_min",
                 find="dist::all_reduce(lo, dist::ReduceOp::MIN);",
                 replace="dist::all_reduce(lo, dist::ReduceOp::MAX);",
                 expect="the fewest is"),
    ],
}
