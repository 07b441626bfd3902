// Mixed precision on a real GPU: the half-precision layers (dist/nn.h) and a GradScaler
// (dist/amp.h) with the model on cuda:0 give the CPU's bits. On a GPU the half values are rounded
// and widened through the host, around the float32 kernels, which give the CPU's bits themselves
// (gpu_test checks those): so the same steps must end with the same master weights, bit for bit.
//
// Without a usable GPU the binary exits 77, which CTest reports as skipped (one CTest test, as
// gpu_test is, since discovering the tests would need a GPU too).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "dist/amp.h"
#include "dist/dist.h"
#include "dist/nn.h"
#include "dist/optim.h"

namespace {

using dist::Device;
using dist::Tensor;

// Three float16 (or bfloat16) steps of Linear(6, 4) -> ReLU -> Linear(4, 3) -> cross_entropy on
// `device`, with a GradScaler whose first scale overflows float16; returns the master weights.
std::vector<float> train(Device device, dist::DType dtype) {
  std::vector<float> w1(24), w2(12), x(5 * 6);
  for (std::size_t i = 0; i < w1.size(); ++i) w1[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = 0.3f - 0.07f * static_cast<float>(i % 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.11f * static_cast<float>(i % 9) - 0.4f;
  dist::Linear l1(6, 4, {.weight = w1, .bias = {0.1f, -0.1f, 0.2f, 0.0f}}, device);
  dist::ReLU relu;
  dist::Linear l2(4, 3, {.weight = w2, .bias = {0.0f, 0.05f, -0.05f}}, device);
  std::vector<dist::Parameter*> params = l1.parameters();
  for (dist::Parameter* p : l2.parameters()) params.push_back(p);
  dist::SGD optimizer(params, 0.5);
  dist::GradScaler scaler({.init_scale = 0x1p24, .growth_interval = 1});
  const Tensor input = Tensor::from(x, device).to(dtype);
  const Tensor labels = Tensor::from<std::int64_t>({0, 2, 1, 1, 0}, device);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    const Tensor logits = l2.forward(relu.forward(l1.forward(input)));
    const dist::CrossEntropy loss = dist::cross_entropy(logits, labels, 3);
    l1.backward(relu.backward(l2.backward(scaler.scale(loss.grad))));
    scaler.step(optimizer);
    scaler.update();
  }
  std::vector<float> all;
  for (dist::Parameter* p : params) {
    for (float v : p->data.to_vector<float>()) all.push_back(v);
  }
  all.push_back(scaler.get_scale());
  return all;
}

TEST(MixedPrecisionOnGpu, EndsWithTheCpusMasterWeights) {
  for (dist::DType dtype : {dist::kFloat16, dist::kBFloat16}) {
    EXPECT_EQ(train(Device::cuda(0), dtype), train(Device::cpu(), dtype))
        << dist::dtype_name(dtype);
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!dist::cuda_is_available()) {
    std::printf("amp_gpu_test: skipped: %s\n", dist::cuda_unavailable_reason().c_str());
    return dist::kExitSkipped;
  }
  return RUN_ALL_TESTS();
}
