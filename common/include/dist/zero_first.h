// dist/zero_first.h — let rank 0 go first (download, unpack, cache), while the others wait.
//
//   {
//     dist::ZeroFirst first;                 // ranks 1.. wait here until rank 0 leaves the scope
//     if (!std::filesystem::exists(path)) download(path);   // so only rank 0 ever downloads
//     data = load(path);                     // and the others find the file complete
//   }
//
// The C++ twin of post C's torch_distributed_zero_first (YOLOv5's context manager): the ranks
// that wait enter one collective in the constructor; the rank that goes first enters the same
// collective when it leaves the scope, so nobody passes until it has finished.
//
// Where it differs from post C's, on purpose:
//   * A failure is published, not a hang. In post C's, an exception in rank 0's body skips its
//     barrier(), and the others wait for it until the timeout (30 minutes by default in torch).
//     Here the collective is an all_reduce(MIN) of a status: every rank that waits contributes
//     "fine", the rank that went first contributes "fine" or, if its scope is left by an
//     exception, its own rank number. So the waiting ranks learn of the failure at once and throw
//     dist::Error naming the rank that failed, and rank 0's own exception carries on unchanged.
//   * Leaving the scope normally may throw: if the collective itself fails (a rank died, or the
//     waiting ranks gave up at the timeout) the destructor throws that error, as post C's
//     barrier() would. That is why ~ZeroFirst is noexcept(false). While an exception is already
//     unwinding the scope it never throws: it reports the failure, logs any second error to
//     stderr, and lets the first exception go on. Keep a ZeroFirst a plain local variable: not a
//     member, and not inside std::optional or a container, whose destructors are noexcept and
//     would turn that error into std::terminate.
//   * Who goes first is a choice: Leaders::kRank0 (one rank in the whole job; the path must be on
//     a file system every rank sees) or Leaders::kLocalRank0 (local rank 0 of each machine, as
//     YOLOv5 passes LOCAL_RANK; for a data set on each machine's local disk).
//
// Rules of use: every rank of the group must create the ZeroFirst (the same number of times, in
// the same order); the body must not call collectives (the waiting ranks are already inside one);
// and the body of the first rank must finish within the group's timeout (--timeout), or the
// waiting ranks fail with dist::TimeoutError. Without init_process_group it does nothing, as post
// C's rank -1 does.
//
// write_file_atomically (dist/files.h, included here) is its companion: the first rank writes to a
// temporary file in the same directory and renames it into place, so a reader sees no file or the
// whole file, never half.
//
// Taught in: chapter 05 (barrier).
// Built in: common/src/zero_first.cpp.
#pragma once

#include "dist/files.h"

namespace dist {

class ZeroFirst {
 public:
  enum class Leaders { kRank0, kLocalRank0 };

  // Ranks that wait block here until every leader has left its scope; they throw dist::Error if
  // a leader failed, and dist::TimeoutError if the leaders take longer than the group's timeout.
  explicit ZeroFirst(Leaders leaders = Leaders::kRank0);
  ~ZeroFirst() noexcept(false);
  ZeroFirst(const ZeroFirst&) = delete;
  ZeroFirst& operator=(const ZeroFirst&) = delete;

  // True on the rank(s) that go first.
  bool leads() const { return leads_; }

 private:
  bool active_ = false;  // false without a process group: nothing to wait for
  bool leads_ = true;
  int uncaught_at_entry_ = 0;
};

}  // namespace dist
