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
    ],
    "ex2": [
        Mutation(name="square_root_lr",
                 find="kLr * dist::get_world_size();",
                 replace="kLr * std::sqrt(dist::get_world_size());",
                 expect="trains DDP at learning rate"),
    ],
    "ex3": [
        Mutation(name="square_root_rule",
                 find="base_lr * world;",
                 replace="base_lr * std::sqrt(world);",
                 expect="the square-root rule"),
    ],
}
