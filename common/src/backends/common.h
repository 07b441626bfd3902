// What every backend checks and says the same way (internal): argument checks before a
// collective, and how a call is described in an error message.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist::backends {

// `r` must be a rank of a group of `size` ranks; `what` names the argument ("src", "dst").
void check_rank(int r, int size, const char* what);
// The same, and not `self`: a rank cannot send to or receive from itself.
void check_peer(int r, int self, int size, const char* what);
// Bitwise ops need integers; AVG needs a floating dtype (the average of integers is not one).
void check_op_fits(ReduceOp op, DType dtype);
// The inputs of a reduce_scatter, or of a scatter on its source rank: one tensor per rank, each
// with `output`'s numel and dtype. A ConfigError naming `call` and the odd one out otherwise.
void check_one_per_rank(const char* call, const std::vector<Tensor>* inputs, const Tensor& output,
                        int size);
// inputs[0], inputs[1], ... end to end, in one tensor on `device`.
Tensor concatenate(const std::vector<Tensor>& inputs, Device device);

// "torch.float32, 4 elements" and "SUM, torch.float32, 4 elements", for error messages.
std::string describe(const Tensor& t);
std::string describe(const Tensor& t, ReduceOp op);
// "1.5 s"
std::string seconds(std::chrono::milliseconds ms);

}  // namespace dist::backends
