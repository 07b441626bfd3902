"""Chapter 14's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # inf not seen (isnan only): the step with an inf is taken.
        Mutation(name="inf_not_nan",
                 find="found_inf = found_inf || !std::isfinite(g);",
                 replace="found_inf = found_inf || std::isnan(g);",
                 expect="so GradScaler skips it"),
        # A backoff by 4, not 2.
        Mutation(name="backoff_quarter",
                 find="s.scale = static_cast<float>(s.scale * 0.5);",
                 replace="s.scale = static_cast<float>(s.scale * 0.25);",
                 expect="GradScaler backs off from"),
        # The count of clean steps kept through a backoff: the next growth comes early.
        Mutation(name="count_kept_after_backoff",
                 find="    s.scale = static_cast<float>(s.scale * 0.5);\n    s.tracker = 0;\n",
                 replace="    s.scale = static_cast<float>(s.scale * 0.5);\n",
                 expect="clean step(s) since the last growth or backoff; GradScaler grows after"),
        # The growth one step late.
        Mutation(name="growth_late",
                 find="if (s.tracker == s.growth_interval) {",
                 replace="if (s.tracker > s.growth_interval) {",
                 expect="GradScaler grows to"),
        # The optimizer steps even when the step is skipped: inf or NaN in the weights.
        Mutation(name="steps_on_inf",
                 find="        sgd.step();\n      }\n",
                 replace="      }\n      sgd.step();\n",
                 expect="a step was taken with an inf or NaN"),
        # Never unscaled: every step S times too large.
        Mutation(name="not_unscaled",
                 find="w.grad = w.grad * static_cast<float>(1.0 / scaler.scale);  // unscale_",
                 replace="(void)0;  // not unscaled",
                 expect="(not unscaled)"),
        # Two optimizer steps a step: the scale is right, the weights are not.
        Mutation(name="two_steps",
                 find="        sgd.step();\n      }\n",
                 replace="        sgd.step();\n        sgd.step();\n      }\n",
                 expect="; GradScaler's steps end with"),
        # The line's first scale printed after update(): the scale a step ran at is misreported.
        Mutation(name="scale_after_printed_first",
                 find='<< ": scale " << scale << " -> "',
                 replace='<< ": scale " << scaler.scale + 0 * scale << " -> "',
                 expect="GradScaler's is"),
        # The verdict reworded: the grader cannot find the step lines.
        Mutation(name="verdict_reworded",
                 find='(found_inf ? "skipped" : "stepped")',
                 replace='(found_inf ? "skip" : "step")',
                 expect="printed no line 'step 1: scale A -> B"),
        # The final values with another separator: the grader cannot read the numbers.
        Mutation(name="values_reworded",
                 find='text.empty() ? "" : ", "',
                 replace='text.empty() ? "" : "; "',
                 expect="not a list of numbers"),
    ],
    "ex2": [
        # Truncation: right below half-way, wrong above.
        Mutation(name="truncates",
                 find="return static_cast<std::uint16_t>((bits + 0x7fffu + kept_last_bit) >> 16);",
                 replace="return static_cast<std::uint16_t>((bits + 0 * kept_last_bit) >> 16);",
                 expect="above half-way (rounds up)"),
        # Ties away from zero: right except at ties with an even kept bit.
        Mutation(name="ties_away",
                 find="return static_cast<std::uint16_t>((bits + 0x7fffu + kept_last_bit) >> 16);",
                 replace="return static_cast<std::uint16_t>((bits + 0x8000u + 0 * kept_last_bit) "
                         ">> 16);",
                 expect="a tie (exactly half-way"),
        # Always up: wrong below half-way.
        Mutation(name="always_up",
                 find="return static_cast<std::uint16_t>((bits + 0x7fffu + kept_last_bit) >> 16);",
                 replace="return static_cast<std::uint16_t>((bits + 0xffffu + 0 * kept_last_bit) "
                         ">> 16);",
                 expect="below half-way (rounds down)"),
        # No NaN case: a NaN whose set bits are all in the low 16 becomes inf.
        Mutation(name="nan_to_inf",
                 find="  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // any NaN: torch's NaN\n",
                 replace="",
                 expect="a NaN"),
        # Every rank rounds rank 0's share: the others' values are never rounded.
        Mutation(name="one_rank_only",
                 find="if (static_cast<int>(i % static_cast<std::size_t>(world)) != rank) continue;",
                 replace="if (static_cast<int>(i % static_cast<std::size_t>(world)) != 0 * rank) "
                         "continue;",
                 expect="each on one rank"),
        # Upper-case hex: the grader cannot read the lines.
        Mutation(name="hex_upper_case",
                 find='"round %zu: %08x -> %04x"',
                 replace='"round %zu: %08X -> %04X"',
                 expect="not 'round I: XXXXXXXX -> YYYY'"),
    ],
}
