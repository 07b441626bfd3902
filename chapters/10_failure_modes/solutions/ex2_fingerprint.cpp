// Chapter 10, exercise 2 — DIST_DEBUG=DETAIL's check by hand, for one all_reduce.
//
// The exercise: "Write checked_all_reduce(tensor, op): before the all_reduce, every rank shares
// what it is about to call (element count, dtype, reduce op); if any rank differs, every rank
// throws, naming each rank's call, and nobody enters the all_reduce. Call it once with the same
// arguments everywhere and once with a size that depends on the rank."
//
// The solution: the fingerprint is a tensor of 3 int64 values; all_gather gives every rank the
// whole table, so every rank reaches the same verdict from the same data, and they all throw, or
// all go on, together: no rank is left waiting in an all_reduce the others skipped. The check is a
// collective of a fixed size, so it cannot itself mismatch. DIST_DEBUG=DETAIL does the same for
// every collective, through the store, and also compares the kind of call and the root.
//
// Run: ddprun --standalone --nproc-per-node 3 ch10_failure_modes_ex2
#include <dist/dist.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

void checked_all_reduce(dist::Tensor& tensor, dist::ReduceOp op) {
  const dist::Tensor mine = dist::Tensor::from(std::vector<std::int64_t>{
      tensor.numel(), static_cast<std::int64_t>(tensor.dtype()), static_cast<std::int64_t>(op)});
  std::vector<dist::Tensor> all;
  dist::all_gather(all, mine);  // fixed size on every rank: this call cannot mismatch
  bool same = true;
  std::string table;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto f = all[r].to_vector<std::int64_t>();
    same = same && f == mine.to_vector<std::int64_t>();
    table += "\n  rank " + std::to_string(r) + ": " + std::to_string(f[0]) + " elements, dtype " +
             std::to_string(f[1]) + ", op " + std::to_string(f[2]);
  }
  if (!same) throw dist::Error("the ranks' all_reduce calls differ:" + table);
  dist::all_reduce(tensor, op);
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch10_failure_modes_ex2",
                  "An all_reduce that first checks that every rank makes the same call.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();

    // ---- Step 1: the same call on every rank goes through, with the closed-form sum
    dist::Tensor ones = dist::Tensor::full(4, 1.0);
    checked_all_reduce(ones, dist::ReduceOp::SUM);
    const bool summed = ones.to_vector<float>() == std::vector<float>(4, float(world));

    // ---- Step 2: a size that depends on the rank is refused on every rank, before the all_reduce
    bool refused = false;
    dist::Tensor uneven = dist::Tensor::full(2 + rank, 1.0);
    try {
      checked_all_reduce(uneven, dist::ReduceOp::SUM);
    } catch (const dist::Error& e) {
      refused = std::string(e.what()).find("rank 0: 2 elements") != std::string::npos;
      dist::out() << "refused: the ranks' all_reduce calls differ";
    }
    if (world == 1) refused = true;  // one rank cannot disagree with itself

    // ---- Step 3: nobody entered the refused all_reduce, so the group still works
    if (!dist::all_ranks_ok(summed && refused)) {
      dist::out0() << "MISMATCH: a matching call failed, or a mismatched one was let through";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: the matching all_reduce summed to " << world
                 << ", the mismatched one was refused on every rank, and the group still works";
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
