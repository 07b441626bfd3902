// smoke — the first program of the tour: can the ranks of this machine meet and add numbers?
//
// Every rank builds tensor = arange(world_size) + 1 + world_size * rank (seed 002's example),
// all-reduces it with SUM, and checks the result against the closed form
//   result[i] = sum over r of (i + 1 + world_size * r) = world_size * (i + 1) + world_size^2 *
//   (world_size - 1) / 2.
// With 2 ranks: [1, 2] + [3, 4] = tensor([4, 6]).
//
// Run:   ddprun --standalone --nproc-per-node 2 build/cpu/bin/smoke
// Prints (lines from the two ranks may come in either order):
//   [rank 0/2] before all_reduce: tensor([1, 2])
//   [rank 1/2] before all_reduce: tensor([3, 4])
//   [rank 0/2] after all_reduce:  tensor([4, 6])
//   [rank 1/2] after all_reduce:  tensor([4, 6])
//   [rank 0/2] OK: every rank holds the closed-form sum
#include <dist/dist.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace {

dist::Tensor expected_sum(std::int64_t world) {
  auto t = dist::arange(world, dist::kInt64) + 1;
  return t * world + world * world * (world - 1) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
      dist::write_stdout(
          "usage: smoke   (run it under ddprun, which sets RANK, WORLD_SIZE, MASTER_ADDR, "
          "MASTER_PORT)\n"
          "Each rank all-reduces arange(world_size) + 1 + world_size * rank and checks the sum.\n");
      return 0;
    }
    if (argc > 1)
      throw dist::ConfigError(std::string("unknown argument ") + argv[1] + ": see --help");

    // ---- Step 1: join the group (env:// reads what ddprun set)
    dist::init_process_group({.backend = "gloo"});
    const std::int64_t rank = dist::get_rank(), world = dist::get_world_size();

    // ---- Step 2: every rank contributes a different tensor
    auto tensor = dist::arange(world, dist::kInt64) + 1 + world * rank;
    dist::out() << "before all_reduce: " << tensor;

    // ---- Step 3: sum it across ranks; every rank gets the same answer
    dist::all_reduce(tensor, dist::ReduceOp::SUM);
    dist::out() << "after all_reduce:  " << tensor;

    // ---- Step 4: check against the closed form, then leave cleanly
    const bool ok = tensor.equal(expected_sum(world));
    dist::destroy_process_group();
    if (!ok) {
      dist::err() << "MISMATCH: expected " << expected_sum(world) << ", got " << tensor;
      return dist::kExitFailure;
    }
    dist::out0() << "OK: every rank holds the closed-form sum";
    return dist::kExitOk;
  });
}
