"""Chapter 11's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="rank0_generator_for_all",
                 find="noise.set_state(r.generators[static_cast<std::size_t>(rank)]);",
                 replace="noise.set_state(r.generators[0]);",
                 expect="the uninterrupted job ends with"),
    ],
    "ex2": [
        Mutation(name="epoch_from_samples",
                 find="const std::int64_t first_epoch = done / steps_per_epoch;",
                 replace="const std::int64_t first_epoch = done / sampler.num_samples();",
                 expect="of the restarted job says"),
    ],
}
