// Chapter 13, exercise 2 — the bytes of PowerSGD, predicted, then measured.
//
// PowerSGD (dist/comm_hooks.h) views each gradient of n x m values (n its first dimension) as a
// matrix M and sends two thin ones, P = M Q of n x r and Q = M^T P of m x r, instead: (n + m) r
// values instead of n m. It does so only when that saves enough, (n + m) r * 2 < n m (its
// min_compression_rate, 2); a gradient with one dimension (a bias) and a matrix that would not
// shrink enough travel whole. Every value is a float32, and on Gloo's one-step exchange (calls of
// 128 KiB or less, as here) a rank sends each value to each of the W - 1 others. Predict the
// bytes one compressed step sends from each rank for the model below at rank r = 1 to 4; the
// program then trains 3 steps with powerSGD_hook (the first with allreduce_hook: its warm-up)
// and measures the last step's bytes. Write predicted_bytes.
// Grade it: ./tutorial check 13-ex2        Run it: ./tutorial run 13-ex2
#include <dist/cli.h>
#include <dist/comm_hooks.h>
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <cstdint>
#include <vector>

namespace {

// The model's layers: Linear(16, 32) -> ReLU -> Linear(32, 4).
struct Model {
  dist::Linear l1{16, 32, {std::vector<float>(512, 0.0625f), std::vector<float>(32, 0.0f)}};
  dist::ReLU relu;
  dist::Linear l2{32, 4, {std::vector<float>(128, -0.125f), std::vector<float>(4, 0.25f)}};
  std::vector<dist::Parameter*> parameters() {
    std::vector<dist::Parameter*> p = l1.parameters();
    for (dist::Parameter* q : l2.parameters()) p.push_back(q);
    return p;
  }
};

// The bytes one step of powerSGD_hook at rank r sends from each of `world` ranks.
std::int64_t predicted_bytes(const std::vector<dist::Parameter*>& params, int r, int world) {
  // --- the part to write
  std::int64_t values = 0;
  for (const dist::Parameter* p : params) {
    const std::vector<std::int64_t> sizes = p->sizes();  // {32, 16} for l1's weight, {32} its bias
    const std::int64_t n = sizes.front(), m = p->data.numel() / n;
    const bool compressed = sizes.size() > 1 && (n + m) * r * 2 < n * m;
    values += compressed ? (n + m) * r : n * m;
  }
  return 4 * values * (world - 1);
  // --- end of the part to write
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch13_ddp_in_practice_ex2", "PowerSGD's bytes per step, predicted and measured.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    for (int r = 1; r <= 4; ++r) {
      Model model;
      std::vector<dist::Parameter*> params = model.parameters();
      dist::DistributedDataParallel ddp(params);
      dist::PowerSGDState state({.matrix_approximation_rank = r, .start_powerSGD_iter = 2});
      ddp.register_comm_hook(state, dist::powerSGD_hook);
      dist::SGD sgd(params, 0.01);
      std::int64_t measured = 0;
      for (int step = 0; step < 3; ++step) {
        sgd.zero_grad();
        std::vector<float> x;
        for (int i = 0; i < 32; ++i)
          x.push_back(static_cast<float>((i * 7 + rank * 3 + step) % 9 - 4) / 8);
        const dist::Tensor out =
            model.l2.forward(model.relu.forward(model.l1.forward(dist::Tensor::from(x))));
        std::vector<float> target(out.numel(), 0.5f);
        const dist::MseLoss loss = dist::mse_loss(out, dist::Tensor::from(target));
        model.l1.backward(model.relu.backward(model.l2.backward(loss.grad)));
        const std::int64_t before = ddp.bytes_sent();
        ddp.average_gradients();
        measured = ddp.bytes_sent() - before;
        sgd.step();
      }
      dist::out0() << "rank " << r << ": predicted " << predicted_bytes(params, r, world)
                   << " bytes, measured " << measured;
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
