// The C++ half of mixed_precision_parity.py: reads one case per line from stdin, prints one line
// per case. Values are written as Python writes a float (each one a float32 value); results are
// float32 bit patterns in hex (half results widened first, which is exact), ','-separated.
//
//   linear DTYPE N IN OUT X W B G
//     One dist::Linear(IN, OUT) with weight W and bias B (float32 master weights): forward of the
//     N x IN input X cast to DTYPE (bfloat16 or float16), backward of G (N x OUT, cast to DTYPE).
//     Prints "out=... gx=... gw=... gb=...": the output and d loss / d x (DTYPE, widened) and the
//     float32 grads of the weight and the bias.
//   train DTYPE N IN HIDDEN OUT STEPS INIT_SCALE GROWTH_INTERVAL LR X LABELS W1 B1 W2 B2
//     Linear(IN, HIDDEN) -> ReLU -> Linear(HIDDEN, OUT) -> cross_entropy, trained STEPS times on
//     one batch in mixed precision: the forward and backward in DTYPE from float32 master weights,
//     SGD (lr LR) on the master weights, a dist::GradScaler(INIT_SCALE, GROWTH_INTERVAL). Prints
//     one record a step, "SCALE/STEPPED/LOSS" (the scale before the step, 0/1, the loss as a
//     float32), then "w1=... b1=... w2=... b2=...": the master weights at the end.
// Each X, W, ... is one token of ','-separated values.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "dist/amp.h"
#include "dist/nn.h"
#include "dist/optim.h"
#include "dist/tensor.h"
#include "parity_driver.h"

namespace {

using dist::Tensor;

std::vector<float> floats(const std::string& token) {
  std::vector<float> values;
  std::istringstream in(token);
  std::string value;
  while (std::getline(in, value, ',')) {
    values.push_back(static_cast<float>(parity::parse<double>(value, "mixed_precision_driver")));
  }
  return values;
}

std::string bits(const Tensor& t) {
  std::string out;
  for (float v : t.to(dist::kFloat32).to_vector<float>()) {
    char text[16];
    std::snprintf(text, sizeof text, "%08x", std::bit_cast<std::uint32_t>(v));
    out += (out.empty() ? "" : ",") + std::string(text);
  }
  return out;
}

dist::DType dtype(const std::string& name) {
  if (name == "bfloat16") return dist::kBFloat16;
  if (name == "float16") return dist::kFloat16;
  throw dist::ConfigError("mixed_precision_driver: dtype " + name + " is not bfloat16 or float16");
}

template <typename T>
T next(std::istringstream& in) {
  std::string token;
  in >> token;
  return parity::parse<T>(token, "mixed_precision_driver");
}

std::string next_token(std::istringstream& in) {
  std::string token;
  in >> token;
  return token;
}

std::string linear_case(std::istringstream& in) {
  const dist::DType dt = dtype(next_token(in));
  const auto n = next<std::int64_t>(in), fan_in = next<std::int64_t>(in),
             fan_out = next<std::int64_t>(in);
  (void)n;
  const std::vector<float> x = floats(next_token(in)), w = floats(next_token(in)),
                           b = floats(next_token(in)), g = floats(next_token(in));
  dist::Linear layer(fan_in, fan_out, {.weight = w, .bias = b});
  const Tensor out = layer.forward(Tensor::from(x).to(dt));
  const Tensor gx = layer.backward(Tensor::from(g).to(dt));
  return "out=" + bits(out) + " gx=" + bits(gx) + " gw=" + bits(layer.weight().grad) +
         " gb=" + bits(layer.bias().grad);
}

std::string train_case(std::istringstream& in) {
  const dist::DType dt = dtype(next_token(in));
  const auto n = next<std::int64_t>(in), fan_in = next<std::int64_t>(in),
             hidden = next<std::int64_t>(in), classes = next<std::int64_t>(in),
             steps = next<std::int64_t>(in);
  const auto init_scale = next<double>(in);
  const auto growth_interval = next<std::int64_t>(in);
  const auto lr = next<double>(in);
  const std::vector<float> x = floats(next_token(in));
  std::vector<std::int64_t> labels;
  for (float label : floats(next_token(in))) labels.push_back(static_cast<std::int64_t>(label));
  const std::vector<float> w1 = floats(next_token(in)), b1 = floats(next_token(in)),
                           w2 = floats(next_token(in)), b2 = floats(next_token(in));
  (void)n;
  dist::Linear l1(fan_in, hidden, {.weight = w1, .bias = b1});
  dist::ReLU relu;
  dist::Linear l2(hidden, classes, {.weight = w2, .bias = b2});
  std::vector<dist::Parameter*> params = l1.parameters();
  for (dist::Parameter* p : l2.parameters()) params.push_back(p);
  dist::SGD optimizer(params, lr);
  dist::GradScaler scaler({.init_scale = init_scale, .growth_interval = growth_interval});
  const Tensor input = Tensor::from(x).to(dt);
  const Tensor y = Tensor::from(labels);
  std::string out;
  for (std::int64_t step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    const Tensor logits = l2.forward(relu.forward(l1.forward(input)));
    const dist::CrossEntropy loss = dist::cross_entropy(logits, y, classes);
    l1.backward(relu.backward(l2.backward(scaler.scale(loss.grad))));
    const float scale = scaler.get_scale();
    const bool stepped = scaler.step(optimizer);
    scaler.update();
    out += bits(Tensor::from({scale})) + "/" + (stepped ? "1" : "0") + "/" +
           bits(Tensor::from({static_cast<float>(loss.loss)})) + " ";
  }
  return out + "w1=" + bits(l1.weight().data) + " b1=" + bits(l1.bias().data) +
         " w2=" + bits(l2.weight().data) + " b2=" + bits(l2.bias().data);
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    const std::string kind = next_token(in);
    try {
      std::cout << (kind == "linear" ? linear_case(in) : train_case(in)) << "\n";
    } catch (const dist::Error& e) {
      std::cout << "error: " << e.what() << "\n";
    }
  }
  return 0;
}
