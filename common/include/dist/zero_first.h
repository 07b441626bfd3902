// dist/zero_first.h — let rank 0 go first (download, unpack, cache) while the others wait.
//
//   const Data data = dist::zero_first([&] {
//     if (!std::filesystem::exists(path)) download(path);  // only rank 0 finds nothing to read
//     return load(path);                                   // the others find the whole file
//   });
//
// The C++ twin of post C's torch_distributed_zero_first (YOLOv5's context manager): the callable
// runs on rank 0 while the other ranks wait; when it has returned, the others run it too.
// zero_first returns what the callable returns, on every rank.
//
// Where it differs from post C's, on purpose:
//   * A failure is published, not a hang. In post C's, an exception in rank 0's body skips its
//     barrier(); if rank 0 then catches the exception and carries on, the others wait in theirs
//     until the group's timeout (and for ever on NCCL in torch 1.13 unless NCCL_BLOCKING_WAIT or
//     NCCL_ASYNC_ERROR_HANDLING is set). Here the collective is an all_reduce(MIN) of a status:
//     every waiting rank contributes "fine", the rank that went first "fine" or, if its callable
//     threw, its own rank number. So the waiting ranks learn of the failure at once and throw
//     dist::Error naming the rank that failed (their callable never runs), and the first rank's
//     own exception comes out of zero_first unchanged.
//   * Who goes first is a choice: Leaders::kRank0 (one rank in the whole job; the path must be on
//     a file system every rank sees) or Leaders::kLocalRank0 (local rank 0 of each machine, as
//     YOLOv5 passes LOCAL_RANK; for a data set on each machine's local disk).
//
// Rules of use: every rank of the group calls zero_first (the same number of times, in the same
// order); the callable must not call collectives (the waiting ranks are already inside one); and
// the first rank's callable must finish within the group's timeout (--timeout; this library's
// groups apply it on every backend), or the waiting ranks fail with dist::TimeoutError. Without
// init_process_group it just runs the callable, as post C's rank -1 does.
//
// ZeroFirst below is the same thing as a scope guard, the shape of post C's `with` block; chapter
// 05's deep dive says why the function is the better shape (the guard's destructor has to throw).
//
// write_file_atomically (dist/files.h, included here) is its companion: the first rank writes to a
// temporary file in the same directory and renames it into place, so a reader sees no file or the
// whole file, never half.
//
// Taught in: chapter 05 (barrier).
// Built in: common/src/init/zero_first.cpp.
#pragma once

#include <functional>
#include <type_traits>
#include <utility>

#include "dist/files.h"

namespace dist {

// Who goes first: global rank 0, or local rank 0 on each machine.
enum class Leaders { kRank0, kLocalRank0 };

namespace detail {

// This rank's turn. zero_first_begin blocks the ranks that do not lead until every leader has
// ended its turn, and throws dist::Error if a leader failed (dist::TimeoutError if the leaders
// take longer than the group's timeout). A leader ends its turn with zero_first_end, which
// releases them and throws if another leader failed, or with zero_first_failed, which tells them
// this leader failed and never throws (a second error is logged: the caller rethrows the first).
struct ZeroFirstTurn {
  bool active = false;  // false without a process group: nothing to wait for
  bool leads = true;
};
ZeroFirstTurn zero_first_begin(Leaders leaders);
void zero_first_end(const ZeroFirstTurn& turn);
void zero_first_failed(const ZeroFirstTurn& turn) noexcept;

// A leader runs `body`; if it throws, the waiting ranks are told before the exception goes on.
template <class F>
decltype(auto) run_or_tell(const ZeroFirstTurn& turn, F& body) {
  try {
    return std::invoke(body);
  } catch (...) {
    zero_first_failed(turn);
    throw;
  }
}

}  // namespace detail

// Runs `body` on the leaders first, then on every other rank; returns what `body` returns. If a
// leader's `body` throws, that exception comes out of zero_first on the leader, and the others get
// dist::Error ("rank 0 failed inside zero_first ...") without running theirs.
// --8<-- [start:zero_first]
template <class F>
std::invoke_result_t<F&> zero_first(F&& body, Leaders leaders = Leaders::kRank0) {
  const detail::ZeroFirstTurn turn = detail::zero_first_begin(leaders);  // the others wait here
  if (!turn.leads) return std::invoke(body);  // the leaders are done: the data is there
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    detail::run_or_tell(turn, body);
    detail::zero_first_end(turn);  // release the others; throws if another leader failed
  } else {
    std::invoke_result_t<F&> result = detail::run_or_tell(turn, body);
    detail::zero_first_end(turn);
    return result;
  }
}
// --8<-- [end:zero_first]

// The same as a scope guard (the shape of post C's `with` block): the waiting ranks block in the
// constructor, the leaders publish their status in the destructor, which tells a normal exit from
// an exception with std::uncaught_exceptions(). The destructor throws when the collective fails
// or another leader failed, so it is noexcept(false): keep a ZeroFirst a plain local, never a
// member or inside std::optional or a container, whose noexcept destructors would turn that error
// into std::terminate. Prefer zero_first().
class ZeroFirst {
 public:
  using Leaders = dist::Leaders;

  explicit ZeroFirst(Leaders leaders = Leaders::kRank0);
  ~ZeroFirst() noexcept(false);
  ZeroFirst(const ZeroFirst&) = delete;
  ZeroFirst& operator=(const ZeroFirst&) = delete;

  // True on the rank(s) that go first.
  bool leads() const { return turn_.leads; }

 private:
  detail::ZeroFirstTurn turn_;
  int uncaught_at_entry_ = 0;
};

}  // namespace dist
