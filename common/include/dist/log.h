// dist/log.h — rank-tagged output.
//
// Lines from different ranks interleave in any order, so every line a rank prints starts with
// "[rank R/W] " and is written with a single write() call: two ranks never tear each other's lines.
//
//   dist::out() << "tensor: " << t;         // [rank 1/2] tensor: tensor([4, 6])
//   dist::out0() << "all ranks agree";      // printed by rank 0 only
//   dist::err() << "something went wrong";  // to stderr
//
// Before init_process_group the prefix uses the launcher's RANK/WORLD_SIZE when they parse, and
// "[rank 0/1]" otherwise (the same answer get_dist_info gives).
//
// Taught in: chapter 01.
// Built in: common/src/base/log.cpp.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace dist {

// "[rank R/W] " for the current process.
std::string rank_prefix();

// One output line, flushed as a whole when it goes out of scope.
class Line {
 public:
  enum class Sink { kStdout, kStderr, kNone };
  explicit Line(Sink sink);
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  ~Line();

  template <typename T>
  Line& operator<<(const T& value) {
    if (sink_ != Sink::kNone) buffer_ << value;
    return *this;
  }

 private:
  Sink sink_;
  std::ostringstream buffer_;
};

Line out();   // every rank, stdout
Line out0();  // rank 0 only, stdout (the "print on rank 0" helper)
Line err();   // every rank, stderr

// Writes `text` (already complete lines) to stdout/stderr with one write() call.
void write_stdout(const std::string& text);
void write_stderr(const std::string& text);

// An integer with its thousands grouped by commas, as the chapters print byte counts:
// grouped(10100896) is "10,100,896", grouped(-1234) "-1,234" (Python's f"{n:,}").
std::string grouped(std::int64_t n);

}  // namespace dist
