// Chapter 03, exercise 2 — nobody leaves init_process_group before the last rank arrives.
//
// Two people starting two terminals never start at the same instant. Rank r here waits
// r x --stagger-ms before calling init_process_group, and notes the time just before the call and
// just after it returns, on std::chrono::steady_clock (CLOCK_MONOTONIC on Linux: one clock for all
// processes of a machine, so times of different ranks compare). An all_reduce MAX gives the
// latest call; every rank's return comes after it, because init is a rendezvous: each rank waits
// until all world_size ranks have announced themselves. That is also why the start order of
// chapter 03's two programs does not matter.
// Grade it: ./tutorial check 03-ex2        Run it: ./tutorial run 03-ex2 --solution
#include <dist/dist.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch03_two_programs_ex2",
                  "Start the ranks at staggered times; check that init returns after the last "
                  "one arrives.");
    int stagger_ms = 300;
    cli.add_int("--stagger-ms", &stagger_ms, "how much later each rank starts than the previous", 0,
                5000);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    // Before init, only the launcher knows our rank.
    const int launcher_rank = dist::read_launch_env().rank.value_or(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(launcher_rank * stagger_ms));

    const std::int64_t called = now_ns();
    dist::init_process_group(cli.init_options());
    const std::int64_t returned = now_ns();
    // The latest call over all ranks, read back as int64 (item() would round past 2^53 ns).
    dist::Tensor calls = dist::Tensor::from<std::int64_t>({called}, dist::get_device());
    dist::all_reduce(calls, dist::ReduceOp::MAX);
    const std::int64_t latest = calls.cpu().to_vector<std::int64_t>()[0];

    dist::out() << "started " << launcher_rank * stagger_ms << " ms after rank 0; init called at "
                << called << " ns, returned at " << returned << " ns (steady clock)";
    dist::out() << "the last rank called init at " << latest
                << " ns; returned after it: " << (returned >= latest ? "yes" : "no");
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
