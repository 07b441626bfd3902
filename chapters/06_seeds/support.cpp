// Chapter 06's support code (support.h).
#include "support.h"

#include <set>

namespace ch06 {

Rows gather_rows(const dist::Tensor& mine, dist::Device device) {
  std::vector<dist::Tensor> all;
  dist::all_gather(all, mine.to(device));
  Rows rows;
  for (const dist::Tensor& t : all) rows.push_back(t.to_vector<std::int64_t>());
  return rows;
}

Rows split_rows(const Rows& rows, std::size_t first, std::size_t width) {
  Rows pieces;
  for (const auto& row : rows) {
    for (std::size_t at = first; at + width <= row.size(); at += width) {
      pieces.emplace_back(row.begin() + static_cast<std::ptrdiff_t>(at),
                          row.begin() + static_cast<std::ptrdiff_t>(at + width));
    }
  }
  return pieces;
}

bool all_equal(const Rows& rows) {
  for (const auto& row : rows) {
    if (row != rows.front()) return false;
  }
  return true;
}

std::size_t count_distinct(const Rows& rows) {
  std::set<std::vector<std::int64_t>> distinct(rows.begin(), rows.end());
  return distinct.size();
}

}  // namespace ch06
