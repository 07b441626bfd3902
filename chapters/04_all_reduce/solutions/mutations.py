"""Chapter 04's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # Every rank weighed alike: each contributes its value once, as if it held one sample.
        Mutation(name="per_rank_means",
                 find="{value * count, count}",
                 replace="{value, 1.0}",
                 expect="the mean of the per-rank means"),
        # "The sum of the values and the count", read as each rank's one value: x count forgotten.
        Mutation(name="unweighted_mean",
                 find="{value * count, count}",
                 replace="{value, count}",
                 expect="not once for each of its samples"),
        # The right mean, with an all_reduce per number where the task asks for one.
        Mutation(name="two_all_reduces",
                 find="auto totals = dist::Tensor::from<double>({value * count, count}, "
                      "dist::get_device());\n"
                      "    dist::all_reduce(totals, dist::ReduceOp::SUM);\n"
                      "    const double mean = totals.item(0) / totals.item(1);",
                 replace="auto sum = dist::Tensor::from<double>({value * count}, "
                         "dist::get_device());\n"
                         "    auto samples = dist::Tensor::from<double>({count}, "
                         "dist::get_device());\n"
                         "    dist::all_reduce(sum, dist::ReduceOp::SUM);\n"
                         "    dist::all_reduce(samples, dist::ReduceOp::SUM);\n"
                         "    const double mean = sum.item(0) / samples.item(0);",
                 expect="the task asks for a single all_reduce"),
        # A collective on one rank only: rank 1 exits, and rank 0's all_reduce fails. The grader
        # must show rank 0's own error, not only ddprun's summary.
        Mutation(name="rank_zero_only",
                 find="    dist::all_reduce(totals, dist::ReduceOp::SUM);",
                 replace="    if (rank == 0) dist::all_reduce(totals, dist::ReduceOp::SUM);",
                 expect="[rank 0/2] error: all_reduce #1"),
    ],
    "ex2": [
        Mutation(name="first_rank_only",
                 find="for (const dist::Tensor& t : everyone) by_hand += t;",
                 replace="by_hand += everyone[0];",
                 expect="sum from all_gather is"),
    ],
}
