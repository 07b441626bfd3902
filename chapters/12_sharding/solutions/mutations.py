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
        # A learning rate a few ulps off DDP's (as when it is rescaled and scaled back): the
        # values stay within the grader's tolerance, only DDP's bits at 1 and 2 ranks show it.
        Mutation(name="lr_not_ddps",
                 find="dist::SGD optimizer({&shard}, lr, {.momentum = momentum});",
                 replace="dist::SGD optimizer({&shard}, lr * (1 + 1e-6), {.momentum = momentum});",
                 expect="ZeRO-1 gives DDP's bits"),
        # The last chunk's end not clamped to n: it seems to hold padding as values.
        Mutation(name="last_not_clamped",
                 find="last = std::min(c * (rank + 1), n);",
                 replace="last = c * (rank + 1);",
                 expect="(the last chunk ends in padding)"),
        # The padding cut from the front of the gathered vector, where it is not.
        Mutation(name="padding_dropped_from_front",
                 find="params = gathered.slice(0, n);",
                 replace="params = gathered.slice(c * world - n, n);",
                 expect="(the padding dropped from the front: it is at the end)"),
        # No all_gather: the other ranks' updated chunks never come in.
        Mutation(name="no_all_gather",
                 find="      group->all_gather_into_tensor(gathered, shard.data);\n",
                 replace="",
                 expect="]; ZeRO-1 ends with ["),
        # A whole all_reduce for the gradient, then the all_gather: half as much again is sent.
        Mutation(name="all_reduce_not_reduce_scatter",
                 find="group->reduce_scatter_tensor(shard.grad, flat);",
                 replace="group->all_reduce(flat, dist::ReduceOp::SUM);\n"
                         "      shard.grad.assign_slice(0, flat.slice(c * rank, c));",
                 expect="group sent"),
        # Values printed with another separator: the grader cannot read the numbers.
        Mutation(name="values_reworded",
                 find='text.empty() ? "" : ", "',
                 replace='text.empty() ? "" : "; "',
                 expect="not a list of numbers"),
        # The shard's optimizer without momentum: it keeps no state at all.
        Mutation(name="no_momentum",
                 find="dist::SGD optimizer({&shard}, lr, {.momentum = momentum});",
                 replace="dist::SGD optimizer({&shard}, lr);",
                 expect="keeps momentum for 0 values"),
    ],
    "ex2": [
        Mutation(name="largest_unit_left_out",
                 find="return 8 * largest + sharded;",
                 replace="return sharded;",
                 expect="without the largest unit gathered whole"),
        # Stage 2 without the one unit's whole gradient in its backward.
        Mutation(name="stage2_largest_left_out",
                 find="return 4 * psi + 4 * largest + sharded;",
                 replace="return 4 * psi + sharded;",
                 expect="without the unit whose gradient is whole during its backward"),
        # Stage 1 without its whole gradients: a count the grader cannot name.
        Mutation(name="stage1_gradients_left_out",
                 find="return 4 * psi + 4 * psi + sharded;",
                 replace="return 4 * psi + sharded;",
                 expect="rank 0 says stage 1 needs"),
        # The search starts at stage 1: DDP, which fits where nothing else does, is never chosen.
        Mutation(name="ddp_never_tried",
                 find="  for (int stage = 0; stage <= 3; ++stage) {\n"
                      "    if (static_cast<double>(model_state_bytes(",
                 replace="  for (int stage = 1; stage <= 3; ++stage) {\n"
                         "    if (static_cast<double>(model_state_bytes(",
                 expect="chose stage none; the lowest that fits is stage 0"),
        # No stage fits, and the job stops with 1, not with a configuration error's 2.
        Mutation(name="error_not_config",
                 find='throw dist::ConfigError("no stage fits',
                 replace='throw dist::Error("no stage fits',
                 expect="no stage fits, and the job exited with code 1"),
        # DDP's buckets counted as model state: stage 0 measures more than it holds.
        Mutation(name="buckets_counted",
                 find="        in_flight = std::max(in_flight, buckets);\n",
                 replace="        bytes += buckets;  // counted as model state\n"
                         "        in_flight = std::max(in_flight, buckets);\n",
                 expect="over the budget of"),
        # Adam's moments left out of the measurement.
        Mutation(name="adam_state_left_out",
                 find="std::int64_t bytes = optimizer.state_bytes();",
                 replace="std::int64_t bytes = 0;",
                 expect="; that stage holds"),
        # Another model than the starter's.
        Mutation(name="other_model",
                 find="kSizes[] = {200, 301, 257, 10};",
                 replace="kSizes[] = {200, 300, 257, 10};",
                 expect="rank 0 says the units hold"),
        # Every line right, and then an error where a stage fits: the group left twice.
        Mutation(name="destroyed_twice",
                 find="    ddp.reset();\n    dist::destroy_process_group();\n",
                 replace="    ddp.reset();\n    dist::destroy_process_group();\n"
                         "    dist::destroy_process_group();\n",
                 expect="the job exited with code 1. The ranks' errors"),
    ],
}
