// Chapter 12, exercise 1 — ZeRO-1 by hand, from the two halves of a ring all_reduce.
//
// Every rank holds the same n parameters and its own gradient of them. DDP would all_reduce the
// gradient (divided by W) and let every rank step all n values, keeping the optimizer's state
// (SGD's momentum here) for all n on every rank. ZeRO-1 splits that all_reduce in two: pad the
// gradient to W chunks of c = ceil(n / W) values, reduce_scatter it so that rank r gets the mean
// gradient of chunk r only, step that chunk (state for c values), and all_gather the updated
// chunks so that every rank holds all n again, without the padding.
// Grade it: ./tutorial check 12-ex1        Run it: ./tutorial run 12-ex1 --solution
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

// The parameters every rank starts from, and rank r's gradient at step t: closed forms that the
// grader computes too.
dist::Tensor initial_parameters(std::int64_t n) {
  std::vector<float> p;
  for (std::int64_t i = 0; i < n; ++i) p.push_back(1.0f - static_cast<float>(i) / 8);
  return dist::Tensor::from(p, dist::get_device());
}
dist::Tensor gradient(int rank, int step, std::int64_t n) {
  std::vector<float> g;
  for (std::int64_t i = 0; i < n; ++i) {
    g.push_back(static_cast<float>((rank + 1) * (i % 5 - 2) + step) / 4);
  }
  return dist::Tensor::from(g, dist::get_device());
}

// "v0, v1, ...", each with 9 significant digits: enough to tell every float32 apart.
std::string values(const dist::Tensor& t) {
  std::string text;
  for (float v : t.cpu().to_vector<float>()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.9g", text.empty() ? "" : ", ", static_cast<double>(v));
    text += buf;
  }
  return text;
}

// What DDP does with the same gradients: all_reduce the whole gradient, step all n values.
dist::Tensor ddp_reference(std::int64_t n, int steps, double lr, double momentum) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::Parameter whole{"whole", initial_parameters(n),
                        dist::Tensor(n, dist::kFloat32, dist::get_device())};
  dist::SGD optimizer({&whole}, lr, {.momentum = momentum});
  for (int step = 0; step < steps; ++step) {
    whole.grad = gradient(rank, step, n) / world;
    dist::all_reduce(whole.grad, dist::ReduceOp::SUM);
    optimizer.step();
  }
  return whole.data;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int numel = 11, steps = 3;
    double lr = 0.1, momentum = 0.9;
    dist::Cli cli("ch12_sharding_ex1", "ZeRO-1 by hand: reduce_scatter, step a shard, all_gather.");
    cli.add_int("--numel", &numel, "parameters every rank holds", 1, 1 << 20);
    cli.add_int("--steps", &steps, "optimizer steps", 1, 1000);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::int64_t n = numel;
    dist::out0() << n << " parameters on " << world << " ranks, " << steps << " steps of SGD (lr "
                 << lr << ", momentum " << momentum << ")";
    dist::Tensor params = initial_parameters(n);  // the same on every rank
    // ZeRO-1's collectives on a group of their own, so that its bytes_sent() counts them alone.
    std::unique_ptr<dist::ProcessGroup> group = dist::new_group();

    // ---- Step 1: the layout: chunk r of the padded vector is rank r's shard
    const std::int64_t c = (n + world - 1) / world;  // ceil(n / W): W chunks cover n, padded
    dist::Tensor padded(c * world, dist::kFloat32, dist::get_device());  // zeros past n
    padded.assign_slice(0, params);
    dist::Parameter shard{"shard", padded.slice(c * rank, c),
                          dist::Tensor(c, dist::kFloat32, dist::get_device())};
    dist::SGD optimizer({&shard}, lr, {.momentum = momentum});  // state for c values only

    for (int step = 0; step < steps; ++step) {
      const dist::Tensor grad = gradient(rank, step, n);  // this rank's, n values
      // ---- Step 2: each rank gets the mean gradient of its chunk
      dist::Tensor flat(c * world, dist::kFloat32, dist::get_device());  // padding: zero
      flat.assign_slice(0, grad / world);  // divided by W as DDP divides: the sum is the mean
      group->reduce_scatter_tensor(shard.grad, flat);
      // ---- Step 3: step the shard, then every rank gathers every updated shard
      optimizer.step();
      dist::Tensor gathered(c * world, dist::kFloat32, dist::get_device());
      group->all_gather_into_tensor(gathered, shard.data);
      params = gathered.slice(0, n);  // the padding is at the end
    }

    const std::int64_t first = std::min(c * rank, n), last = std::min(c * (rank + 1), n);
    dist::out() << "my chunk: values [" << first << ", " << last << ") of " << n << ", a shard of "
                << shard.data.numel() << " values";
    const auto& buffers = optimizer.momentum_buffers();
    dist::out() << "optimizer state: " << (buffers.empty() ? 0 : buffers[0].numel())
                << " values of momentum";
    dist::out() << "my shard's gradient at the last step: " << values(shard.grad);
    dist::out() << "final: " << values(params);
    dist::out() << "bytes sent by ZeRO-1's group: " << group->bytes_sent() << " in " << steps
                << " steps";
    group.reset();  // before destroy_process_group()
    dist::out() << "DDP's final: " << values(ddp_reference(n, steps, lr, momentum));
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
