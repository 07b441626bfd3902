// Chapter 10, exercise 2 — DIST_DEBUG=DETAIL's check by hand, for one all_reduce.
//
// Write checked_all_reduce(tensor, op): before the all_reduce, every rank shares the call it is
// about to make (element count, dtype, reduce op); if any rank's differs, every rank throws a
// dist::Error naming each rank's call, and nobody enters the all_reduce. main() calls it three
// times: the same call everywhere, sizes that differ, reduce ops that differ. Why can the check
// itself never mismatch?
// Grade it: ./tutorial check 10-ex2        Run it: ./tutorial run 10-ex2
#include <dist/dist.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

void checked_all_reduce(dist::Tensor& tensor, dist::ReduceOp op) {
  // TODO(exercise): first check that every rank makes the same call, then all_reduce. If the
  // calls differ, throw on every rank, before anyone enters the all_reduce:
  //   throw dist::Error("the ranks' all_reduce calls differ; rank 0: 2 elements, torch.float32, "
  //                     "SUM; rank 1: 3 elements, torch.float32, SUM");  (one entry per rank)
  // Useful: dist::Tensor::from(std::vector<std::int64_t>{...}), dist::all_gather(outputs, input),
  // t.to_vector<std::int64_t>(), static_cast between DType/ReduceOp and std::int64_t,
  // dist::dtype_name(dtype) and dist::reduce_op_name(op) (the names as torch spells them).
  dist::all_reduce(tensor,
                   op);  // unchecked: with different sizes or ops the library stops the group
}

// Calls checked_all_reduce; prints the result, or that the call was refused, and why.
void try_all_reduce(const std::string& what, dist::Tensor tensor, dist::ReduceOp op) {
  try {
    checked_all_reduce(tensor, op);
    dist::out() << what << ": summed " << tensor;
  } catch (const dist::Error& e) {
    dist::out() << what << ": refused: " << e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch10_failure_modes_ex2",
                  "An all_reduce that first checks that every rank makes the same call.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    // ---- Step 1: the same call on every rank goes through
    try_all_reduce("same call", dist::Tensor::full(4, 1.0), dist::ReduceOp::SUM);

    // ---- Step 2: a size that depends on the rank (the last batch) must be refused on every rank
    try_all_reduce("sizes differ", dist::Tensor::full(2 + rank, 1.0), dist::ReduceOp::SUM);

    // ---- Step 3: rank 0 asks for MAX, the others for SUM: refused on every rank as well
    try_all_reduce("ops differ", dist::Tensor::full(2, 1.0),
                   rank == 0 ? dist::ReduceOp::MAX : dist::ReduceOp::SUM);

    // ---- Step 4: nobody entered a refused all_reduce, so the group still works
    dist::Tensor one = dist::Tensor::full(1, 1.0);
    dist::all_reduce(one);
    dist::out() << "afterwards: " << one;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
