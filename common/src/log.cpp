// Rank-tagged, line-atomic output (dist/log.h).
#include "dist/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "dist/check.h"
#include "dist/env.h"
#include "dist/init.h"

namespace dist {
namespace {

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a failing stdout; drop the line rather than throw
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

namespace {

// The rank and world size to show: the group's, or before init the launcher's when they parse
// (a bad value is reported by init_process_group, not here), or 0 and 1.
DistInfo shown_identity() {
  DistInfo info = get_dist_info();
  if (!info.initialized) {
    try {
      const LaunchEnv env = read_launch_env();
      if (env.rank && env.world_size && *env.rank < *env.world_size) {
        info.rank = *env.rank;
        info.world_size = *env.world_size;
      }
    } catch (const ConfigError&) {
    }
  }
  return info;
}

}  // namespace

std::string rank_prefix() {
  const DistInfo info = shown_identity();
  return "[rank " + std::to_string(info.rank) + "/" + std::to_string(info.world_size) + "] ";
}

Line::Line(Sink sink) : sink_(sink) {}

Line::~Line() {
  if (sink_ == Sink::kNone) return;
  std::string text = rank_prefix() + buffer_.str() + "\n";
  if (sink_ == Sink::kStdout) {
    write_stdout(text);
  } else {
    write_stderr(text);
  }
}

Line out() {
  return Line(Line::Sink::kStdout);
}
Line out0() {
  return Line(shown_identity().rank == 0 ? Line::Sink::kStdout : Line::Sink::kNone);
}
Line err() {
  return Line(Line::Sink::kStderr);
}

void write_stdout(const std::string& text) {
  std::fflush(stdout);  // keep order with anything written through stdio
  write_all(STDOUT_FILENO, text);
}
void write_stderr(const std::string& text) {
  std::fflush(stderr);
  write_all(STDERR_FILENO, text);
}

}  // namespace dist
