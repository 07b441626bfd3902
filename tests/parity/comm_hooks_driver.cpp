// The C++ half of comm_hooks_parity.py: DDP with one communication hook, trained a few steps on
// gradients both halves can make bit for bit, the averaged gradients and the weights written by
// rank 0 to a file. Run under a launcher (gloo on the CPU):
//   ddprun --standalone --nproc-per-node 2 comm_hooks_driver HOOK STEPS OUT
// HOOK is allreduce, fp16, bf16, powersgd1 or powersgd2 (PowerSGD at rank 1 or 2,
// start_powerSGD_iter 2, error feedback and warm start on). The model is Linear(16, 12) and
// Linear(12, 4)'s parameters (weight 12 x 16, bias 12, weight 4 x 12, bias 4) with fixed weights;
// at step s rank r's gradient of parameter k is torch.randn(numel) from a generator seeded 1000 s +
// 100 r + k (dist::randn draws torch's values, tests/unit/randn_parity.py), times 2^-20 for the
// first bias (float16's subnormals) and 2^15 for the second weight (past float16's 65504). Then
// SGD with lr 0.1.
// OUT gets two lines a step: "grads S: ..." and "weights S: ...", each value's float32 bits in hex.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "dist/comm_hooks.h"
#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/optim.h"

namespace {

std::string bits(const std::vector<dist::Parameter*>& params, bool grads) {
  std::string line;
  for (const dist::Parameter* p : params) {
    for (const float v : (grads ? p->grad : p->data).to_vector<float>()) {
      char hex[12];
      std::snprintf(hex, sizeof hex, " %08x", std::bit_cast<std::uint32_t>(v));
      line += hex;
    }
  }
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    if (argc != 4) throw dist::ConfigError("usage: comm_hooks_driver HOOK STEPS OUT");
    const std::string hook = argv[1];
    const int steps = std::stoi(argv[2]);
    dist::init_process_group();
    const int rank = dist::get_rank();
    constexpr double kScale[] = {1, 0x1p-20, 0x1p15, 1};
    // Weights 0.01 k - 1 (k the value's index in the layer), biases 0.
    std::vector<float> w1(192), w2(48);
    for (std::size_t k = 0; k < w1.size(); ++k) w1[k] = 0.01f * static_cast<float>(k) - 1.0f;
    for (std::size_t k = 0; k < w2.size(); ++k) w2[k] = 0.01f * static_cast<float>(k) - 1.0f;
    dist::Linear a(16, 12, {w1, std::vector<float>(12, 0)});
    dist::Linear b(12, 4, {w2, std::vector<float>(4, 0)});
    const std::vector<dist::Parameter*> params = {a.parameters()[0], a.parameters()[1],
                                                  b.parameters()[0], b.parameters()[1]};
    dist::DistributedDataParallel ddp(params);
    dist::PowerSGDState state(
        {.matrix_approximation_rank = hook == "powersgd2" ? 2 : 1, .start_powerSGD_iter = 2});
    if (hook == "allreduce") {
      ddp.register_comm_hook(dist::default_group(), dist::allreduce_hook);
    } else if (hook == "fp16") {
      ddp.register_comm_hook(dist::default_group(), dist::fp16_compress_hook);
    } else if (hook == "bf16") {
      ddp.register_comm_hook(dist::default_group(), dist::bf16_compress_hook);
    } else if (hook == "powersgd1" || hook == "powersgd2") {
      ddp.register_comm_hook(state, dist::powerSGD_hook);
    } else {
      throw dist::ConfigError("comm_hooks_driver: unknown hook '" + hook + "'");
    }
    dist::SGD optimizer(params, 0.1);
    std::ofstream out;
    if (rank == 0) out.open(argv[3]);
    for (int step = 0; step < steps; ++step) {
      optimizer.zero_grad();
      for (std::size_t k = 0; k < params.size(); ++k) {
        dist::Generator g(static_cast<std::uint64_t>(1000 * step + 100 * rank) + k);
        params[k]->grad.copy_(dist::randn(params[k]->grad.numel(), g) * kScale[k]);
      }
      ddp.average_gradients();
      if (rank == 0) out << "grads " << step << ":" << bits(params, true) << "\n";
      optimizer.step();
      if (rank == 0) out << "weights " << step << ":" << bits(params, false) << "\n";
    }
    dist::destroy_process_group();
    return 0;
  });
}
