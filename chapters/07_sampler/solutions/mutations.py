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
        # The count of failing asserts taken over 1 to 7 ranks, not 8.
        Mutation(name="world_eight_left_out",
                 find="for (int w = 1; w <= 8; ++w, ++pairs)",
                 replace="for (int w = 1; w <= 7; ++w, ++pairs)",
                 expect="rank 0 says post D's assert fails on"),
        # Post D's shard printed as floats: not a tensor of integers.
        Mutation(name="floats_printed",
                 find="line << dist::Tensor::from(*old);",
                 replace="line << dist::Tensor::from(*old).to(dist::kFloat32);",
                 expect="where a tensor of integers belongs"),
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
        # One rank's worth drawn, then shared out: too few indices each.
        Mutation(name="draw_not_scaled",
                 find="global_draw(weights, per_rank, world,",
                 replace="global_draw(weights, per_rank / world, world,",
                 expect="indices; each rank keeps 6)"),
        # Another seed: a draw like none the grader can name, so it says only what is right.
        Mutation(name="other_seed",
                 find="g.manual_seed(static_cast<std::uint64_t>(seed + epoch));",
                 replace="g.manual_seed(static_cast<std::uint64_t>(seed + epoch + 7));",
                 expect="]; its share of the one weighted draw"),
    ],
    "ex3": [
        Mutation(name="max_for_min",
                 find="dist::all_reduce(lo, dist::ReduceOp::MIN);",
                 replace="dist::all_reduce(lo, dist::ReduceOp::MAX);",
                 expect="the fewest is"),
        # The ranges' ends rounded up: rank 0's range too long, its own count wrong.
        Mutation(name="ranges_rounded_up",
                 find="end = n * (rank + 1) / world;",
                 replace="end = (n * (rank + 1) + world - 1) / world;",
                 expect="says it takes"),
        # The starter's DistributedSampler lines changed: drop_last batches.
        Mutation(name="drop_last_batches",
                 find="dist::BatchSampler(sampler, batch, false).size();",
                 replace="dist::BatchSampler(sampler, batch, true).size();",
                 expect="says DistributedSampler gives"),
        # Batches of 1 to 3 only: lines missing.
        Mutation(name="batches_of_four_left_out",
                 find="batch <= 4; ++batch",
                 replace="batch <= 3; ++batch",
                 expect="printed 36 of the 48"),
    ],
}
