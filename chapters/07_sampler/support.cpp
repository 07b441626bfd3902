// Chapter 07's support code (see support.h).
#include "support.h"

#include <dist/log.h>

#include <map>

namespace ch07 {

std::string join(const Indices& v, const char* sep) {
  std::string text;
  for (std::size_t i = 0; i < v.size(); ++i) text += (i ? sep : "") + std::to_string(v[i]);
  return text;
}

std::string batches_text(const std::vector<Indices>& batches) {
  std::string text;
  for (const Indices& b : batches) text += " [" + join(b, ", ") + "]";
  return text;
}

std::string pass_marks(const std::vector<Indices>& batches, std::int64_t per_pass) {
  std::string text;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    if (b > 0 && static_cast<std::int64_t>(b) % per_pass == 0) text += " |";
    text += " [" + join(batches[b], ", ") + "]";
  }
  return text;
}

std::string pass_seeds(std::int64_t start_iter, std::int64_t num_iterations,
                       std::int64_t per_pass) {
  std::string text;
  for (std::int64_t s = start_iter; s < num_iterations; s += per_pass) {
    text += (text.empty() ? " (set_epoch " : ", ") + std::to_string(s);
  }
  return text.empty() ? text : text + ")";
}

std::string iterations_text(std::int64_t first, std::int64_t last) {
  if (first > last) return "no iteration";
  if (first == last) return "iteration " + std::to_string(first);
  return "iterations " + std::to_string(first) + "-" + std::to_string(last);
}

void draw_grid(std::int64_t epoch, const std::vector<Indices>& shards, std::int64_t n) {
  const int world = static_cast<int>(shards.size());
  if (n > 40) {
    dist::out0() << "epoch " << epoch << ": grid left out for more than 40 indices";
    return;
  }
  const std::size_t width = std::to_string(n - 1).size() + 1;
  auto cell = [&](const std::string& s) { return std::string(width - s.size(), ' ') + s; };
  std::string header = "  index  ";
  for (std::int64_t i = 0; i < n; ++i) header += cell(std::to_string(i));
  dist::out0() << "epoch " << epoch << ": who reads which index (x read, p padding, . not read)";
  dist::out0() << header;
  std::int64_t padded = 0;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> row(n, ".");
    for (std::size_t k = 0; k < shards[r].size(); ++k) {
      const bool padding = r + static_cast<std::int64_t>(k) * world >= n;
      padded += padding;
      const std::int64_t index = shards[r][k];
      if (index < 0 || index >= n) continue;  // not an index: the check reports a MISMATCH
      row[static_cast<std::size_t>(index)] = padding ? "p" : "x";
    }
    std::string line = "  rank " + std::to_string(r) + " ";
    for (const std::string& c : row) line += cell(c);
    dist::out0() << line;
  }
  std::int64_t reads = 0;
  for (const Indices& s : shards) reads += static_cast<std::int64_t>(s.size());
  dist::out0() << "epoch " << epoch << ": " << reads << " reads of " << n << " indices: " << padded
               << " padded, " << n + padded - reads << " dropped";
}

bool covers_dataset(const std::vector<Indices>& shards, std::int64_t n, bool drop_last) {
  const auto world = static_cast<std::int64_t>(shards.size());
  std::map<std::int64_t, std::int64_t> times;
  std::int64_t reads = 0;
  for (const Indices& s : shards) {
    for (std::int64_t i : s) ++times[i];
    reads += static_cast<std::int64_t>(s.size());
  }
  for (const auto& [index, count] : times) {
    if (index < 0 || index >= n || (drop_last && count != 1)) return false;
  }
  const auto distinct = static_cast<std::int64_t>(times.size());
  if (drop_last && n % world != 0) return distinct == n / world * world && reads == distinct;
  return distinct == n && reads == (n + world - 1) / world * world;
}

}  // namespace ch07
