// bench_init — how long from launch to an initialised group.
//
// bench/run.py writes the wall-clock time (CLOCK_REALTIME, in ns) into BENCH_T0_NS just before it
// starts ddprun; each rank reads the clock again once init_process_group has returned, and rank 0
// prints the slowest rank's time. The launcher, the process start and the rendezvous are all in
// it, as they are for bench/torch_init.py (which also pays for `import torch`).
//
// Run:  BENCH_T0_NS=$(date +%s%N) ddprun --standalone --nproc-per-node 2
// build/release/bin/bench_init
#include <dist/dist.h>

#include <chrono>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("bench_init",
                  "Prints the time from $BENCH_T0_NS (set just before the launch) until every "
                  "rank has joined the group.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    const char* t0 = std::getenv("BENCH_T0_NS");
    if (t0 == nullptr || std::string(t0).empty()) {
      throw dist::ConfigError("BENCH_T0_NS is not set: export BENCH_T0_NS=$(date +%s%N) first");
    }
    const double start_ns = std::stod(t0);
    dist::init_process_group(cli.init_options());
    const double now_ns =
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
    dist::Tensor slowest = dist::Tensor::full(1, (now_ns - start_ns) / 1e6, dist::kFloat64);
    dist::all_reduce(slowest, dist::ReduceOp::MAX);
    dist::out0() << "init_ms: " << slowest.item(0);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
