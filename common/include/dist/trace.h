// dist/trace.h — a per-rank timeline of what each thread did, as a Chrome trace (Perfetto).
//
//   dist::Timeline timeline(rank);
//   { dist::Timeline::Span s(&timeline, "forward"); model.forward(x); }   // one bar, main thread
//   timeline.write("trace/rank0.json");   // open it in https://ui.perfetto.dev or chrome://tracing
//
// Each Span is a complete event ("ph": "X") with its start and duration in microseconds since the
// Timeline was made, on the thread that recorded it (named "main", say), in a process named
// "rank R". add() records a span that ran elsewhere, from its times, on a lane named for where
// it ran: DDP's bucket all_reduces, from their Works, on "gradient all_reduce". Recording takes a
// mutex, so several threads may record at once. A null Timeline pointer makes Span do nothing, so
// code can always say what it is doing.
//
// Taught in: chapter 09 (ddp_classifier).
// Built in: common/src/base/trace.cpp.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace dist {

class Timeline {
 public:
  explicit Timeline(int rank);

  // Names the calling thread in the trace ("main", "gradient all_reduce").
  void name_this_thread(const std::string& name);

  class Span {
   public:
    Span(Timeline* timeline, std::string name);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    Timeline* timeline_;
    std::string name_;
    std::chrono::steady_clock::time_point start_;
  };

  // A span that ran from `start` to `end`, on the lane named `lane` (made on first use, apart
  // from the threads): what a process group's communication thread ran, from its Work's times.
  void add(std::string name, std::chrono::steady_clock::time_point start,
           std::chrono::steady_clock::time_point end, const std::string& lane);

  // The whole trace as JSON (the Chrome trace event format's object form).
  std::string json() const;
  // Writes json() to `path` atomically (a temporary file, then rename): a reader never sees half
  // a trace. Throws dist::Error naming the path if it cannot.
  void write(const std::string& path) const;
  std::size_t size() const;  // spans recorded so far

 private:
  struct Event {
    std::string name;
    long long start_us, duration_us;
    int tid;
  };
  int thread_id();  // a small number per thread, in order of first use; needs mu_
  int lane_id(const std::string& lane);  // the same for a lane of add()'s; needs mu_
  void record(std::string name, std::chrono::steady_clock::time_point start,
              std::chrono::steady_clock::time_point end, int tid);  // needs mu_

  int rank_;
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  struct Thread {
    std::size_t id;  // hash of std::thread::id; 0 for a lane of add()'s
    bool lane;
    std::string name;
  };
  std::vector<Thread> threads_;  // tid -> thread or lane
};

}  // namespace dist
