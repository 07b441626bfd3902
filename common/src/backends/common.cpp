// What every backend checks and says the same way (see common.h).
#include "backends/common.h"

#include <sstream>

#include "dist/check.h"

namespace dist::backends {

void check_rank(int r, int size, const char* what) {
  if (r < 0 || r >= size) {
    throw ConfigError(std::string(what) + " rank " + std::to_string(r) +
                      " is out of range for world_size " + std::to_string(size));
  }
}

void check_peer(int r, int self, int size, const char* what) {
  check_rank(r, size, what);
  if (r == self) {
    throw ConfigError(std::string(what) + " rank " + std::to_string(r) + " is this rank itself");
  }
}

void check_op_fits(ReduceOp op, DType dtype) {
  const bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (bitwise && is_floating_point(dtype)) {
    throw ConfigError(std::string("ReduceOp::") + reduce_op_name(op) +
                      " needs an integer tensor, but this one is " +
                      std::string(dtype_name(dtype)) +
                      ": bitwise reductions are defined only for int32 and int64");
  }
  if (op == ReduceOp::AVG && !is_floating_point(dtype)) {
    throw ConfigError(std::string("ReduceOp::AVG needs a floating-point tensor, but this one is ") +
                      std::string(dtype_name(dtype)) +
                      ": the average of integers is not an integer. Convert first with "
                      ".to(dist::kFloat32), or use SUM and divide");
  }
}

void check_one_per_rank(const char* call, const std::vector<Tensor>* inputs, const Tensor& output,
                        int size) {
  if (inputs == nullptr || static_cast<int>(inputs->size()) != size) {
    throw ConfigError(std::string(call) + " needs one input tensor per rank: got " +
                      (inputs == nullptr ? "none" : std::to_string(inputs->size())) +
                      " for world_size " + std::to_string(size));
  }
  for (std::size_t r = 0; r < inputs->size(); ++r) {
    const Tensor& in = (*inputs)[r];
    if (in.numel() != output.numel() || in.dtype() != output.dtype()) {
      throw ConfigError(std::string(call) + " input " + std::to_string(r) + " (" + describe(in) +
                        ") does not match the output (" + describe(output) +
                        "): every input must have the output's size and dtype");
    }
  }
}

Tensor concatenate(const std::vector<Tensor>& inputs, Device device) {
  std::int64_t total = 0;
  for (const Tensor& t : inputs) total += t.numel();
  Tensor flat(total, inputs.empty() ? kFloat32 : inputs.front().dtype(), device);
  std::int64_t at = 0;
  for (const Tensor& t : inputs) {
    flat.assign_slice(at, t);
    at += t.numel();
  }
  return flat;
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + ", " + std::to_string(t.numel()) + " elements" +
         (t.is_cuda() ? ", " + t.device().str() : "");
}

std::string describe(const Tensor& t, ReduceOp op) {
  return std::string(reduce_op_name(op)) + ", " + describe(t);
}

std::string seconds(std::chrono::milliseconds ms) {
  std::ostringstream s;
  s << static_cast<double>(ms.count()) / 1000.0 << " s";
  return s.str();
}

}  // namespace dist::backends
