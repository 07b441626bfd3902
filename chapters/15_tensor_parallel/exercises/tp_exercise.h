// Chapter 15's exercises share this: the chapter's closed-form data and one-process model
// (support.cpp's, which the grader recomputes), the collectives a group made (the flight
// recorder), and printing. The part to write is in each exercise's own file.
#pragma once

#include <dist/dist.h>
#include <dist/flight_recorder.h>
#include <dist/nn.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ex15 {

constexpr std::int64_t kIn = 8, kHidden = 16, kOut = 4, kRows = 16;

// Rows [first, first + size): x_ij = ((7919 i + 104729 j) mod 2001) / 1000 - 1 and
// y_ik = sum_j (((3k + 5j) mod 7) - 3) x_ij / 4.
inline void batch(std::int64_t first, std::int64_t size, dist::Tensor& x, dist::Tensor& y) {
  std::vector<float> xs, ys;
  for (std::int64_t i = first; i < first + size; ++i) {
    std::vector<double> row;
    for (std::int64_t j = 0; j < kIn; ++j) {
      row.push_back(static_cast<double>((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0);
      xs.push_back(static_cast<float>(row.back()));
    }
    for (std::int64_t k = 0; k < kOut; ++k) {
      double sum = 0;
      for (std::int64_t j = 0; j < kIn; ++j) {
        sum += static_cast<double>((3 * k + 5 * j) % 7 - 3) * row[static_cast<std::size_t>(j)];
      }
      ys.push_back(static_cast<float>(sum / 4.0));
    }
  }
  x = dist::Tensor::from(xs);
  y = dist::Tensor::from(ys);
}

inline std::vector<float> closed_form(std::int64_t rows, std::int64_t cols, int a, int b, int m,
                                      double div) {
  std::vector<float> w;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      w.push_back(static_cast<float>(static_cast<double>((a * r + b * c) % m - m / 2) / div));
    }
  }
  return w;
}

// The one-process model: Linear(8, 16), ReLU, Linear(16, 4).
inline dist::LinearInit fc1_init() {
  return {closed_form(kHidden, kIn, 31, 17, 23, 20.0), closed_form(1, kHidden, 0, 5, 11, 50.0)};
}
inline dist::LinearInit fc2_init() {
  return {closed_form(kOut, kHidden, 13, 7, 19, 20.0), closed_form(1, kOut, 0, 3, 7, 50.0)};
}

// How many collectives this process has recorded so far (ddprun sets DIST_TRACE_DIR); -1
// without a flight recorder.
inline std::int64_t collectives_so_far() {
  const dist::FlightRecorder* recorder = dist::flight::recorder();
  if (recorder == nullptr) return -1;
  std::int64_t count = 0;
  for (const auto& e : recorder->entries()) count = static_cast<std::int64_t>(e.record) + 1;
  return count;
}

// "v0, v1, ...", each with 9 significant digits: enough to tell every float32 apart.
inline std::string values(const std::vector<float>& v) {
  std::string text;
  for (float x : v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.9g", text.empty() ? "" : ", ", static_cast<double>(x));
    text += buf;
  }
  return text;
}

inline std::string members(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace ex15
