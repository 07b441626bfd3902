// smoke — the first program of the tour: can the ranks of this machine meet and add numbers?
//
// Every rank builds tensor = arange(world_size) + 1 + world_size * rank (post C's example),
// all-reduces it with SUM, and checks the result against the closed form
//   result[i] = sum over r of (i + 1 + world_size * r) = world_size * (i + 1) + world_size^2 *
//   (world_size - 1) / 2.
// With 2 ranks: [1, 2] + [3, 4] = tensor([4, 6]).
//
// Run:   ddprun --standalone --nproc-per-node 2 build/cpu/bin/smoke [--backend gloo|nccl|auto]
// With --backend nccl (the cuda preset, one GPU per rank) the tensors live on each rank's GPU and
// print with device='cuda:N'.
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
    std::string backend = "gloo";
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        dist::write_stdout(
            "usage: smoke [--backend gloo|nccl|auto]   (run it under ddprun, which sets RANK, "
            "WORLD_SIZE, MASTER_ADDR, MASTER_PORT)\n"
            "Each rank all-reduces arange(world_size) + 1 + world_size * rank and checks the "
            "sum.\n"
            "  --backend B  gloo (CPU, the default), nccl (one GPU per rank) or auto (nccl when "
            "every rank has a GPU)\n");
        return dist::kExitOk;
      }
      if (arg == "--backend" && i + 1 < argc) {
        backend = argv[++i];
      } else {
        throw dist::ConfigError("unknown argument " + arg + ": see --help");
      }
    }

    // --8<-- [start:steps]
    // ---- Step 1: join the group (env:// reads what ddprun set)
    dist::init_process_group({.backend = backend});
    const std::int64_t rank = dist::get_rank(), world = dist::get_world_size();

    // ---- Step 2: every rank contributes a different tensor, on its backend's device
    const dist::Device device = dist::get_device();  // cuda:LOCAL_RANK for nccl, else the CPU
    auto tensor = dist::arange(world, dist::kInt64, device) + 1 + world * rank;
    dist::out() << "before all_reduce: " << tensor;

    // ---- Step 3: sum it across ranks; every rank gets the same answer
    dist::all_reduce(tensor, dist::ReduceOp::SUM);
    dist::out() << "after all_reduce:  " << tensor;
    // --8<-- [end:steps]

    // ---- Step 4: check against the closed form, then leave cleanly
    const bool ok = tensor.equal(expected_sum(world).to(device));
    dist::destroy_process_group();
    if (!ok) {
      dist::err() << "MISMATCH: expected " << expected_sum(world) << ", got " << tensor;
      return dist::kExitFailure;
    }
    dist::out0() << "OK: every rank holds the closed-form sum";
    return dist::kExitOk;
  });
}
