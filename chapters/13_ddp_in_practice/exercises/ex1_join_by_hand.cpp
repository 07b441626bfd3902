// Chapter 13, exercise 1 — Join by hand: a rank out of batches shadows the others with zeros.
//
// Each rank trains a weight vector w (4 values) on its own batches, --counts of them: rank r has
// the r-th count (7, 4 and 2 by default), so rank 0 trains longest. A step's gradient on rank
// r's batch s is w - t(r, s) (the loss 0.5 |w - t|^2); the ranks average it with an
// all_reduce(SUM) divided by the world size, as DDP does, and every rank steps w -= lr * mean.
// A rank that has run out of batches must not stop calling the all_reduces: the others would
// wait for it until the timeout (chapter 10). Do what torch's Join([ddp]) does: every step
// begins with an all_reduce of the count of ranks still training (1 from a rank with a batch, 0
// from one without); when it is 0 every rank has joined and the loop ends; otherwise a rank
// without a batch shadows the gradient's all_reduce with zeros, and the mean still divides by
// the world size (torch's divide_by_initial_world_size). Here every rank applies the mean, so
// the replicas stay equal with no final broadcast. Write the step's contribution and the count.
// Grade it: ./tutorial check 13-ex1        Run it: ./tutorial run 13-ex1
#include <dist/cli.h>
#include <dist/dist.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr float kLr = 0.25f;

// Rank r's target at its batch s: multiples of 1/4.
std::vector<float> target(int rank, int step) {
  std::vector<float> t;
  for (int i = 0; i < 4; ++i)
    t.push_back(static_cast<float>((rank * 3 + step * 5 + i) % 7 - 3) / 4);
  return t;
}

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> counts;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) counts.push_back(std::stoi(item));
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    std::string counts_text = "7,4,2";
    dist::Cli cli("ch13_ddp_in_practice_ex1", "Join by hand: uneven inputs, shadowed with zeros.");
    cli.add_string("--counts", &counts_text, "each rank's number of batches, rank 0's first");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::vector<int> counts = parse_counts(counts_text);
    if (static_cast<int>(counts.size()) < world) {
      throw dist::ConfigError("--counts names " + std::to_string(counts.size()) +
                              " ranks' batches; give one count per rank (" + std::to_string(world) +
                              ")");
    }
    const int mine = counts[static_cast<std::size_t>(rank)];
    std::vector<float> w = {1.0f, 2.0f, 3.0f, 4.0f};
    int steps = 0;
    for (int step = 0;; ++step) {
      [[maybe_unused]] const bool has_batch = step < mine;
      std::vector<float> grad(4, 0.0f);
      // --- the part to write: Join's count, and this rank's contribution to the gradient
      // TODO(exercise): begin the step with Join's count: an all_reduce of 1 from a rank with a
      // batch, 0 from one without; when it is 0 every rank has joined: stop. A rank without a
      // batch then contributes zeros, and the mean divides by the initial world size. The
      // placeholder stops at the longest count (which a real job does not know) and, out of
      // batches, repeats this rank's last one.
      if (step == *std::max_element(counts.begin(), counts.end())) break;
      {
        const std::vector<float> t = target(rank, std::min(step, mine - 1));
        for (int i = 0; i < 4; ++i) grad[i] = w[i] - t[i];
      }
      const int divisor = world;
      // --- end of the part to write
      dist::Tensor mean = dist::Tensor::from(grad);
      dist::all_reduce(mean);
      mean /= divisor;
      const std::vector<float> m = mean.to_vector<float>();
      for (int i = 0; i < 4; ++i) w[i] -= kLr * m[i];
      ++steps;
    }
    char text[128];
    std::snprintf(text, sizeof text, "%.9g, %.9g, %.9g, %.9g", w[0], w[1], w[2], w[3]);
    dist::out() << "batches " << mine << ", steps " << steps;
    dist::out() << "final: " << text;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
