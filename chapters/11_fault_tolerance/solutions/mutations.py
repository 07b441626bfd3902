"""Chapter 11's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="rank0_generator_for_all",
                 find="noise.set_state(r.generators[static_cast<std::size_t>(rank)]);",
                 replace="noise.set_state(r.generators[0]);",
                 expect="the uninterrupted job ends with"),
        # Snapshots every 4 steps: the restart resumes from another step than the starter's.
        Mutation(name="snapshot_every_4",
                 find="if ((done + 1) % 5 == 0) {",
                 replace="if ((done + 1) % 4 == 0) {",
                 expect="the restarted job started at step"),
        # The starter's crash moved a step later.
        Mutation(name="crash_a_step_late",
                 find="if (attempt == 0 && done == crash_at_step && rank == world - 1) {",
                 replace="if (attempt == 0 && crash_at_step >= 0 && done == crash_at_step + 1 &&\n"
                         "            rank == world - 1) {",
                 expect="never crashed at step 12"),
        # The crash's step written in: the job without --crash-at-step crashes too.
        Mutation(name="crash_step_hard_coded",
                 find="if (attempt == 0 && done == crash_at_step && rank == world - 1) {",
                 replace="if (attempt == 0 && done == 12 && rank == world - 1) {",
                 expect="the job without a crash exited with code 1"),
    ],
    "ex2": [
        Mutation(name="epoch_from_samples",
                 find="const std::int64_t first_epoch = done / steps_per_epoch;",
                 replace="const std::int64_t first_epoch = done / sampler.num_samples();",
                 expect="of the restarted job says"),
        # The starter's crash moved a step later.
        Mutation(name="crash_a_step_late",
                 find="if (attempt == 0 && done == crash_at_step && rank == world - 1) {",
                 replace="if (attempt == 0 && crash_at_step >= 0 && done == crash_at_step + 1 &&\n"
                         "            rank == world - 1) {",
                 expect="never crashed at step 11"),
    ],
}
