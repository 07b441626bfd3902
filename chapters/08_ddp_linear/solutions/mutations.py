"""Chapter 08's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="data_not_grad",
                 find="p->grad /= world;\n        dist::all_reduce(p->grad, "
                      "dist::ReduceOp::SUM);",
                 replace="p->data /= world;\n        dist::all_reduce(p->data, "
                         "dist::ReduceOp::SUM);",
                 expect="after 4 epochs"),
        # The starter's initial weights changed: the gaps are no longer the ones it shows.
        Mutation(name="other_start",
                 find="{{-0.5f + 0.25f * static_cast<float>(rank)}, {0.0f}}",
                 replace="{{-0.5f + 0.5f * static_cast<float>(rank)}, {0.0f}}",
                 expect="gap to rank 0 at the start is"),
        # The DDP line reports the hand-averaged model: its gap is not DDP's.
        Mutation(name="ddp_line_of_the_other_model",
                 find="<< gap_to_rank0(wrapped);",
                 replace="<< gap_to_rank0(alone);",
                 expect="gap to rank 0 with DistributedDataParallel is"),
    ],
    "ex2": [
        Mutation(name="square_root_lr",
                 find="kLr * dist::get_world_size();",
                 replace="kLr * std::sqrt(dist::get_world_size());",
                 expect="trains DDP at learning rate"),
        # The scaled rate printed, the unscaled one used.
        Mutation(name="printed_not_trained",
                 find="ch08::train_on_line(scaled, ddp_lr, 2,",
                 replace="ch08::train_on_line(scaled, kLr, 2,",
                 expect="with the sum and"),
    ],
    "ex3": [
        Mutation(name="square_root_rule",
                 find="base_lr * world;",
                 replace="base_lr * std::sqrt(world);",
                 expect="the square-root rule"),
        # Right up to a cap, as a careful person might add: right at --base-lr 0.01 on 1 to 4
        # ranks, wrong only where the rule stops holding (4 ranks at --base-lr 0.2).
        Mutation(name="capped_lr",
                 find="const double lr = base_lr * world;",
                 replace="const double lr = std::min(base_lr * world, 0.1);",
                 expect="where the rule stops holding: rank 0 trains at learning rate 0.1"),
        # A flag range that refuses --base-lr 0.2: the replay at 4 ranks cannot run.
        Mutation(name="base_lr_range_too_small",
                 find="1e-6, 1.0);",
                 replace="1e-6, 0.1);",
                 expect="where the rule stops holding: the job exited with code 2"),
        # The one process at the scaled rate too: it no longer is the reference.
        Mutation(name="one_process_scaled",
                 find="alone_optimizer(alone.parameters(), base_lr);",
                 replace="alone_optimizer(alone.parameters(), lr);",
                 expect="one process's epoch-1 loss is"),
        # The scaled rate printed, the base rate trained.
        Mutation(name="replica_at_base_lr",
                 find="dist::SGD optimizer(replica.parameters(), lr);",
                 replace="dist::SGD optimizer(replica.parameters(), base_lr);",
                 expect="the epoch-1 loss on 2 ranks is"),
    ],
}
