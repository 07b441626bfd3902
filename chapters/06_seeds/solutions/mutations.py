"""Chapter 06's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="rank_outside_low_bits",
                 find="return (seed << 16) | static_cast<std::uint64_t>(rank);",
                 replace="return (seed << 32) | static_cast<std::uint64_t>(rank);",
                 expect="the same low 32 bits"),
        # The generator seeded with another seed than the one printed.
        Mutation(name="seeded_not_as_printed",
                 find="dist::Generator generator(seed);",
                 replace="dist::Generator generator(seed + 1);",
                 expect="draws in job 0 are"),
        # The starter's print line changed: the grader cannot read the seed and the draws.
        Mutation(name="line_reworded",
                 find='<< ", draws "',
                 replace='<< "; draws "',
                 expect="not 'job 0: seed S, draws tensor(...)'"),
        # The draws printed as floats: not a tensor of integers.
        Mutation(name="floats_printed",
                 find="<< dist::randint(0, kImages, kDraws, generator);",
                 replace="<< dist::randint(0, kImages, kDraws, generator).to(dist::kFloat32);",
                 expect="where a tensor of integers belongs"),
    ],
    "ex2": [
        Mutation(name="private_meets_shared",
                 find="return (std::uint64_t{1} << 31) | (seed << 16) | "
                      "static_cast<std::uint64_t>(rank);",
                 replace="return seed + static_cast<std::uint64_t>(rank);",
                 expect="replays the shared order"),
        # The rank in the shared seed: the ranks shuffle apart.
        Mutation(name="rank_in_shared_seed",
                 find="return seed + static_cast<std::uint64_t>(epoch);",
                 replace="return seed + static_cast<std::uint64_t>(epoch) +\n"
                         "         100 * static_cast<std::uint64_t>(dist::get_rank());",
                 expect="the shared order must agree"),
        # The epoch left out of the shared seed: every epoch the same order.
        Mutation(name="epoch_not_in_shared_seed",
                 find="return seed + static_cast<std::uint64_t>(epoch);",
                 replace="static_cast<void>(epoch);\n  return seed;",
                 expect="epoch 1's order repeats epoch 0's"),
        # The rank above the low 32 bits: every rank the same private stream.
        Mutation(name="rank_above_low_bits",
                 find="| (seed << 16) | static_cast<std::uint64_t>(rank);",
                 replace="| (seed << 16) | (static_cast<std::uint64_t>(rank) << 32);",
                 expect="draw the same partners"),
        # The private stream seeded with another seed than the one printed.
        Mutation(name="private_not_as_printed",
                 find="dist::init_seeds(private_seed(kSeed, rank));",
                 replace="dist::init_seeds(private_seed(kSeed, rank) + 1);",
                 expect="partners in epoch 0 are"),
        # The starter's epoch line changed.
        Mutation(name="line_reworded",
                 find='<< ", partners "',
                 replace='<< "; partners "',
                 expect="not the starter's epoch line"),
    ],
}
