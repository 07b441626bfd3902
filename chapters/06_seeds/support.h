// Chapter 06's support code: comparing what the ranks drew. The lesson is in main.cpp.
#pragma once

#include <dist/dist.h>

#include <cstdint>
#include <vector>

namespace ch06 {

using Rows = std::vector<std::vector<std::int64_t>>;

// Every rank's int64 tensor, on every rank (one all_gather): row r is rank r's values.
Rows gather_rows(const dist::Tensor& mine, dist::Device device);

// Each row cut into pieces of `width` values, in order: row r's piece k is result[r * n + k].
Rows split_rows(const Rows& rows, std::size_t first, std::size_t width);

bool all_equal(const Rows& rows);
// How many different rows there are (rows.size() when no two are alike).
std::size_t count_distinct(const Rows& rows);

}  // namespace ch06
