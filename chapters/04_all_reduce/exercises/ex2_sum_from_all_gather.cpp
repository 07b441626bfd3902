// Chapter 04, exercise 2 — all_reduce(SUM) rebuilt from all_gather, and what it costs.
//
// Rebuild the SUM of every rank's tensor from all_gather and additions on this rank, print it
// beside the library's all_reduce, and count how many elements all_gather brought to this rank
// (compare that with the ring's 2(W - 1)/W of a tensor, Step 9 of the chapter).
// Grade it: ./tutorial check 04-ex2        Run it: ./tutorial run 04-ex2
#include <dist/dist.h>

#include <cstdint>
#include <vector>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch04_all_reduce_ex2", "SUM from all_gather, compared with all_reduce.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const std::int64_t rank = dist::get_rank(), world = dist::get_world_size();
    const auto tensor = dist::arange(world, dist::kInt64, dist::get_device()) + 1 + world * rank;

    // TODO(exercise): gather every rank's tensor (dist::all_gather(std::vector<dist::Tensor>&,
    // tensor)), add them up here, and count the elements this rank received from the others.
    dist::Tensor by_hand = tensor;  // only this rank's tensor: replace it
    const std::int64_t received = 0;

    dist::Tensor by_library = tensor;
    dist::all_reduce(by_library);
    dist::out() << "sum from all_gather: " << by_hand << ", from all_reduce: " << by_library;
    dist::out() << "elements received by all_gather: " << received;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
