// Chapter 04's support code (support.h).
#include "support.h"

#include <cstdlib>

namespace ch04 {

std::string label(const std::string& name) {
  std::string text = name + ":";
  text.resize(17, ' ');  // "reduce_scatter: " and one space more
  return text;
}

std::string list_repr(const std::vector<dist::Tensor>& tensors) {
  std::string text = "[";
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    text += (i > 0 ? ", " : "") + tensors[i].repr();
  }
  return text + "]";
}

bool equal(const std::vector<dist::Tensor>& got, const std::vector<dist::Tensor>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!got[i].cpu().equal(want[i].cpu())) return false;
  }
  return true;
}

void draw_ring(int world) {
  if (world == 1) {
    dist::out0() << "ring all-reduce on 1 rank: nothing to send";
    return;
  }
  dist::out0() << "ring all-reduce on " << world << " ranks, the tensor cut in " << world
               << " chunks c0..c" << world - 1 << ":";
  for (int phase = 0; phase < 2; ++phase) {
    for (int step = 0; step < world - 1; ++step) {
      std::string moves;
      for (int r = 0; r < world; ++r) {
        const int c = (((phase == 0 ? r - step : r + 1 - step) % world) + world) % world;
        moves += (r ? " | " : "") + std::to_string(r) + "->" + std::to_string((r + 1) % world) +
                 " c" + std::to_string(c);
      }
      dist::out0() << "  " << (phase == 0 ? "reduce-scatter" : "all-gather    ") << " step "
                   << step + 1 << ": " << moves;
    }
  }
  dist::out0() << "  each rank sent " << 2 * (world - 1) << " chunks of 1/" << world
               << " of the tensor";
}

void check_local_rank_argument(int from_argument, int local_rank) {
  if (from_argument >= 0 && from_argument != local_rank) {
    throw dist::ConfigError("--local-rank " + std::to_string(from_argument) +
                            " disagrees with this rank's LOCAL_RANK " + std::to_string(local_rank) +
                            ": pass it only as a launcher does (ddprun --local-rank-arg), or "
                            "leave it out and let LOCAL_RANK say it");
  }
}

std::string where_local_rank_came_from(int local_rank, int from_argument) {
  std::string text =
      "local_rank " + std::to_string(local_rank) + ", from " +
      (std::getenv("LOCAL_RANK") != nullptr ? "LOCAL_RANK" : "the rank (no LOCAL_RANK)");
  return text + (from_argument >= 0 ? "; the launcher's --local-rank argument says the same"
                                    : "; no --local-rank argument, as under torchrun");
}

int verdict(bool ok, int rank, const std::string& what) {
  const bool job_ok = dist::all_ranks_ok(ok);
  dist::destroy_process_group();
  if (!job_ok) {
    dist::out0() << "MISMATCH: some rank's result differs from its closed form (see above)";
    return rank == 0 ? dist::kExitFailure : dist::kExitOk;
  }
  dist::out0() << "OK: " << what;
  return dist::kExitOk;
}

}  // namespace ch04
