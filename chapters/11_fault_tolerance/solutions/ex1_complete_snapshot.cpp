// Exercise 11-1: a snapshot that holds everything the loop changes.
//
// PyTorch's multigpu_torchrun.py saves the model and the epoch count. This job trains one number
// x towards 3 with SGD and momentum (velocity = 0.9 velocity + g; x -= 0.1 velocity); each rank's
// gradient has a noise of its own, drawn from its own generator, and the ranks average their
// gradients. Rank 0 writes a snapshot every 5 steps; every rank loads it at start. Under
// `ddprun --max-restarts 1` with --crash-at-step, the last rank dies on the first attempt and the
// job starts again from the snapshot.
//
// The snapshot holds x, the steps done, the momentum buffer and every rank's generator state:
// everything the loop changes, so the crashed job ends with the bits of the uninterrupted one.
//
// Run:   ./tutorial run 11-ex1 --solution             (no crash: the reference)
//        ./tutorial check 11-ex1                      (crashes, restarts, compares)
#include <dist/dist.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "snapshot_record.h"

int main(int argc, char** argv) {
  return dist::run_main([&] {
    std::string path = "ch11_ex1_snapshot.txt";
    int steps = 40, crash_at_step = -1;
    dist::Cli cli("ch11_fault_tolerance_ex1", "Exercise 11-1: a snapshot that holds everything.");
    cli.add_string("--snapshot", &path, "the snapshot file (removed when the job is done)");
    cli.add_int("--steps", &steps, "steps of training", 1, 100000);
    cli.add_int("--crash-at-step", &crash_at_step, "the last rank dies before it (attempt 0)", -1,
                100000);
    if (!cli.parse(argc, argv)) return 0;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
    const int attempt = restarts == nullptr ? 0 : std::atoi(restarts);

    float x = 0, velocity = 0;
    dist::Generator noise(100 + static_cast<std::uint64_t>(rank));  // this rank's own stream
    std::int64_t done = 0;
    if (std::filesystem::exists(path)) {
      const ex11::Record r = ex11::read_record(path);
      done = r.steps_done;
      x = r.x;
      // Momentum is state: without it the next steps start a new average. The generator is
      // state too, and each rank has its own: take back this rank's, not rank 0's.
      velocity = r.velocity;
      noise.set_state(r.generators[static_cast<std::size_t>(rank)]);
    }
    dist::out0() << "attempt " << attempt << ": starting at step " << done;

    for (; done < steps; ++done) {
      if (attempt == 0 && done == crash_at_step && rank == world - 1) {
        dist::out() << "crashing on purpose before step " << done;
        std::_Exit(1);
      }
      const double draw = static_cast<double>(noise.random()) / 4294967296.0 - 0.5;  // [-0.5, 0.5)
      dist::Tensor g = dist::Tensor::from<float>({x - 3.0f + static_cast<float>(draw)});
      dist::all_reduce(g, dist::ReduceOp::AVG);  // the gradient every rank steps with
      velocity = 0.9f * velocity + static_cast<float>(g.item(0));
      x -= 0.1f * velocity;
      if ((done + 1) % 5 == 0) {
        ex11::Record r{.steps_done = done + 1, .x = x};
        // The momentum buffer, and every rank's generator state: rank 0 writes the file, so the
        // other ranks' states come to it with a gather, which every rank must call.
        r.velocity = velocity;
        dist::gather(noise.get_state(), rank == 0 ? &r.generators : nullptr, 0);
        if (rank == 0) ex11::write_record(path, r);
      }
    }

    char text[64];
    std::snprintf(text, sizeof text, "%a", static_cast<double>(x));
    dist::out() << "final: x = " << text << " after " << done << " steps";
    dist::barrier();
    if (rank == 0) std::filesystem::remove(path);  // the job is done
    dist::destroy_process_group();
    return 0;
  });
}
