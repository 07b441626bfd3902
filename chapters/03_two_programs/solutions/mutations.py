"""Chapter 03's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
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
