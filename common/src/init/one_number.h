// One number through a collective (internal): the verdicts and summaries that every rank must
// agree on (all_ranks_ok, report_throughput, ZeroFirst's status) are one all_reduce of one value
// on the default group's device.
#pragma once

#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist {

// all_reduce(op) of `value`, held as `dtype`, over the default group; every rank must call it.
double all_reduce_number(double value, DType dtype, ReduceOp op);

}  // namespace dist
