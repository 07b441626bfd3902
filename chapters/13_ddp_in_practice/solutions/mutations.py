"""Chapter 13's mutants: deliberate mistakes in its solutions that its grader must FAIL
(tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # The loop ends when the first rank joins: the longest rank's batches are cut short.
        Mutation(name="stops_at_first_join",
                 find="if (training.item(0) == 0) break;",
                 replace="if (training.item(0) < world) break;",
                 expect="the job must run as long as its longest rank has batches"),
        # A joined rank shadows the all_reduce but does not step: the replicas drift apart.
        Mutation(name="joined_rank_does_not_step",
                 find="for (int i = 0; i < 4; ++i) w[i] -= kLr * m[i];",
                 replace="for (int i = 0; i < 4 && has_batch; ++i) w[i] -= kLr * m[i];",
                 expect="differ from rank 0's"),
        # The mean divides by the ranks still training.
        Mutation(name="divides_by_training",
                 find="const int divisor = world;",
                 replace="const int divisor = static_cast<int>(training.item(0));",
                 expect="the mean divides by the ranks still training"),
        # Out of batches, the last batch again instead of zeros.
        Mutation(name="repeats_last_batch",
                 find="if (has_batch) {\n        const std::vector<float> t = target(rank, step);",
                 replace="{\n        const std::vector<float> t = target(rank, std::min(step, "
                         "mine - 1));",
                 expect="repeats its last batch"),
        # A step's gradient with the wrong sign: none of the known mistakes.
        Mutation(name="gradient_sign",
                 find="grad[i] = w[i] - t[i];",
                 replace="grad[i] = t[i] - w[i];",
                 expect="Join's steps end with"),
    ],
    "ex2": [
        # The min_compression_rate forgotten: compressed whenever (n + m) r < n m.
        Mutation(name="no_compression_rate",
                 find="(n + m) * r * 2 < n * m",
                 replace="(n + m) * r < n * m",
                 expect="a matrix was counted compressed that PowerSGD sends whole"),
        # Q forgotten: n r values for a compressed matrix.
        Mutation(name="p_only",
                 find="values += compressed ? (n + m) * r : n * m;",
                 replace="values += compressed ? n * r : n * m;",
                 expect="only P was counted"),
        # Every value counted W times: to itself too.
        Mutation(name="sent_to_all",
                 find="return 4 * values * (world - 1);",
                 replace="return 4 * values * world;",
                 expect="each value counted"),
        # 2 bytes a value: as if fp16 compression ran too.
        Mutation(name="two_bytes",
                 find="return 4 * values * (world - 1);",
                 replace="return 2 * values * (world - 1);",
                 expect="at rank 1 you predict"),
    ],
}
