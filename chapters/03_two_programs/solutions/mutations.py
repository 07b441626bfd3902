"""Chapter 03's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="world_size_fixed",
                 find="options.world_size = world_flag;",
                 replace="options.world_size = 2;",
                 expect="started by hand on 3 ranks"),
        # Without --world-size, a world of one: right by hand, wrong under ddprun.
        Mutation(name="world_size_default_one",
                 find="options.world_size = world_flag;",
                 replace="options.world_size = world_flag >= 0 ? world_flag : 1;",
                 expect="under ddprun on 2 ranks (no flags), a rank exited with code"),
        # The source of the rank named wrongly under ddprun.
        Mutation(name="source_always_flag",
                 find='(rank_flag >= 0 ? "--rank" : "RANK")',
                 replace='"--rank"',
                 expect="under ddprun, the process of rank 0 says"),
        # all_reduce of the rank, not rank + 1.
        Mutation(name="rank_not_rank_plus_one",
                 find="dist::full(1, rank + 1,",
                 replace="dist::full(1, rank,",
                 expect="rank 0's all_reduce(rank + 1) is tensor([1])"),
    ],
    "ex2": [
        Mutation(name="min_not_max",
                 find="dist::ReduceOp::MAX",
                 replace="dist::ReduceOp::MIN",
                 expect="the last call was rank"),
        # The call time taken before the sleep: a late rank seems to call on time.
        Mutation(name="called_before_sleep",
                 find="    std::this_thread::sleep_for(std::chrono::milliseconds(launcher_rank * "
                      "stagger_ms));\n\n    const std::int64_t called = now_ns();\n",
                 replace="    const std::int64_t called = now_ns();\n"
                         "    std::this_thread::sleep_for("
                         "std::chrono::milliseconds(launcher_rank * stagger_ms));\n",
                 expect="ms after rank 0; it slept"),
        # The return time taken before init: it cannot be after the last rank's call.
        Mutation(name="returned_before_init",
                 find="    dist::init_process_group(cli.init_options());\n"
                      "    const std::int64_t returned = now_ns();\n",
                 replace="    const std::int64_t returned = now_ns();\n"
                         "    dist::init_process_group(cli.init_options());\n",
                 expect="rank 0 says init returned at"),
    ],
}
