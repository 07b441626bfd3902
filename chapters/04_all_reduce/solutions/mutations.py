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
        # No collective at all: each rank's own mean.
        Mutation(name="no_all_reduce",
                 find="    dist::all_reduce(totals, dist::ReduceOp::SUM);\n",
                 replace="",
                 expect="nothing came from the other ranks"),
        # The global sum over this rank's own count: every rank a different answer.
        Mutation(name="own_count",
                 find="totals.item(0) / totals.item(1);",
                 replace="totals.item(0) / count;",
                 expect="the ranks disagree"),
        # MAX for SUM: one answer on every rank, and none of the mistakes the grader names.
        Mutation(name="max_not_sum",
                 find="dist::all_reduce(totals, dist::ReduceOp::SUM);",
                 replace="dist::all_reduce(totals, dist::ReduceOp::MAX);",
                 expect="rank 0 says the global mean is 20; over all samples"),
        # The starter's sample count changed.
        Mutation(name="other_counts",
                 find="const double count = rank + 1,",
                 replace="const double count = rank + 2,",
                 expect="samples; it holds"),
    ],
    "ex2": [
        Mutation(name="first_rank_only",
                 find="for (const dist::Tensor& t : everyone) by_hand += t;",
                 replace="by_hand += everyone[0];",
                 expect="sum from all_gather is"),
        # Its own tensor counted among the received ones.
        Mutation(name="own_tensor_received",
                 find="(world - 1) * tensor.numel();",
                 replace="world * tensor.numel();",
                 expect="says all_gather brought it"),
        # The starter's all_reduce changed: the line to compare with is no longer the sum.
        Mutation(name="all_reduce_max",
                 find="dist::all_reduce(by_library);",
                 replace="dist::all_reduce(by_library, dist::ReduceOp::MAX);",
                 expect="all_reduce gave"),
        # The starter's print line changed: the grader cannot read the two tensors.
        Mutation(name="line_reworded",
                 find='<< ", from all_reduce: "',
                 replace='<< "; from all_reduce: "',
                 expect="not two tensors"),
        # The all_reduce's tensor printed as floats: not a tensor of integers.
        Mutation(name="floats_printed",
                 find="dist::Tensor by_library = tensor;",
                 replace="dist::Tensor by_library = tensor.to(dist::kFloat32);",
                 expect="where a tensor of integers belongs"),
    ],
}
