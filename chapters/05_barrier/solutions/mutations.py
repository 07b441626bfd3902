"""Chapter 05's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="writer_only_barrier",
                 find="if (turn == rank) append_line(log, rank);\n      dist::barrier();",
                 replace="if (turn == rank) {\n        append_line(log, rank);\n"
                         "        dist::barrier();  // only the writer waits\n      }",
                 expect="in turns it is"),
    ],
    "ex2": [
        Mutation(name="error_caught_inside",
                 find="dist::zero_first(download);",
                 replace="dist::zero_first([&] {\n        try {\n          download();\n"
                         "        } catch (const dist::Error& e) {\n"
                         "          // caught inside: zero_first never hears of it\n"
                         "          seen = e.what();\n"
                         "        }\n      });",
                 expect="never reached it"),
    ],
}
