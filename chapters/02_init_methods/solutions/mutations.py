"""Chapter 02's mutants: each exercise's solution with one deliberate mistake a participant
could make, which the grader (../exercises/grader.py) must FAIL with a message holding
`expect`. tools/grader/mutate.py writes each one, and the `exercises` tests grade it
(<DIR>_mutant_exK_NAME). They quote the solutions, so they live here, beside them."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="environment_for_every_scheme",
                 find='if (c.scheme == "env") {',
                 replace='if (c.scheme != "file") {',
                 expect="you predict 'environment'"),
    ],
    "ex2": [
        Mutation(name="world_size_not_larger",
                 find="wrong.world_size = world + 1;",
                 replace="wrong.world_size = world;",
                 expect="init should time out naming the rank"),
    ],
}
