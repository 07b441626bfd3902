// The rank-0-first call and guard (dist/zero_first.h; taught in chapter 05).
#include "dist/zero_first.h"

#include <cstdint>
#include <exception>
#include <limits>
#include <string>

#include "dist/check.h"
#include "dist/init.h"
#include "dist/log.h"
#include "dist/tensor.h"
#include "one_number.h"

namespace dist {
namespace {

// What a rank contributes to the all_reduce(MIN): "fine", or the number of the rank that failed.
// MIN picks the lowest failed rank if any leader failed, and "fine" otherwise.
constexpr std::int32_t kFine = std::numeric_limits<std::int32_t>::max();

std::int32_t exchange_status(std::int32_t mine) {
  return static_cast<std::int32_t>(all_reduce_number(mine, kInt32, ReduceOp::MIN));
}

Error leader_failed(std::int32_t failed_rank) {
  return Error("rank " + std::to_string(failed_rank) +
               " failed inside zero_first (its own error is printed by that rank), so what it was "
               "preparing cannot be used and rank " +
               std::to_string(get_rank()) + " stops too; fix rank " + std::to_string(failed_rank) +
               "'s error and run again");
}

}  // namespace

namespace detail {

ZeroFirstTurn zero_first_begin(Leaders leaders) {
  ZeroFirstTurn turn;
  if (!is_initialized()) return turn;  // one process, no group: it is rank 0 and goes first alone
  turn.active = true;
  turn.leads = leaders == Leaders::kRank0 ? get_rank() == 0 : get_local_rank() == 0;
  if (turn.leads) return turn;
  // Wait for the leaders: this all_reduce completes only when every leader has ended its turn.
  std::int32_t failed = kFine;
  try {
    failed = exchange_status(kFine);
  } catch (const TimeoutError& e) {
    throw TimeoutError("zero_first: rank " + std::to_string(get_rank()) +
                       " waited for the rank(s) going first longer than the group's timeout; "
                       "give init_process_group a timeout longer than their work (--timeout), "
                       "or prepare the data before the job starts. " +
                       e.what());
  }
  if (failed != kFine) throw leader_failed(failed);
  return turn;
}

void zero_first_end(const ZeroFirstTurn& turn) {
  if (!turn.active || !turn.leads) return;
  // Release the waiting ranks. Another leader (Leaders::kLocalRank0) may have failed; then nobody
  // carries on with data that is only partly prepared.
  if (const std::int32_t failed = exchange_status(kFine); failed != kFine) {
    throw leader_failed(failed);
  }
}

void zero_first_failed(const ZeroFirstTurn& turn) noexcept {
  if (!turn.active || !turn.leads) return;
  // Tell the waiting ranks, so they fail now instead of at the timeout. The caller rethrows the
  // callable's error, the one that matters, so a second error here is only logged.
  try {
    exchange_status(get_rank());
  } catch (const std::exception& e) {
    err() << "zero_first: could not tell the waiting ranks that rank " << get_rank()
          << " failed: " << e.what();
  }
}

}  // namespace detail

ZeroFirst::ZeroFirst(Leaders leaders)
    : turn_(detail::zero_first_begin(leaders)), uncaught_at_entry_(std::uncaught_exceptions()) {}

// --8<-- [start:guard_destructor]
ZeroFirst::~ZeroFirst() noexcept(false) {
  if (std::uncaught_exceptions() == uncaught_at_entry_) {
    detail::zero_first_end(turn_);  // left normally; may throw, hence noexcept(false)
  } else {
    detail::zero_first_failed(turn_);  // left by an exception: throwing now would terminate
  }
}
// --8<-- [end:guard_destructor]

}  // namespace dist
