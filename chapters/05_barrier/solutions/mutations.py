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
        # The last turn forgotten: the last rank never writes its line.
        Mutation(name="last_turn_missing",
                 find="for (int turn = 0; turn < world; ++turn) {",
                 replace="for (int turn = 0; turn < world - 1; ++turn) {",
                 expect="so it should hold"),
        # The log removed before rank 0 reads it.
        Mutation(name="log_removed_first",
                 find="    if (rank == 0) {\n      std::ifstream in(log);",
                 replace="    if (rank == 0) {\n      fs::remove(log);\n"
                         "      std::ifstream in(log);",
                 expect="rank 0 printed no 'log line N: ...' lines"),
    ],
    "ex2": [
        # Rank 0 keeps retrying its download for 6 s before it gives up (a retry loop, here a
        # busy one): the others are told, but only after most of the 10 s timeout.
        Mutation(name="told_late",
                 find='if (rank == 0) throw dist::Error("download failed',
                 replace="for (const auto t0 = std::chrono::steady_clock::now();\n"
                         "           rank == 0 && std::chrono::steady_clock::now() - t0 <\n"
                         "                            std::chrono::seconds(6);) {\n"
                         "      }\n"
                         '      if (rank == 0) throw dist::Error("download failed',
                 expect="it should know at once"),
        Mutation(name="error_caught_inside",
                 find="dist::zero_first(download);",
                 replace="dist::zero_first([&] {\n        try {\n          download();\n"
                         "        } catch (const dist::Error& e) {\n"
                         "          // caught inside: zero_first never hears of it\n"
                         "          seen = e.what();\n"
                         "        }\n      });",
                 expect="never reached it"),
        # Post C's guard instead of zero_first: rank 0's exception skips the barrier that
        # releases the others, which learn only that the group broke, or time out.
        Mutation(name="post_c_guard",
                 find="dist::zero_first(download);",
                 replace="if (rank != 0) dist::barrier();\n      download();\n"
                         "      if (rank == 0) dist::barrier();",
                 expect="it should be told that rank 0 failed inside zero_first"),
        # The errors not caught: no rank says what it saw.
        Mutation(name="error_not_caught",
                 find="} catch (const dist::Error& e) {\n      seen = e.what();",
                 replace="} catch (const dist::ConfigError& e) {\n      seen = e.what();",
                 expect="rank 0 never said what it saw"),
        # The download fails on rank 1, not on rank 0, which goes first.
        Mutation(name="fails_on_rank_one",
                 find="if (rank == 0) throw dist::Error(",
                 replace="if (rank == 1) throw dist::Error(",
                 expect="it runs the download first and sees its own error"),
    ],
}
