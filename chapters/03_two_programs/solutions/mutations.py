"""Chapter 03's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="world_size_fixed",
                 find="options.world_size = world_flag;",
                 replace="options.world_size = 2;",
                 expect="started by hand on 3 ranks"),
    ],
    "ex2": [
        Mutation(name="min_not_max",
                 find="dist::ReduceOp::MAX",
                 replace="dist::ReduceOp::MIN",
                 expect="the last call was rank"),
    ],
}
