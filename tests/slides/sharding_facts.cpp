// What chapter 12's diagrams (slides/tools/diagrams.mjs: sharding_stages.svg and
// sharding_timeline.svg) are checked against: one training step of dist::ShardedDataParallel at
// each stage over units of the sizes given, with dist::Adam over its shards, as the library runs
// it. Rank 0 prints one JSON line per run:
//   {"stage": S, "prefetch": P, "memory": {...}, "expected_memory": {...}, "bytes_sent": B,
//    "expected_bytes_sent": E, "adam_state": A, "order": ["AG0", "AG1", ..., "RS0"]}
// memory is what memory() says between two steps, bytes_sent what the step sent, adam_state
// Adam's state_bytes() after its first step, and order the gathers (AGu) and reduce_scatters
// (RSu) of the step in the order the communication group received them (the flight recorder's
// record, so DIST_TRACE_DIR must be set: ddprun sets it). Stage 0 is DDP's optimizer: Adam over
// the whole units (only adam_state). Units are told apart by their chunk sizes, which must differ
// for the order to name them.
//
//   ddprun --standalone --nproc-per-node 4 sharding_facts 100864 262656 262656 5130
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "dist/flight_recorder.h"
#include "dist/optim.h"
#include "dist/sharded.h"

namespace {

std::string memory_json(const dist::ShardedDataParallel::Memory& m) {
  return "{\"parameters\": " + std::to_string(m.parameters) +
         ", \"gradients\": " + std::to_string(m.gradients) +
         ", \"shards\": " + std::to_string(m.shards) +
         ", \"shard_gradients\": " + std::to_string(m.shard_gradients) +
         ", \"in_flight\": " + std::to_string(m.in_flight) + "}";
}

// The model: one parameter per unit, of the unit's size; its values and gradients are 1s (what
// they are does not change what is held or sent).
std::vector<dist::Parameter> model(const std::vector<std::int64_t>& sizes) {
  std::vector<dist::Parameter> params;
  for (std::size_t u = 0; u < sizes.size(); ++u) {
    params.push_back({"unit" + std::to_string(u), dist::Tensor::full(sizes[u], 1.0),
                      dist::Tensor(sizes[u], dist::kFloat32)});
  }
  return params;
}

// One step of the loop in dist/sharded.h, without the layers' arithmetic: backward's gradient of
// each unit is set to ones between before_backward and after_backward.
std::string one_step(const std::vector<std::int64_t>& sizes, int stage, bool prefetch) {
  std::vector<dist::Parameter> params = model(sizes);
  std::vector<std::vector<dist::Parameter*>> units;
  for (dist::Parameter& p : params) units.push_back({&p});
  dist::ShardedDataParallel sharded(units, {.stage = stage, .prefetch = prefetch});
  dist::Adam adam(sharded.shards(), 1e-3);
  dist::FlightRecorder* recorder = dist::flight::recorder();
  const std::uint64_t first =
      recorder->entries().empty() ? 0 : recorder->entries().back().record + 1;
  const std::int64_t sent = sharded.bytes_sent();

  adam.zero_grad();
  for (std::size_t u = 0; u < units.size(); ++u) {
    sharded.before_forward(u);
    sharded.after_forward(u);
  }
  for (std::size_t u = units.size(); u-- > 0;) {
    sharded.before_backward(u);
    params[u].grad.fill_(1);
    sharded.after_backward(u);
  }
  sharded.finish_gradient_sync();
  adam.step();
  sharded.after_step();

  // The communication group's calls of this step (the default group is group 0).
  std::string order;
  for (const auto& entry : recorder->entries()) {
    if (entry.record < first || entry.call.group == 0) continue;
    const std::string op = entry.call.op;
    std::string name = op == "all_gather_into_tensor"  ? "AG"
                       : op == "reduce_scatter_tensor" ? "RS"
                                                       : op;
    for (std::size_t u = 0; u < units.size(); ++u) {
      if (entry.call.numel == sharded.unit_chunk(u)) name += std::to_string(u);
    }
    order += (order.empty() ? "\"" : ", \"") + name + "\"";
  }
  return "{\"stage\": " + std::to_string(stage) +
         ", \"prefetch\": " + (prefetch ? "true" : "false") +
         ", \"memory\": " + memory_json(sharded.memory()) + ", \"expected_memory\": " +
         memory_json(
             dist::ShardedDataParallel::expected_memory(stage, sizes, dist::get_world_size())) +
         ", \"bytes_sent\": " + std::to_string(sharded.bytes_sent() - sent) +
         ", \"expected_bytes_sent\": " +
         std::to_string(
             dist::ShardedDataParallel::expected_bytes_sent(stage, sizes, dist::get_world_size())) +
         ", \"adam_state\": " + std::to_string(adam.state_bytes()) + ", \"order\": [" + order +
         "]}";
}

// DDP's optimizer (stage 0): Adam over the whole units.
std::string whole_adam(const std::vector<std::int64_t>& sizes) {
  std::vector<dist::Parameter> params = model(sizes);
  std::vector<dist::Parameter*> all;
  for (dist::Parameter& p : params) all.push_back(&p);
  dist::Adam adam(all, 1e-3);
  adam.step();
  return "{\"stage\": 0, \"adam_state\": " + std::to_string(adam.state_bytes()) + "}";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::int64_t> sizes;
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
    if (sizes.empty()) {
      std::fprintf(stderr, "usage: sharding_facts UNIT_SIZE...\n");
      return 2;
    }
    dist::init_process_group({.backend = "gloo"});
    if (!dist::flight::recorder()) {
      std::fprintf(stderr,
                   "sharding_facts: set DIST_TRACE_DIR (ddprun does): the order comes "
                   "from the flight recorder\n");
      return 2;
    }
    std::vector<std::string> lines = {whole_adam(sizes)};
    for (int stage : {1, 2, 3}) lines.push_back(one_step(sizes, stage, true));
    lines.push_back(one_step(sizes, 3, false));
    if (dist::get_rank() == 0) {
      for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    }
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sharding_facts: %s\n", e.what());
    return 1;
  }
}
