// Chapter 10, exercise 2 — DIST_DEBUG=DETAIL's check by hand, for one all_reduce.
//
// checked_all_reduce(tensor, op) first shares, with every rank, the call it is about to make
// (element count, dtype, reduce op): a tensor of 3 int64 values, all_gathered, so that every rank
// holds the whole table and reaches the same verdict from the same data. They all throw, naming
// each rank's call, or all go on, together: nobody enters an all_reduce that the others skip, and
// the group stays usable. The check is a collective of a fixed size, so it cannot itself
// mismatch. DIST_DEBUG=DETAIL does the same for every collective, through the store, and also
// compares the kind of call and the root.
// Grade it: ./tutorial check 10-ex2        Run it: ./tutorial run 10-ex2 --solution
#include <dist/dist.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

void checked_all_reduce(dist::Tensor& tensor, dist::ReduceOp op) {
  const std::vector<std::int64_t> mine{tensor.numel(), static_cast<std::int64_t>(tensor.dtype()),
                                       static_cast<std::int64_t>(op)};
  std::vector<dist::Tensor> all;
  dist::all_gather(all, dist::Tensor::from(mine));  // 3 numbers on every rank: cannot mismatch
  bool same = true;
  std::string table;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::vector<std::int64_t> call = all[r].to_vector<std::int64_t>();
    same = same && call == mine;
    table += "; rank " + std::to_string(r) + ": " + std::to_string(call[0]) + " elements, " +
             std::string(dist::dtype_name(static_cast<dist::DType>(call[1]))) + ", " +
             dist::reduce_op_name(static_cast<dist::ReduceOp>(call[2]));
  }
  if (!same) throw dist::Error("the ranks' all_reduce calls differ" + table);
  dist::all_reduce(tensor, op);
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
