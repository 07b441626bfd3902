"""Chapter 12's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="sum_not_mean",
                 find="flat.assign_slice(0, grad / world);",
                 replace="flat.assign_slice(0, grad);",
                 expect="not their mean"),
    ],
    "ex2": [
        Mutation(name="largest_unit_left_out",
                 find="return 8 * largest + sharded;",
                 replace="return sharded;",
                 expect="without the largest unit gathered whole"),
    ],
}
