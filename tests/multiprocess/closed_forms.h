// Test support for the collectives' tests (collectives_test.cpp, flat_collectives_test.cpp): a
// checker of tensors against closed forms, and the inputs of every reduce op with the closed
// forms of their reductions. Every value is exact in every dtype (small integers, and AVG's
// halves in the floating ones), so a float reduction in any order gives the same bits.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace dist::testing {

// Counts mismatches and keeps the first few for the report.
struct Checker {
  int rank;
  int failures = 0;
  std::ostringstream log;

  // Checks every element of `got` against want(i). Reads through a typed pointer: these loops run
  // over 16 MiB tensors, also under the sanitizers.
  template <typename F>
  void expect_all(const std::string& what, const Tensor& got, std::int64_t n, DType dtype, F want) {
    if (got.numel() != n || got.dtype() != dtype) {
      ++failures;
      log << "rank " << rank << " " << what << ": got " << got.numel() << " elements of "
          << dist::dtype_name(got.dtype()) << "\n";
      return;
    }
    dist::visit_dtype(dtype, [&]<typename T>(std::type_identity<T>) {
      const T* p = got.data_ptr<T>();
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(p[i]);
        if (v != want(i) && ++failures <= 10) {
          log << "rank " << rank << " " << what << ": element " << i << " is " << v << ", expected "
              << want(i) << "\n";
        }
      }
    });
  }
};

template <typename F>
inline Tensor make(std::int64_t n, DType dtype, F value) {
  Tensor t(n, dtype);
  dist::visit_dtype(dtype, [&]<typename T>(std::type_identity<T>) {
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value(i));
  });
  return t;
}

inline std::vector<ReduceOp> ops_for(DType dtype) {
  if (dist::is_floating_point(dtype)) {
    return {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::AVG};
  }
  return {ReduceOp::SUM,  ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
          ReduceOp::BAND, ReduceOp::BOR,     ReduceOp::BXOR};
}

// Rank r's element i for each op, and the closed form of the reduction over W ranks.
inline double input_for(ReduceOp op, int r, std::int64_t i) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      return (r + 1) + static_cast<double>(i % 7);
    case ReduceOp::PRODUCT:
      return 1 + (r + i) % 2;
    case ReduceOp::MIN:
    case ReduceOp::MAX:
      return static_cast<double>(i % 5) - 2 * r;
    default:
      return static_cast<double>((std::int64_t{1} << r) | ((i % 4) << 10));
  }
}
inline double reduced(ReduceOp op, std::int64_t W, std::int64_t i) {
  const std::int64_t high = (i % 4) << 10;
  switch (op) {
    case ReduceOp::SUM:
      return static_cast<double>(W * (W + 1) / 2 + W * (i % 7));
    case ReduceOp::AVG:
      return static_cast<double>(W * (W + 1) / 2 + W * (i % 7)) / static_cast<double>(W);
    case ReduceOp::PRODUCT:
      return static_cast<double>(std::int64_t{1} << (i % 2 == 0 ? W / 2 : (W + 1) / 2));
    case ReduceOp::MIN:
      return static_cast<double>(i % 5 - 2 * (W - 1));
    case ReduceOp::MAX:
      return static_cast<double>(i % 5);
    case ReduceOp::BAND:
      return static_cast<double>(W == 1 ? (1 | high) : high);
    case ReduceOp::BOR:
      return static_cast<double>(((std::int64_t{1} << W) - 1) | high);
    case ReduceOp::BXOR:
      return static_cast<double>(((std::int64_t{1} << W) - 1) | (W % 2 ? high : 0));
  }
  return 0;
}

}  // namespace dist::testing
