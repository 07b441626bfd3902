// Which backend a rank can run, and what `auto` picks (see choice.h).
#include "backends/choice.h"

#include <algorithm>
#include <string>

namespace dist::backends {

std::string nccl_problem(const gpu::Census& c, int local_rank, int local_world_size) {
  if (std::string reason = gpu::no_gpu_reason(c); !reason.empty()) return reason;
  const int gpus = c.device_count;
  const std::string shown = std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  if (local_rank >= gpus || local_world_size > gpus) {
    return std::to_string(local_world_size) + " ranks run on this machine (LOCAL_RANK " +
           std::to_string(local_rank) + " of " + std::to_string(local_world_size) +
           ") but this process sees only " + shown +
           ", and NCCL cannot put two ranks on one GPU; start at most " + std::to_string(gpus) +
           " per machine (ddprun --nproc-per-node " + std::to_string(gpus) + ")";
  }
  return "";
}

std::string nccl_refusal(int rank, int local_rank, const std::string& problem) {
  return "backend nccl cannot run on rank " + std::to_string(rank) + " (LOCAL_RANK " +
         std::to_string(local_rank) + "): " + problem +
         ". Use the CPU backend instead (--backend gloo), or --backend auto to pick one for you";
}

BackendChoice choose_auto(const std::vector<std::string>& problems_by_rank) {
  int unable = 0;
  int first = -1;
  for (std::size_t r = 0; r < problems_by_rank.size(); ++r) {
    if (problems_by_rank[r].empty()) continue;
    if (first < 0) first = static_cast<int>(r);
    ++unable;
  }
  if (first < 0) return {"nccl", "every rank has a GPU of its own"};
  const std::string& problem = problems_by_rank[static_cast<std::size_t>(first)];
  if (static_cast<std::size_t>(unable) == problems_by_rank.size() &&
      std::all_of(problems_by_rank.begin(), problems_by_rank.end(),
                  [&](const std::string& p) { return p == problem; })) {
    return {"gloo", (unable == 1 ? "" : "on every rank, ") + problem};
  }
  std::string who = "rank " + std::to_string(first);
  if (unable > 1) {
    who += " (and " + std::to_string(unable - 1) + (unable == 2 ? " other" : " others") + ")";
  }
  return {"gloo", who + ": " + problems_by_rank[static_cast<std::size_t>(first)]};
}

}  // namespace dist::backends

namespace dist {

BackendChoice choose_backend_for_machine(int local_world_size) {
  std::vector<std::string> problems;  // indexed by local rank, as init gathers them by rank
  for (int local_rank = 0; local_rank < local_world_size; ++local_rank) {
    problems.push_back(backends::nccl_problem(gpu::census(), local_rank, local_world_size));
  }
  return backends::choose_auto(problems);
}

}  // namespace dist
