// Two mistakes from chapter 08's Pitfalls, made on purpose, so that a test can show the message
// each one ends with (chapters/08_ddp_linear/messages.toml runs them):
//
//   ddprun --standalone --nproc-per-node 3 ch08_mistakes different-model
//       the last rank builds Linear(2, 1), the others Linear(1, 1): DistributedDataParallel's
//       constructor stops every rank with a ConfigError naming both models (exit 2).
//   ddprun --standalone --nproc-per-node 2 ch08_mistakes --timeout 2 extra-step
//       the last rank takes one more step than the others, which go on to the epoch's loss:
//       each waits in a different all_reduce until the group's timeout (exit 1).
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <string>
#include <vector>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch08_mistakes",
                  "Chapter 08's pitfalls, made on purpose: different-model or "
                  "extra-step.");
    std::vector<std::string> cases;
    cli.allow_positional(&cases, "different-model | extra-step");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    if (cases.size() != 1 || (cases[0] != "different-model" && cases[0] != "extra-step")) {
      throw dist::ConfigError("give one case: different-model or extra-step");
    }
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const bool last = rank == world - 1;
    const std::int64_t in = cases[0] == "different-model" && last ? 2 : 1;
    dist::Linear model(in, 1, {std::vector<float>(static_cast<std::size_t>(in), 0.5f), {0.0f}});
    dist::DistributedDataParallel ddp(model.parameters());  // different-model stops here
    dist::SGD optimizer(model.parameters(), 0.01);
    const dist::Tensor x = dist::Tensor::from(std::vector<float>{1.0f});
    const dist::Tensor y = dist::Tensor::from(std::vector<float>{5.0f});
    for (int step = 0; step < (last ? 3 : 2); ++step) {  // the last rank's third step waits
      optimizer.zero_grad();
      model.backward(dist::mse_loss(model.forward(x), y).grad);
      ddp.average_gradients();
      optimizer.step();
    }
    dist::Tensor loss = dist::zeros(1, dist::kFloat64);  // the epoch's loss, as chapter 08 sums it
    dist::all_reduce(loss, dist::ReduceOp::SUM);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
