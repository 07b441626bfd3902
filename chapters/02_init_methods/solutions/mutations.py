"""Chapter 02's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="environment_for_every_scheme",
                 find='if (c.scheme == "env") {',
                 replace='if (c.scheme != "file") {',
                 expect="you predict 'environment'"),
        # A case left out of the table: the grader needs all thirteen.
        Mutation(name="case_left_out",
                 find='    {"file", kBoth, kNothing, kBoth},\n',
                 replace="",
                 expect="printed no prediction for case 13"),
        # The library's outcome mislabelled: the part around predict_torch() is not to change.
        Mutation(name="library_mislabelled",
                 find='rank == from_arguments ? "arguments"',
                 replace='rank == from_arguments ? "URL query"',
                 expect="this library did 'URL query'"),
        # The cases' cells written another way: not the README table's form.
        Mutation(name="cells_reworded",
                 find='rank + ", " + world',
                 replace='rank + " & " + world',
                 expect="whose case is not the README table's form"),
    ],
    "ex2": [
        Mutation(name="world_size_not_larger",
                 find="wrong.world_size = world + 1;",
                 replace="wrong.world_size = world;",
                 expect="init should time out naming the rank"),
    ],
}
