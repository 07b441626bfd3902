"""Chapter 16's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # The order line reworded: the grader cannot read the order.
        Mutation(name="order_reworded",
                 find='dist::out() << "order:" << text;',
                 replace='dist::out() << "steps:" << text;',
                 expect="printed no line with 'order: F0 F1"),
        # The steady state backward first: the last stage runs B0 before F0.
        Mutation(name="backward_first",
                 find="    order.push_back({true, f});\n    order.push_back({false, b});\n",
                 replace="    order.push_back({false, b});\n    order.push_back({true, f});\n",
                 expect="before F0"),
        # The warm-up counted from the wrong end: stage 0 waits for a gradient while the last
        # stage waits for a second forward. A deadlock, stopped by the --timeout.
        Mutation(name="warmup_reversed",
                 find="const int warmup = std::min(p - s - 1, m);",
                 replace="const int warmup = std::min(s + 0 * p, m);",
                 expect="a deadlock"),
        # One forward too many in the warm-up: a micro-batch more held on every stage.
        Mutation(name="warmup_one_more",
                 find="const int warmup = std::min(p - s - 1, m);",
                 replace="const int warmup = std::min(p - s, m);",
                 expect="1F1B holds min(p - s, m)"),
        # The summed gradients never divided by m: m times the step of one process.
        Mutation(name="not_divided_by_m",
                 find="  for (dist::Parameter* p : stage.parameters()) p->grad /= static_cast<double>(m);\n",
                 replace="",
                 expect="differ from one process's"),
    ],
    "ex2": [
        # The span lines reworded: the grader finds no spans.
        Mutation(name="spans_reworded",
                 find='"span: stage %d %s %.9f %.9f"',
                 replace='"spans: stage %d %s %.9f %.9f"',
                 expect="printed spans of stages []"),
        # Each stage's own window (its first span to its last): the waiting before and after
        # is lost.
        Mutation(name="own_window",
                 find="    b.idle_s.push_back(window - busy);\n    idle += window - busy;\n",
                 replace="    const double own = stage.back().end_s - stage.front().start_s;\n"
                         "    b.idle_s.push_back(own - busy);\n    idle += window - busy;\n",
                 expect="the same for every stage"),
        # The idle time over one window, not p.
        Mutation(name="one_window",
                 find="b.fraction = idle / (static_cast<double>(spans.size()) * window);",
                 replace="b.fraction = idle / (static_cast<double>(spans.size() * 0 + 1) * window);",
                 expect="over p windows"),
        # At the target, not under it: one micro-batch short.
        Mutation(name="at_target",
                 find="while (static_cast<double>(p - 1) / (m + p - 1) >= target) ++m;",
                 replace="while (static_cast<double>(p - 1) / (m + p - 1) > target) ++m;",
                 expect="the fewest under"),
    ],
}
