// Chapter 05's support code (support.h).
#include "support.h"

#include <dist/dist.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>

namespace ch05 {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string default_data_dir() {
  const dist::DistInfo info = dist::get_dist_info();
  const std::string job =
      info.master_port > 0 ? "port" + std::to_string(info.master_port)
                           : "store" + std::to_string(std::hash<std::string>{}(info.init_method));
  return "/tmp/dist-ch05-" + std::to_string(::getuid()) + "-" + job;
}

DataSet load(const std::filesystem::path& file, DataSet data) {
  std::ifstream in(file);
  DIST_CHECK(in, "cannot open " + file.string() + ": did the rank that went first write it?");
  for (std::int64_t value; in >> value; ++data.records) data.sum += value;
  dist::out() << "data set: read " << data.records << " records, sum " << data.sum;
  return data;
}

}  // namespace ch05
