// dist/flight_recorder.h — every rank's last collectives, written down when the job goes wrong.
//
// A job that hangs says little: every rank waits, and at --timeout each one reports its own call
// timing out. Which rank was behind, and which rank called something else? Each rank keeps a
// small ring of its last collectives (call number, group, op, reduce op, dtype, size, start and
// end time, state) and writes it to DIST_TRACE_DIR/rank_R.json when:
//   * a collective times out (before the TimeoutError reaches the program) or fails;
//   * it receives SIGUSR1 (`kill -USR1 PID`: a look at a running job; the program goes on);
//   * it receives SIGTERM (what ddprun sends the other ranks once one has failed: so a rank
//     stuck in another call is recorded too), or crashes (SIGSEGV, SIGBUS, SIGABRT, SIGFPE);
//     then the signal does what it did before (by default: the process ends of it).
// ddprun reads the files of all ranks and says who waited where (tools/ddprun/flight.h).
//
//   DIST_TRACE_DIR=/tmp/trace ddprun --nproc-per-node 2 ./my_program   # ddprun sets one itself
//   kill -USR1 <pid of rank 1>      # /tmp/trace/rank_1.json: what rank 1 is doing now
//
// PyTorch has the same idea for NCCL only (its "Flight Recorder": TORCH_NCCL_TRACE_BUFFER_SIZE,
// TORCH_NCCL_DUMP_ON_TIMEOUT); this one records every backend, because the process group records
// each call before the backend sees it (common/src/group/process_group.cpp).
//
// Variables: DIST_TRACE_DIR (unset or empty: nothing is recorded, no handler is installed);
// DIST_TRACE_BUFFER_SIZE (entries in the ring, default 256, 1-1000000).
//
// What it leaves out: send/recv (not collectives: they carry no call number of their own), an
// asynchronous call still waiting in its queue (it is recorded when it starts), stack traces, and a
// crash by stack overflow (the handler would need an alternate stack).
//
// Taught in: chapter 10 (failure modes, the case "who-hung-where").
// Built in: common/src/group/flight_recorder.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dist {

class FlightRecorder {
 public:
  // A call's life: numbered and checked (scheduled), handed to the backend (started), then one of
  // the three ends.
  enum class State : int { kScheduled, kStarted, kCompleted, kFailed, kTimedOut };
  static const char* state_name(State state);  // "scheduled", "started", "completed", ...

  // What one collective was. Plain characters and numbers only: a signal handler reads it.
  struct Call {
    std::uint64_t seq = 0;    // the group's call number (ProcessGroup::Call::seq)
    int group = 0;            // which group: 0 for the first one this process made, then 1, ...
    char op[24] = {};         // "all_reduce"
    char reduce_op[12] = {};  // "SUM"; empty when the op has none
    char dtype[24] = {};      // "torch.float32"; empty for barrier
    std::int64_t numel = 0;
    std::int64_t bytes = 0;
  };
  struct Entry {
    std::uint64_t record = 0;  // 0, 1, 2, ... in the order this process recorded its calls
    Call call;
    State state = State::kScheduled;
    std::int64_t start_us = 0;  // wall-clock microseconds since the epoch (comparable across
    std::int64_t end_us = 0;    // machines as far as their clocks agree); 0: not ended
  };

  // All memory is allocated here, never after: record(), set_state() and write_json() allocate
  // nothing, take no lock, and write_json() is async-signal-safe.
  explicit FlightRecorder(std::size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  std::size_t capacity() const { return capacity_; }

  // Records a call as scheduled, now, overwriting the oldest entry once the ring is full; returns
  // its record number. Names longer than the fields are cut.
  std::uint64_t record(const Call& call);
  // Moves record `record` to `state` (an end state also sets end_us). Does nothing if the ring has
  // overwritten it meanwhile.
  void set_state(std::uint64_t record, State state);

  // The entries still in the ring, oldest first (for tests and tools; allocates).
  std::vector<Entry> entries() const;

  // Writes the whole record as JSON to `fd`: rank, world size, pid, why it was written, the time,
  // and the entries oldest first, one per line. Async-signal-safe. Returns false if a write failed.
  bool write_json(int fd, int rank, int world_size, const char* reason) const;
  // The same into a string (for tests).
  std::string json(int rank, int world_size, const char* reason) const;

 private:
  struct Slot;
  std::size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<std::uint64_t> next_{0};
};

// The recorder of this process, set up by init_process_group from DIST_TRACE_DIR.
namespace flight {

// Reads DIST_TRACE_DIR and DIST_TRACE_BUFFER_SIZE; if the directory is set, makes the recorder,
// creates the directory if needed and installs the signal handlers. The first call wins (a later
// group of the same process records into the same ring). Throws ConfigError for a bad size.
void install_from_environment(int rank, int world_size);

// The recorder, or nullptr when DIST_TRACE_DIR is unset.
FlightRecorder* recorder();

// Writes DIST_TRACE_DIR/rank_R.json atomically (a temporary file, then rename), saying `reason`.
// Async-signal-safe. Returns false if nothing was written (no recorder, or an I/O error).
bool dump(const char* reason);

// The file dump() writes, "" when there is no recorder.
std::string dump_path();

// For tests: forget the recorder and restore the signal handlers it replaced.
void uninstall_for_tests();

}  // namespace flight
}  // namespace dist
