// The rank-0-first guard and atomic file writes (dist/zero_first.h; taught in chapter 05).
#include "dist/zero_first.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "dist/check.h"
#include "dist/init.h"
#include "dist/log.h"
#include "dist/tensor.h"

namespace dist {
namespace {

// What a rank contributes to the all_reduce(MIN): "fine", or the number of the rank that failed.
// MIN picks the lowest failed rank if any leader failed, and "fine" otherwise.
constexpr std::int32_t kFine = std::numeric_limits<std::int32_t>::max();

std::int32_t exchange_status(std::int32_t mine) {
  Tensor status = full(1, mine, kInt32, get_device());
  all_reduce(status, ReduceOp::MIN);
  return static_cast<std::int32_t>(status.item(0));
}

Error leader_failed(std::int32_t failed_rank) {
  return Error("rank " + std::to_string(failed_rank) +
               " failed inside its ZeroFirst block (its own error is printed by that rank), so "
               "what it was preparing cannot be used and rank " +
               std::to_string(get_rank()) + " stops too; fix rank " + std::to_string(failed_rank) +
               "'s error and run again");
}

std::string system_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

ZeroFirst::ZeroFirst(Leaders leaders) : uncaught_at_entry_(std::uncaught_exceptions()) {
  if (!is_initialized()) return;  // one process, no group: it is rank 0 and goes first alone
  active_ = true;
  leads_ = leaders == Leaders::kRank0 ? get_rank() == 0 : get_local_rank() == 0;
  if (leads_) return;
  // Wait for the leaders: this all_reduce completes only when every leader has left its scope.
  std::int32_t failed = kFine;
  try {
    failed = exchange_status(kFine);
  } catch (const TimeoutError& e) {
    throw TimeoutError(std::string("ZeroFirst: rank ") + std::to_string(get_rank()) +
                       " waited for the rank(s) going first longer than the group's timeout; "
                       "give init_process_group a timeout longer than their work (--timeout), "
                       "or prepare the data before the job starts. " +
                       e.what());
  }
  if (failed != kFine) throw leader_failed(failed);
}

// --8<-- [start:zero_first_destructor]
ZeroFirst::~ZeroFirst() noexcept(false) {
  if (!active_ || !leads_) return;
  if (std::uncaught_exceptions() == uncaught_at_entry_) {
    // Left normally: release the waiting ranks. Another leader (Leaders::kLocalRank0) may have
    // failed; then nobody carries on with data that is only partly prepared.
    if (const std::int32_t failed = exchange_status(kFine); failed != kFine) {
      throw leader_failed(failed);
    }
    return;
  }
  // Left by an exception: tell the waiting ranks, so they fail now instead of at the timeout.
  // Throwing here would end the program (std::terminate), so a second error is only logged.
  try {
    exchange_status(get_rank());
  } catch (const std::exception& e) {
    err() << "ZeroFirst: could not tell the waiting ranks that rank " << get_rank()
          << " failed: " << e.what();
  }
}
// --8<-- [end:zero_first_destructor]

void write_file_atomically(const std::string& path, const std::string& contents) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // Same directory as `path`, so that rename() stays within one file system and is atomic; the
  // host and pid make the name unique even when two machines share the directory.
  const std::string temp = path + ".tmp-" + host + "-" + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(system_error("cannot create", temp) + "; does the directory exist?");
  std::size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Error error(system_error("cannot write", temp));
      ::close(fd);
      ::unlink(temp.c_str());
      throw error;
    }
    written += static_cast<std::size_t>(n);
  }
  // fsync before rename: after a crash the new name must not point at an empty file.
  const bool synced = ::fsync(fd) == 0;
  const int fsync_errno = errno;
  const bool closed = ::close(fd) == 0;  // always close, even when fsync failed
  if (!synced || !closed) {
    if (!synced) errno = fsync_errno;
    const Error error(system_error("cannot flush", temp));
    ::unlink(temp.c_str());
    throw error;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const Error error(system_error("cannot rename " + temp + " to", path));
    ::unlink(temp.c_str());
    throw error;
  }
}

}  // namespace dist
