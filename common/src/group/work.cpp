// Asynchronous calls (dist/process_group.h, async_op): Work, and the group's communication thread.
//
// One thread per group, started by the group's first asynchronous call, runs the queued calls in
// the order they were made; a call made without async_op first waits until the queue is empty,
// so a group's calls still run one at a time, in program order, on every rank. That is what lets
// the ranks agree on each call's number, and what NCCL needs (one thread issuing at a time).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "dist/check.h"
#include "dist/process_group.h"
#include "util/worker_signals.h"

namespace dist {

// What a Work and the communication thread share: whether the call has finished, and how; when
// it ran, and what it sent meanwhile.
struct Work::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  Clock::time_point start, end;
  std::int64_t sent = 0;
  // An isend's: what finishes its message, run by the first wait() (or the destructor) on the
  // caller's thread. It never throws: it finishes the state, with the message's error if any.
  std::function<void()> complete;
};

namespace {

// Marks `state` finished: started at `start`, ended now, having sent `sent` bytes, with `error`.
void finish(Work::State& state, Work::Clock::time_point start, std::int64_t sent,
            std::exception_ptr error) {
  const auto end = Work::Clock::now();
  {
    std::lock_guard lock(state.mu);
    state.error = std::move(error);
    state.start = start;
    state.end = end;
    state.sent = sent;
    state.done = true;
  }
  state.cv.notify_all();
}

// Runs an isend's completion, if it has one and nobody ran it yet, here.
void complete_here(Work::State& state) {
  std::function<void()> complete;
  {
    std::lock_guard lock(state.mu);
    complete = std::exchange(state.complete, nullptr);
  }
  if (complete) complete();
}

// Runs `call` (a group's call, one at a time on that group) and finishes `state` with its times
// and bytes, and the call's exception, if any.
void run_timed(const std::function<void()>& call, const ProcessGroup& group, Work::State& state) {
  const auto start = Work::Clock::now();
  const std::int64_t sent_before = group.bytes_sent();
  std::exception_ptr error;
  try {
    call();
  } catch (...) {
    error = std::current_exception();
  }
  const auto end = Work::Clock::now();
  {
    std::lock_guard lock(state.mu);
    // Moved, not copied: the thread that ran the call keeps no reference to the exception, so
    // it is never the one that frees it while the waiter still reads it (ThreadSanitizer saw
    // that once, through libstdc++'s uninstrumented reference count).
    state.error = std::move(error);
    state.start = start;
    state.end = end;
    state.sent = group.bytes_sent() - sent_before;
    state.done = true;
  }
  state.cv.notify_all();
}

}  // namespace

Work::~Work() {
  if (state_ == nullptr) return;
  complete_here(*state_);
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });  // ends by the group's timeout at most
}

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    Work finished_before(std::move(*this));  // waits for the call this Work was holding
    state_ = std::move(other.state_);
  }
  return *this;
}

void Work::wait() {
  if (state_ == nullptr) return;
  complete_here(*state_);
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error != nullptr) std::rethrow_exception(std::exchange(state_->error, nullptr));
}

bool Work::is_completed() const {
  if (state_ == nullptr) return true;
  std::lock_guard lock(state_->mu);
  return state_->done;
}

Work::Clock::time_point Work::start_time() const {
  if (state_ == nullptr) return {};
  std::lock_guard lock(state_->mu);
  return state_->done ? state_->start : Clock::time_point{};
}

Work::Clock::time_point Work::end_time() const {
  if (state_ == nullptr) return {};
  std::lock_guard lock(state_->mu);
  return state_->done ? state_->end : Clock::time_point{};
}

std::int64_t Work::bytes_sent() const {
  if (state_ == nullptr) return 0;
  std::lock_guard lock(state_->mu);
  return state_->done ? state_->sent : 0;
}

class ProcessGroup::AsyncQueue {
 public:
  explicit AsyncQueue(const ProcessGroup& group) : group_(group), thread_([this] { serve(); }) {}
  ~AsyncQueue() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // the calls still queued run first: their Works are waiting for them
  }

  std::shared_ptr<Work::State> push(std::function<void()> call) {
    auto state = std::make_shared<Work::State>();
    {
      std::lock_guard lock(mu_);
      queue_.push_back({std::move(call), state});
      ++pending_;
    }
    cv_.notify_all();
    return state;
  }

  // Until every call queued so far has finished.
  void drain() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return pending_ == 0; });
  }

  bool on_this_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct Item {
    std::function<void()> call;
    std::shared_ptr<Work::State> state;
  };

  void serve() {
    for (;;) {
      Item item;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      run_timed(item.call, group_, *item.state);
      {
        std::lock_guard lock(mu_);
        --pending_;
      }
      idle_.notify_all();
    }
  }

  const ProcessGroup& group_;  // whose calls these are (its bytes_sent())
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Item> queue_;
  int pending_ = 0;  // queued or running
  bool stop_ = false;
  std::thread thread_;  // last: it starts serving once everything above exists
};

namespace {
int next_group_id() {  // 0, 1, 2, ...: the flight recorder's group numbers
  static std::atomic<int> next{0};
  return next.fetch_add(1);
}
}  // namespace

