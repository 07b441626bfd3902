"""Chapter 15's mutants: deliberate mistakes in its solutions that its grader must
FAIL (tools/grader/mutate.py says how they are built and tested)."""
from grading import Mutation

MUTATIONS = {
    "ex1": [
        # f's backward left out: one call short, and d loss / d x one rank's part.
        Mutation(name="f_backward_missing",
                 find="    group.all_reduce(grad, dist::ReduceOp::SUM);\n    return grad;",
                 replace="    return grad;",
                 expect="the block needs one each way"),
        # f's forward all_reduces too (a mean of equal inputs: the same values, a wasted call).
        Mutation(name="f_forward_reduces",
                 find="dist::Tensor forward(const dist::Tensor& x) const { return x; }",
                 replace="dist::Tensor forward(dist::Tensor x) const {\n"
                         "    group.all_reduce(x, dist::ReduceOp::AVG);\n    return x;\n  }",
                 expect="the block needs one each way"),
        # g averages instead of summing: the output is 1/T of one process's.
        Mutation(name="g_mean",
                 find="group.all_reduce(partial, dist::ReduceOp::SUM);",
                 replace="group.all_reduce(partial, dist::ReduceOp::AVG);",
                 expect="'s losses are"),
        # The row layer's bias on every rank: added T times.
        Mutation(name="bias_on_every_rank",
                 find="if (rank != 0) bias2.assign(bias2.size(), 0.0f);",
                 replace="(void)0;",
                 expect="'s losses are"),
        # The bias never stepped: the losses part from one process's after step 1.
        Mutation(name="bias_not_stepped",
                 find="if (rank == 0) params.push_back(row.parameters()[1]);",
                 replace="(void)0;",
                 expect="'s losses are"),
        # Both layers' slices one rank off: the same block with its hidden features permuted
        # (the same losses), but each rank's weights are another rank's slice.
        Mutation(name="wrong_slice",
                 find="const std::int64_t h = kHidden / t, first = rank * h;",
                 replace="const std::int64_t h = kHidden / t, first = ((rank + 1) % t) * h;",
                 expect="after training differs from one process's slice"),
        # f's backward averages: d loss / d x is 1/T of one process's, the weights are right.
        Mutation(name="f_mean",
                 find="group.all_reduce(grad, dist::ReduceOp::SUM);",
                 replace="group.all_reduce(grad, dist::ReduceOp::AVG);",
                 expect="d loss / d x at step 1 differs"),
        # The weights printed as a tensor: the grader cannot read the numbers.
        Mutation(name="weights_as_tensor",
                 find="<< values(column.weight().data.to_vector<float>());",
                 replace="<< column.weight().data;",
                 expect="not a list of numbers"),
        # The loss line reworded: the grader cannot read it.
        Mutation(name="line_reworded",
                 find='"; all_reduce calls: forward "',
                 replace='"; all_reduces: forward "',
                 expect="printed no line 'step 1: loss L"),
    ],
    "ex2": [
        # The row's first rank repeated (j left out): new_group refuses a rank named twice, on
        # every rank, and the job fails before any group is made.
        Mutation(name="rank_named_twice",
                 find="for (int j = 0; j < tp; ++j) row.push_back(i * tp + j);",
                 replace="for (int j = 0; j < tp; ++j) row.push_back(i * tp + 0 * j);",
                 expect="failed (exit code"),
        # Column-major: the tp groups are the columns.
        Mutation(name="column_major",
                 find="for (int j = 0; j < tp; ++j) row.push_back(i * tp + j);",
                 replace="for (int j = 0; j < tp; ++j) row.push_back(j * dp + i);",
                 expect="'s tp group is"),
        # The dp groups as rows of a dp-wide grid: right at 2 x 2 only by chance of its rows.
        Mutation(name="dp_groups_wrong",
                 find="for (int i = 0; i < dp; ++i) column.push_back(i * tp + j);",
                 replace="for (int i = 0; i < dp; ++i) column.push_back(j * dp + i);",
                 expect="'s dp group is"),
        # The gradients summed over the dp group, not averaged: the steps dp times too large.
        Mutation(name="sum_not_mean",
                 find="        p->grad /= dpg.size();\n",
                 replace="",
                 expect="2-D losses are"),
        # The loss printed as a tensor: the grader cannot read the number.
        Mutation(name="loss_as_tensor",
                 find="<< values({static_cast<float>(mean.item(0))});",
                 replace="<< mean;",
                 expect="not a list of numbers"),
        # The members printed in another form.
        Mutation(name="members_reworded",
                 find='dist::out() << "tp group: " << members(groups.tp->ranks())',
                 replace='dist::out() << "tp group: " << groups.tp->size()',
                 expect="not 'tp group: [...], dp group: [...]'"),
    ],
}
