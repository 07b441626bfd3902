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
    ],
    "ex3": [
        Mutation(name="negative_overlap",
                 find="return std::max(0LL, std::min(a.end_us, b.end_us) - "
                      "std::max(a.start_us, b.start_us));",
                 replace="return std::min(a.end_us, b.end_us) - "
                         "std::max(a.start_us, b.start_us);",
                 expect="ran during backward"),
    ],
}
