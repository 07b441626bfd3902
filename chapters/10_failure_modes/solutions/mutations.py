"""Chapter 10's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        Mutation(name="plain_barrier",
                 find="dist::monitored_barrier(std::chrono::seconds(1))",
                 replace="dist::barrier()",
                 expect="a plain barrier(), or none, says nothing of a straggler"),
        # The second barrier as short as the first: the straggler is named again.
        Mutation(name="second_barrier_too_short",
                 find="dist::monitored_barrier(std::chrono::seconds(5));",
                 replace="dist::monitored_barrier(std::chrono::seconds(1));",
                 expect="at barrier 2; a monitored_barrier of 5 s"),
        # No second barrier: the punctual ranks leave before the straggler comes.
        Mutation(name="no_second_barrier",
                 find="dist::monitored_barrier(std::chrono::seconds(5));",
                 replace="// no barrier",
                 expect="arrived at it: there was no barrier there"),
        # The starter's barrier-2 line changed.
        Mutation(name="line_reworded",
                 find='"barrier 2: arrived at "',
                 replace='"barrier 2: came at "',
                 expect="not the starter's line"),
    ],
    "ex2": [
        # init_process_group forgotten: every rank stops at its first call, before it prints.
        Mutation(name="no_init",
                 find="dist::init_process_group(cli.init_options());",
                 replace="// (no init_process_group)",
                 expect="before any rank printed"),
        # Every op but SUM refused, instead of an op that differs between ranks: a rank alone,
        # which cannot disagree with itself, refuses its MAX.
        Mutation(name="only_sum_allowed",
                 find="same = same && call == mine;",
                 replace="same = same && call == mine && op == dist::ReduceOp::SUM;",
                 expect="one rank cannot disagree with itself"),
        # The op left out of the comparison, as PyTorch's own fingerprint leaves it out.
        Mutation(name="op_not_compared",
                 find="same = same && call == mine;",
                 replace="same = same && call[0] == mine[0] && call[1] == mine[1];",
                 expect="the all_reduce whose reduce ops differ"),
        # Refused, but the error leaves out the ranks' calls.
        Mutation(name="table_not_in_error",
                 find='throw dist::Error("the ranks\' all_reduce calls differ" + table);',
                 replace='throw dist::Error("the ranks\' all_reduce calls differ");',
                 expect="refused the all_reduce whose sizes differ, but its error does not name"),
        # Every call refused, the same one on every rank too.
        Mutation(name="always_refused",
                 find="same = same && call == mine;",
                 replace="same = false;",
                 expect="same call on every rank gave 'refused"),
        # The starter's last all_reduce changed.
        Mutation(name="afterwards_max",
                 find="dist::all_reduce(one);",
                 replace="dist::all_reduce(one, dist::ReduceOp::MAX);",
                 expect="all_reduce after the refused calls gave"),
        # Every line right, and then an error: the group left twice.
        Mutation(name="destroyed_twice",
                 find="    dist::destroy_process_group();\n    return dist::kExitOk;",
                 replace="    dist::destroy_process_group();\n    dist::destroy_process_group();\n"
                         "    return dist::kExitOk;",
                 expect="the job exited with code 1. The ranks' errors"),
        # Only rank 0 says what its call gave.
        Mutation(name="summed_on_rank_zero_only",
                 find='dist::out() << what << ": summed " << tensor;',
                 replace='if (dist::get_rank() == 0) dist::out() << what << ": summed " << tensor;',
                 expect="printed no line 'same call: ...'"),
    ],
    "ex3": [
        # The mistake made as a rank that fails before the broadcast, not as a wrong root: the
        # others learn that a peer went away, and no check has two calls to compare.
        Mutation(name="rank_fails_instead",
                 find="root = rank;  // THE MISTAKE",
                 replace='throw dist::Error("no weights here");  // THE MISTAKE',
                 expect="without DIST_DEBUG=DETAIL's table"),
        # The mistake made on every rank: the calls agree, and nothing fails.
        Mutation(name="mistake_on_every_rank",
                 find="if (mistake && rank == dist::get_world_size() - 1) root = rank;",
                 replace="if (mistake) root = dist::get_world_size() - 1;",
                 expect="the same call on every rank"),
        # The mistake on rank 1, which is the last rank only on 2 ranks.
        Mutation(name="mistake_on_rank_one",
                 find="if (mistake && rank == dist::get_world_size() - 1) root = rank;",
                 replace="if (mistake && rank == 1) root = rank;",
                 expect="DIST_DEBUG=DETAIL shows broadcast(src 1, ...) for rank 1"),
        # The starter's weights changed: what every rank receives is no longer rank 0's.
        Mutation(name="other_weights",
                 find="dist::Tensor::full(4, 0.25)",
                 replace="dist::Tensor::full(4, 0.5)",
                 expect="without --mistake rank 0 printed"),
        # Every line right, and then an error: the group left twice.
        Mutation(name="destroyed_twice",
                 find="    dist::destroy_process_group();\n    return dist::kExitOk;",
                 replace="    dist::destroy_process_group();\n    dist::destroy_process_group();\n"
                         "    return dist::kExitOk;",
                 expect="without --mistake the job exited with code 1"),
    ],
}
