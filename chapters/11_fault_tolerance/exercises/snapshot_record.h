// The snapshot file of chapter 11's exercises: a few numbers and every rank's generator state, as
// text, written with dist::write_file_atomically. Shared by the starter and the solution; not
// part of the exercise.
#pragma once

#include <dist/files.h>
#include <dist/tensor.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ex11 {

struct Record {
  std::int64_t steps_done = 0;
  float x = 0;
  float velocity = 0;                    // SGD's momentum buffer
  std::vector<dist::Tensor> generators;  // every rank's generator state, by rank (int64)
};

inline void write_record(const std::string& path, const Record& r) {
  std::ostringstream text;
  text << r.steps_done << ' ' << std::hexfloat << r.x << ' ' << r.velocity << std::dec << ' '
       << r.generators.size() << '\n';
  for (const dist::Tensor& g : r.generators) {
    text << g.numel();
    for (std::int64_t v : g.to_vector<std::int64_t>()) text << ' ' << v;
    text << '\n';
  }
  dist::write_file_atomically(path, text.str());
}

// Throws dist::ConfigError when the file is not a whole record.
inline Record read_record(const std::string& path) {
  std::ifstream in(path);
  Record r;
  std::string x, velocity;
  std::size_t count = 0;
  if (!(in >> r.steps_done >> x >> velocity >> count)) {
    throw dist::ConfigError(path + " is not a snapshot of this exercise; remove it");
  }
  r.x = std::stof(x);
  r.velocity = std::stof(velocity);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t n = 0;
    in >> n;
    std::vector<std::int64_t> values(static_cast<std::size_t>(n > 0 ? n : 0));
    for (std::int64_t& v : values) in >> v;
    if (!in) throw dist::ConfigError(path + " ends inside a generator's state; remove it");
    r.generators.push_back(dist::Tensor::from(values));
  }
  return r;
}

}  // namespace ex11
