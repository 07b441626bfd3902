"""Chapter 09's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # The rank's offset forgotten: every rank takes its positions for rank 0's.
        Mutation(name="rank_offset_forgotten",
                 find="dist::get_rank() + static_cast<std::int64_t>(k)",
                 replace="static_cast<std::int64_t>(k)",
                 expect="without the padding each"),
        # The sizes that were padded at all, not those whose accuracy the padding changed.
        Mutation(name="padded_not_skewed",
                 find="skewed += counts.item(0) * counts.item(3) != "
                      "counts.item(2) * counts.item(1);",
                 replace="skewed += counts.item(1) != counts.item(3);",
                 expect="counting the padding skewed"),
        # The starter's count of every position broken.
        Mutation(name="positions_uncounted",
                 find="        ++all_seen;\n",
                 replace="",
                 expect="counting every position it is"),
    ],
    "ex2": [
        Mutation(name="loss_not_scaled",
                 find="loss.grad *= 1.0 / kMicro;\n",
                 replace="",
                 expect="times their mean)"),
        Mutation(name="divided_by_world",
                 find="loss.grad *= 1.0 / kMicro;",
                 replace="loss.grad *= 1.0 / (kMicro * dist::get_world_size());",
                 expect="DDP's all_reduce already averages over the ranks"),
        Mutation(name="no_sync_missing",
                 find="        if (m + 1 < kMicro) local.emplace(ddp_a);\n",
                 replace="",
                 expect="and no NoSync"),
        # torch's habit, `with ddp.no_sync(): loss.backward()`: the guard has ended before
        # average_gradients() sends.
        Mutation(name="no_sync_around_backward",
                 find="        if (m + 1 < kMicro) local.emplace(ddp_a);\n"
                      "        auto [x, y] = samples(rank, step, m * kBatch, kBatch);\n"
                      "        dist::MseLoss loss = dist::mse_loss(accumulated.forward(x), y);\n"
                      "        loss.grad *= 1.0 / kMicro;\n"
                      "        accumulated.backward(loss.grad);\n",
                 replace="        auto [x, y] = samples(rank, step, m * kBatch, kBatch);\n"
                         "        dist::MseLoss loss = dist::mse_loss(accumulated.forward(x), y);\n"
                         "        loss.grad *= 1.0 / kMicro;\n"
                         "        if (m + 1 < kMicro) {\n"
                         "          local.emplace(ddp_a);\n"
                         "          accumulated.backward(loss.grad);\n"
                         "          local.reset();  // ended before average_gradients()\n"
                         "        } else {\n"
                         "          accumulated.backward(loss.grad);\n"
                         "        }\n",
                 expect="none was alive when average_gradients() ran"),
        # Each micro-batch counted twice over: a wrong scale the grader cannot name.
        Mutation(name="doubled_gradient",
                 find="loss.grad *= 1.0 / kMicro;",
                 replace="loss.grad *= 2.0 / kMicro;",
                 expect="after 10 steps; the bigger batch's steps give"),
        # no_sync() on every micro-batch, the last too: nothing is ever sent (right values on
        # one rank, where there is nothing to send).
        Mutation(name="no_sync_always",
                 find="if (m + 1 < kMicro) local.emplace(ddp_a);",
                 replace="local.emplace(ddp_a);",
                 expect="made 0 all_reduces in 10 steps; with no_sync()"),
        # The one-batch model, the starter's reference, left unaveraged.
        Mutation(name="big_not_averaged",
                 find="      ddp_b.average_gradients();\n",
                 replace="",
                 expect="one-batch model has"),
    ],
    "ex3": [
        Mutation(name="negative_overlap",
                 find="return std::max(0LL, std::min(a.end_us, b.end_us) - "
                      "std::max(a.start_us, b.start_us));",
                 replace="return std::min(a.end_us, b.end_us) - "
                         "std::max(a.start_us, b.start_us);",
                 expect="ran during backward"),
        # Every step counted as overlapping, though the last bucket's all_reduce never does.
        Mutation(name="every_step_overlapped",
                 find="overlapped_steps += during > 0;",
                 replace="overlapped_steps += during >= 0;",
                 expect="overlapped backward in 5 steps; its trace says"),
        # The last bucket left unprinted.
        Mutation(name="last_bucket_unprinted",
                 find="for (std::size_t b = 0; b < ddp.buckets().size(); ++b) {",
                 replace="for (std::size_t b = 0; b + 1 < ddp.buckets().size(); ++b) {",
                 expect="printed no line for bucket"),
        # Only the all_reduces that overlapped counted: the last bucket's never do.
        Mutation(name="overlapping_all_reduces_only",
                 find="        ++count;\n",
                 replace="        count += during > 0;\n",
                 expect="all_reduces in"),
        # The trace written under another name than rankR.json.
        Mutation(name="trace_named_otherwise",
                 find='trace_dir + "/rank" + std::to_string(rank) + ".json"',
                 replace='trace_dir + "/trace" + std::to_string(rank) + ".json"',
                 expect="wrote no readable trace"),
        # One step more than --steps: each bucket all-reduced 6 times.
        Mutation(name="one_step_more",
                 find="for (int step = 0; step < steps; ++step) {",
                 replace="for (int step = 0; step <= steps; ++step) {",
                 expect="every bucket is all-reduced once in each of the 5 steps"),
    ],
}
