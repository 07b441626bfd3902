// dist/process_group.h — the collectives, behind one interface for every backend.
//
// A ProcessGroup is "the ranks that talk together": it knows its rank, its size and how to run a
// collective. Gloo (CPU, TCP) is the backend on every machine; NCCL (GPU) arrives with the GPU
// chapter. Chapters call the free functions in dist/init.h, which act on the default group, so
// no lesson ever contains an #ifdef for the backend.
//
// The contract every backend keeps (and the tests check):
//   * Every rank must make the same collective calls in the same order with matching sizes and
//     dtypes; a rank that skips one leaves the others waiting until the group's timeout, which
//     then fails with dist::TimeoutError naming the operation and its sequence number.
//   * A peer that dies makes the others fail with dist::Error, not hang.
//   * Ranks that call the same collective with different sizes or dtypes break the contract:
//     Gloo notices on its network thread, where nothing can catch it, and the receiving rank
//     aborts (SIGABRT) after printing a rank-tagged "fatal:" line and a hint.
//   * Tensors of 0 elements are allowed and do nothing but synchronise.
//
// Taught in: chapter 04 (all_reduce), chapter 05 (barrier).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/tensor.h"

namespace dist {

// The reduction applied by all_reduce and reduce_scatter, named as in torch.distributed.ReduceOp.
enum class ReduceOp { SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR };
const char* reduce_op_name(ReduceOp op);  // "SUM", ...

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  // Every rank ends with the element-wise reduction of every rank's `tensor`.
  virtual void all_reduce(Tensor& tensor, ReduceOp op) = 0;
  // Every rank ends with rank `src`'s `tensor`.
  virtual void broadcast(Tensor& tensor, int src) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  // outputs[i] = rank i's `input`, on every rank. `outputs` is resized to size(); entries that
  // already have the input's size, dtype and device may be filled in place (as torch fills the
  // list it is given), the others are replaced.
  virtual void all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // Rank r ends with the reduction over ranks of inputs[r]; inputs.size() == size().
  virtual void reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) = 0;
  // Rank `dst` gets outputs[i] = rank i's `input`; `outputs` is ignored on other ranks.
  virtual void gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) = 0;
  // Rank r ends with `src`'s inputs[r] in `output`; `inputs` is read on rank `src` only.
  virtual void scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) = 0;
  // Point to point: a send must meet a recv with the same tag, size and dtype.
  virtual void send(const Tensor& tensor, int dst, int tag) = 0;
  virtual void recv(Tensor& tensor, int src, int tag) = 0;

 private:
  int rank_;
  int size_;
};

}  // namespace dist
