"""Chapter 12's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="sum_not_mean",
                 find="flat.assign_slice(0, grad / world);",
                 replace="flat.assign_slice(0, grad);",
                 expect="not their mean"),
        # c rounded down: the chunks cover fewer than n values, and the copy into the padded
        # vector throws. The grader must show the rank's own error line first.
        Mutation(name="floor_chunks",
                 find="const std::int64_t c = (n + world - 1) / world;",
                 replace="const std::int64_t c = n / world;",
                 expect="error: dist::Tensor::assign_slice"),
        # The gathered vector kept whole: the padding stays at the end.
        Mutation(name="padding_kept",
                 find="params = gathered.slice(0, n);",
                 replace="params = gathered;",
                 expect="(12 values, expected 11) (the padding is still at the end)"),
    ],
    "ex2": [
        Mutation(name="largest_unit_left_out",
                 find="return 8 * largest + sharded;",
                 replace="return sharded;",
                 expect="without the largest unit gathered whole"),
    ],
}
