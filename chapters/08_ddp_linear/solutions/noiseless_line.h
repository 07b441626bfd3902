// Chapter 08's exercises train the same way: y = 3x + 2 without noise, x evenly spaced in
// [-2, 2), 256 samples sharded by DistributedSampler, batches of 8, SGD. Only the learning
// rate, the epochs and how the gradients are combined across ranks differ.
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/sampler.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace ch08 {

// `combine` runs between backward and the optimizer step: the exercise's way of sharing the
// gradients across ranks.
inline void train_on_line(dist::Linear& model, double lr, int epochs,
                          const std::function<void()>& combine) {
  constexpr int kSamples = 256;
  std::vector<float> xs, ys;
  for (int i = 0; i < kSamples; ++i) {
    xs.push_back(-2.0f + 4.0f * static_cast<float>(i) / kSamples);
    ys.push_back(3.0f * xs.back() + 2.0f);
  }
  const dist::Device device = model.weight().data.device();
  dist::SGD optimizer(model.parameters(), lr);
  dist::DistributedSampler sampler(kSamples, {.seed = 0});
  for (int epoch = 0; epoch < epochs; ++epoch) {
    sampler.set_epoch(epoch);
    for (const auto& batch : dist::BatchSampler(sampler, 8, false).batches()) {
      std::vector<float> x, y;
      for (std::int64_t i : batch) x.push_back(xs[i]), y.push_back(ys[i]);
      optimizer.zero_grad();
      model.backward(dist::mse_loss(model.forward(dist::Tensor::from(x, device)),
                                    dist::Tensor::from(y, device))
                         .grad);
      combine();
      optimizer.step();
    }
  }
}

}  // namespace ch08
