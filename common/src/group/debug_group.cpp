// DIST_DEBUG=DETAIL and monitored_barrier: see debug_group.h.
#include "debug_group.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "dist/check.h"
#include "dist/env.h"
#include "util/text.h"

namespace dist {
namespace {

class StoreCallChecker : public ProcessGroup::CallChecker {
 public:
  StoreCallChecker(int rank, int size, std::chrono::milliseconds timeout,
                   std::shared_ptr<Store> store)
      : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)) {}

  // Publishes this rank's call, waits for every rank's, and compares.
  void check(const ProcessGroup::Call& call) override {
    const std::string mine = call.fingerprint();
    store_->set(key(call.seq, rank_), mine);
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(key(call.seq, r));
    const std::string where = "DIST_DEBUG=DETAIL: collective #" + std::to_string(call.seq) + " " +
                              mine + " on rank " + std::to_string(rank_);
    try {
      store_->wait(keys, timeout_);
    } catch (const TimeoutError&) {
      std::vector<int> came, missing;
      for (int r = 0; r < size_; ++r) {
        (store_->check({keys[static_cast<std::size_t>(r)]}) ? came : missing).push_back(r);
      }
      settle(call.seq, came);
      throw TimeoutError(where + ": " + util::ranks_phrase(missing) + " did not reach it within " +
                         util::seconds(timeout_) +
                         ". Every rank must make the same collective calls in the same order; "
                         "look for a branch that only some ranks take, or a rank that is stuck.");
    }
    std::vector<std::string> calls;
    for (const std::string& k : keys) calls.push_back(store_->get(k));
    // Every rank has published call N, so every rank has read all of call N-1: our key of
    // call N-1 can go, and the store holds at most two calls' keys.
    if (call.seq > 1) store_->delete_key(key(call.seq - 1, rank_));
    if (std::all_of(calls.begin(), calls.end(), [&](const std::string& c) { return c == mine; })) {
      return;
    }
    std::vector<int> everyone(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) everyone[static_cast<std::size_t>(r)] = r;
    settle(call.seq, everyone);
    std::string each;
    for (int r = 0; r < size_; ++r) {
      each += "\n  rank " + std::to_string(r) + ": " + calls[static_cast<std::size_t>(r)];
    }
    throw Error(where + ": the ranks' calls differ:" + each +
                "\nEvery rank must make the same collective calls in the same order, with the "
                "same sizes, dtypes, reduce ops and roots.");
  }

 private:
  static std::string key(std::uint64_t call, int rank) {
    return std::to_string(call) + "/" + std::to_string(rank);
  }

  // Before every rank throws: rank 0 hosts the store, so it waits (a few seconds at most) until
  // the other ranks in `readers` have read what their own error needs, instead of exiting and
  // leaving them with a lost connection.
  void settle(std::uint64_t call, const std::vector<int>& readers) {
    const std::string topic = "read/" + std::to_string(call);
    if (rank_ != 0) {
      acknowledge_read(*store_, topic, rank_);
      return;
    }
    std::vector<int> others;
    for (int r : readers) {
      if (r != 0) others.push_back(r);
    }
    wait_for_reads(*store_, topic, others,
                   std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(5)));
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Store> store_;
};

}  // namespace

DebugLevel debug_level_from_env() {
  const auto value = env_value("DIST_DEBUG");
  if (!value) return DebugLevel::kOff;
  std::string upper = *value;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "OFF") return DebugLevel::kOff;
  if (upper == "DETAIL") return DebugLevel::kDetail;
  throw ConfigError("DIST_DEBUG=\"" + *value +
                    "\" is not a debug level: use DETAIL (check that every rank makes the same "
                    "collective calls) or OFF, or leave it unset");
}

std::unique_ptr<ProcessGroup::CallChecker> make_call_checker(int rank, int size,
                                                             std::chrono::milliseconds timeout,
                                                             std::shared_ptr<Store> store) {
  return std::make_unique<StoreCallChecker>(rank, size, timeout, std::move(store));
}

// Every rank reports to rank 0 under "monitored_barrier/<call>/<rank>"; rank 0 waits for all of
// them and publishes a verdict, which every rank reads.
void monitored_barrier(Store& store, int rank, int world, int call,
                       std::chrono::milliseconds timeout) {
  timeout = Store::checked_timeout(timeout);
  const auto verdict_wait = std::min<std::chrono::milliseconds>(2 * timeout, kMaxTimeout);
  const std::string name = "monitored_barrier #" + std::to_string(call);
  const std::string prefix = "monitored_barrier/" + std::to_string(call) + "/";
  const auto arrived = [&](int r) { return prefix + std::to_string(r); };
  const std::string verdict_key = prefix + "verdict";
  std::string verdict;
  if (rank == 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<int> missing;
    for (int r = 1; r < world; ++r) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() > 0) {
        try {
          store.wait({arrived(r)}, left);
          continue;
        } catch (const TimeoutError&) {
        }
      }
      if (!store.check({arrived(r)})) missing.push_back(r);
    }
    verdict = missing.empty() ? "ok"
                              : util::ranks_phrase(missing) + " did not arrive within " +
                                    util::seconds(timeout);
    store.set(verdict_key, verdict);
    if (!missing.empty()) {
      // Rank 0 hosts the store: keep it up a while (up to `timeout` more) for the ranks that come
      // late to read the verdict too, rather than find the store gone.
      std::vector<int> others;
      for (int r = 1; r < world; ++r) others.push_back(r);
      wait_for_reads(store, prefix + "seen", others, timeout);
    }
  } else {
    store.set(arrived(rank), "");
    try {
      store.wait({verdict_key}, verdict_wait);
    } catch (const TimeoutError&) {
      throw TimeoutError(name + " on rank " + std::to_string(rank) +
                         ": rank 0, which checks the barrier, gave no verdict within " +
                         util::seconds(verdict_wait) +
                         ": rank 0 did not reach it (it is stuck, or skipped it)");
    }
    verdict = store.get(verdict_key);
    if (verdict != "ok") acknowledge_read(store, prefix + "seen", rank);
  }
  if (verdict != "ok") {
    throw TimeoutError(name + " on rank " + std::to_string(rank) + ": " + verdict +
                       " (rank 0 waited for every rank). Look at what those ranks were doing: "
                       "a collective that only some ranks call, or a rank stuck or slower than "
                       "the timeout.");
  }
}

}  // namespace dist
