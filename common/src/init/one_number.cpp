// One number through a collective (one_number.h), and the helpers of dist/init.h built on it.
#include "one_number.h"

#include <cstdio>

#include "dist/init.h"
#include "dist/log.h"

namespace dist {

double all_reduce_number(double value, DType dtype, ReduceOp op) {
  Tensor t = full(1, value, dtype, get_device());
  all_reduce(t, op);
  return t.item(0);
}

bool all_ranks_ok(bool mine) {
  return all_reduce_number(mine ? 1 : 0, kInt32, ReduceOp::MIN) == 1;
}

void report_throughput(std::chrono::duration<double> elapsed, std::int64_t samples) {
  const double seconds = all_reduce_number(elapsed.count(), kFloat64, ReduceOp::MAX);
  char text[160];
  std::snprintf(text, sizeof text, "throughput: %.0f samples/s (%lld samples in %.3f s)",
                static_cast<double>(samples) / seconds, static_cast<long long>(samples), seconds);
  out0() << text;
}

}  // namespace dist
