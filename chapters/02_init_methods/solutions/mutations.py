"""Chapter 02's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
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