// Here, beside AsyncQueue, so that the group's unique_ptr to it can be made and destroyed.
ProcessGroup::ProcessGroup(int rank, int size, std::string backend,
                           std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      ranks_(static_cast<std::size_t>(std::max(size, 0))),
      global_self_(rank),
      backend_(std::move(backend)),
      timeout_(timeout),
      group_id_(next_group_id()) {
  std::iota(ranks_.begin(), ranks_.end(), 0);
}

ProcessGroup::~ProcessGroup() = default;  // the backend's destructor has stopped the thread

Work ProcessGroup::submit(std::function<void()> call) {
  if (async_ == nullptr) {
    const util::WorkerSignals quiet;  // its thread leaves SIGTERM and SIGUSR1 to the program
    async_ = std::make_unique<AsyncQueue>(*this);
  }
  return Work(async_->push(std::move(call)));
}

Work ProcessGroup::run_now(const std::function<void()>& call) {
  auto state = std::make_shared<Work::State>();
  run_timed(call, *this, *state);
  if (state->error != nullptr) std::rethrow_exception(state->error);
  return Work(std::move(state));
}

void ProcessGroup::wait_for_async() {
  if (async_ != nullptr && !async_->on_this_thread()) async_->drain();
}

void ProcessGroup::stop_async() noexcept {
  async_.reset();
  p2p_threads_.reset();  // joins the irecvs' threads: each ends by the group's timeout at most
}

// ---- Point to point (dist/process_group.h: isend, irecv, batch_isend_irecv) ----
// An isend finishes on the thread that waits for it: its Work runs the backend's wait(). An
// irecv finishes on a thread of its own, started as it is posted, because its data's buffer can
// be posted only once the header has arrived and been checked: were that left to wait(), two
// ranks that each wait for their isend before their irecv would wait for each other forever.

// The threads that finish irecvs: one per message in flight, joined when it has finished (at
// the next start) or when the group is destroyed.
class ProcessGroup::P2PThreads {
 public:
  ~P2PThreads() {
    std::vector<Entry> all;
    {
      std::lock_guard lock(mu_);
      all.swap(threads_);
    }
    for (Entry& e : all) e.thread.join();
  }

  void start(std::function<void()> body) {
    std::lock_guard lock(mu_);
    std::erase_if(threads_, [](Entry& e) {
      if (!e.done->load()) return false;
      e.thread.join();
      return true;
    });
    auto done = std::make_shared<std::atomic<bool>>(false);
    const util::WorkerSignals quiet;  // its thread leaves SIGTERM and SIGUSR1 to the program
    threads_.push_back({std::thread([body = std::move(body), done]() mutable {
                          body();
                          body = nullptr;  // the message's buffers go before the thread says so
                          done->store(true);
                        }),
                        done});
  }

 private:
  struct Entry {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex mu_;
  std::vector<Entry> threads_;
};

std::vector<Work> ProcessGroup::post_p2p(const std::vector<P2POp>& ops) {
  if (const std::string closed = closed_reason(); !closed.empty()) {
    throw Error(p2p_name(ops.front(), false) + " on rank " + std::to_string(rank_) +
                ": this process group was closed after an earlier error (" + closed +
                "); start again with destroy_process_group() and init_process_group()");
  }
  const auto start = Work::Clock::now();
  std::vector<std::unique_ptr<Transfer>> transfers;
  try {
    transfers = do_batch_isend_irecv(ops, false);
  } catch (const std::exception& e) {
    close_after(e.what());  // a message may be half-posted: the group cannot go on
    throw;
  }
  std::vector<Work> works;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto state = std::make_shared<Work::State>();
    const bool send = ops[i].op == P2POp::Kind::kIsend;
    const std::int64_t bytes = send ? static_cast<std::int64_t>(ops[i].tensor->nbytes()) : 0;
    std::shared_ptr<Transfer> transfer = std::move(transfers[i]);
    const bool in_flight = transfer->in_flight();
    // Holds the Work's state weakly: an isend's state holds this function.
    auto complete = [this, transfer, bytes, start, weak = std::weak_ptr<Work::State>(state)] {
      std::exception_ptr error;
      try {
        transfer->wait();
      } catch (const std::exception& e) {
        close_after(e.what());
        error = std::current_exception();
      } catch (...) {
        close_after(
            "a point-to-point message failed with an exception that is not a "
            "std::exception");
        error = std::current_exception();
      }
      if (const auto s = weak.lock()) finish(*s, start, error ? 0 : bytes, std::move(error));
    };
    if (!in_flight) {
      complete();
    } else if (send) {
      state->complete = std::move(complete);
    } else {
      {
        std::lock_guard lock(close_mu_);  // two threads may post irecvs at once
        if (p2p_threads_ == nullptr) p2p_threads_ = std::make_unique<P2PThreads>();
      }
      // The thread holds the state: the Work may be dropped while the message is in flight.
      p2p_threads_->start([complete = std::move(complete), state] { complete(); });
    }
    works.push_back(Work(std::move(state)));
  }
  return works;
}

}  // namespace dist
