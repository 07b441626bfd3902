// Rank-tagged, line-atomic output (dist/log.h).
#include "dist/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>

#include "dist/check.h"
#include "dist/env.h"
#include "log_identity.h"

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

// Rank and world size in one word, so that a reader never sees one without the other;
// kNoIdentity until init sets it.
constexpr std::uint64_t kNoIdentity = ~std::uint64_t{0};
std::atomic<std::uint64_t> g_identity{kNoIdentity};

struct Identity {
  int rank = 0;
  int world_size = 1;
};

// The rank and world size to show: init's, or before init the launcher's when they parse (a bad
// value is reported by init_process_group, not here), or 0 and 1.
Identity shown_identity() {
  if (const std::uint64_t packed = g_identity.load(); packed != kNoIdentity) {
    return {static_cast<int>(packed >> 32), static_cast<int>(packed & 0xffffffffu)};
  }
  Identity shown;
  try {
    const LaunchEnv env = read_launch_env();
    if (env.rank && env.world_size && *env.rank < *env.world_size) {
      shown = {*env.rank, *env.world_size};
    }
  } catch (const ConfigError&) {
  }
  return shown;
}

}  // namespace

void set_log_identity(int rank, int world_size) {
  g_identity = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank)) << 32) |
               static_cast<std::uint32_t>(world_size);
}

void clear_log_identity() {
  g_identity = kNoIdentity;
}

std::string rank_prefix() {
  const Identity shown = shown_identity();
  return "[rank " + std::to_string(shown.rank) + "/" + std::to_string(shown.world_size) + "] ";
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

std::string grouped(std::int64_t n) {
  // The magnitude as unsigned, so that the most negative int64 has one too.
  const std::uint64_t magnitude =
      n < 0 ? ~static_cast<std::uint64_t>(n) + 1 : static_cast<std::uint64_t>(n);
  const std::string digits = std::to_string(magnitude);
  std::string out = n < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace dist
