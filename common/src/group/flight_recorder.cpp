// dist/flight_recorder.h: the ring of a rank's last collectives, and its dump (chapter 10).
//
// Everything that may run in a signal handler is marked "async-signal-safe" below and keeps to
// what POSIX allows there: no malloc (so no std::string, no iostream, no snprintf), no lock,
// only the system calls open, write, close, rename, getpid, clock_gettime, sigaction and raise,
// and atomics that are lock-free. The ring is a fixed array of plain slots, allocated once.
#include "dist/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "dist/check.h"
#include "dist/env.h"

namespace dist {
namespace {

constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // a slot nobody has written (or being written)

std::int64_t now_us() {  // async-signal-safe
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// Copies `from` into a field of N characters, cut and always terminated.
template <std::size_t N>
void copy_name(char (&to)[N], const char* from) {
  std::size_t i = 0;
  for (; from != nullptr && from[i] != '\0' && i + 1 < N; ++i) to[i] = from[i];
  to[i] = '\0';
}

// Formats text into a fixed buffer and writes it to a file descriptor when full: JSON without
// snprintf or malloc. Async-signal-safe.
class FdWriter {
 public:
  explicit FdWriter(int fd) : fd_(fd) {}
  ~FdWriter() { flush(); }
  bool ok() const { return ok_; }

  FdWriter& text(const char* s) {
    for (; *s != '\0'; ++s) put(*s);
    return *this;
  }
  // A JSON string: quotes and backslashes escaped, control characters shown as '?'.
  FdWriter& quoted(const char* s) {
    put('"');
    for (; *s != '\0'; ++s) {
      if (*s == '"' || *s == '\\') put('\\');
      put(static_cast<unsigned char>(*s) < 0x20 ? '?' : *s);
    }
    put('"');
    return *this;
  }
  FdWriter& number(std::int64_t v) {
    char digits[24];
    int n = 0;
    const bool negative = v < 0;
    std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative) put('-');
    while (n > 0) put(digits[--n]);
    return *this;
  }
  FdWriter& unsigned_number(std::uint64_t v) {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) put(digits[--n]);
    return *this;
  }
  void flush() {
    std::size_t done = 0;
    while (ok_ && done < used_) {
      const ssize_t n = ::write(fd_, buffer_ + done, used_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        ok_ = false;
      else
        done += static_cast<std::size_t>(n);
    }
    used_ = 0;
  }

 private:
  void put(char c) {
    if (used_ == sizeof buffer_) flush();
    buffer_[used_++] = c;
  }
  int fd_;
  bool ok_ = true;
  std::size_t used_ = 0;
  char buffer_[2048];
};

}  // namespace

// One entry of the ring. `record` says which call the slot holds; it is kEmpty while the call is
// written, so that a reader (the signal handler) can tell a finished slot from a torn one.
struct FlightRecorder::Slot {
  std::atomic<std::uint64_t> record{kEmpty};
  Call call;
  std::atomic<int> state{0};
  std::atomic<std::int64_t> start_us{0};
  std::atomic<std::int64_t> end_us{0};
};

const char* FlightRecorder::state_name(State state) {
  switch (state) {
    case State::kScheduled:
      return "scheduled";
    case State::kStarted:
      return "started";
    case State::kCompleted:
      return "completed";
    case State::kFailed:
      return "failed";
    case State::kTimedOut:
      return "timed out";
  }
  return "?";
}

FlightRecorder::FlightRecorder(std::size_t capacity)
    : capacity_(capacity == 0 ? 1 : capacity), slots_(new Slot[capacity_]) {}

FlightRecorder::~FlightRecorder() = default;

std::uint64_t FlightRecorder::record(const Call& call) {
  const std::uint64_t r = next_.fetch_add(1);
  Slot& slot = slots_[r % capacity_];
  slot.record.store(kEmpty, std::memory_order_release);
  slot.call.seq = call.seq;
  slot.call.group = call.group;
  copy_name(slot.call.op, call.op);
  copy_name(slot.call.reduce_op, call.reduce_op);
  copy_name(slot.call.dtype, call.dtype);
  slot.call.numel = call.numel;
  slot.call.bytes = call.bytes;
  slot.state.store(static_cast<int>(State::kScheduled), std::memory_order_relaxed);
  slot.start_us.store(now_us(), std::memory_order_relaxed);
  slot.end_us.store(0, std::memory_order_relaxed);
  slot.record.store(r, std::memory_order_release);  // now readers may take it
  return r;
}

void FlightRecorder::set_state(std::uint64_t record, State state) {
  Slot& slot = slots_[record % capacity_];
  if (slot.record.load(std::memory_order_acquire) != record) return;  // overwritten since
  if (state == State::kCompleted || state == State::kFailed || state == State::kTimedOut) {
    slot.end_us.store(now_us(), std::memory_order_relaxed);
  }
  slot.state.store(static_cast<int>(state), std::memory_order_release);
}

std::vector<FlightRecorder::Entry> FlightRecorder::entries() const {
  std::vector<Entry> out;
  const std::uint64_t next = next_.load();
  const std::uint64_t first = next > capacity_ ? next - capacity_ : 0;
  for (std::uint64_t r = first; r < next; ++r) {
    const Slot& slot = slots_[r % capacity_];
    if (slot.record.load(std::memory_order_acquire) != r) continue;
    out.push_back({r, slot.call, static_cast<State>(slot.state.load()), slot.start_us.load(),
                   slot.end_us.load()});
  }
  return out;
}

// Async-signal-safe: reads the slots without a lock. A slot being written at that moment is left
// out (its `record` is kEmpty or already the next call's).
bool FlightRecorder::write_json(int fd, int rank, int world_size, const char* reason) const {
  FdWriter w(fd);
  const std::uint64_t next = next_.load();
  w.text("{\"format\": \"dist flight recorder\", \"version\": 1, \"rank\": ").number(rank);
  w.text(", \"world_size\": ").number(world_size);
  w.text(", \"pid\": ").number(getpid());
  w.text(", \"reason\": ").quoted(reason);
  w.text(", \"time_us\": ").number(now_us());
  w.text(", \"capacity\": ").unsigned_number(capacity_);
  w.text(", \"recorded\": ").unsigned_number(next);
  w.text(", \"entries\": [");
  const std::uint64_t first = next > capacity_ ? next - capacity_ : 0;
  bool any = false;
  for (std::uint64_t r = first; r < next; ++r) {
    const Slot& slot = slots_[r % capacity_];
    if (slot.record.load(std::memory_order_acquire) != r) continue;
    const Call& c = slot.call;
    const auto state = static_cast<State>(slot.state.load(std::memory_order_acquire));
    w.text(any ? ",\n  " : "\n  ");
    w.text("{\"record\": ").unsigned_number(r);
    w.text(", \"group\": ").number(c.group);
    w.text(", \"seq\": ").unsigned_number(c.seq);
    w.text(", \"op\": ").quoted(c.op);
    w.text(", \"reduce_op\": ").quoted(c.reduce_op);
    w.text(", \"dtype\": ").quoted(c.dtype);
    w.text(", \"numel\": ").number(c.numel);
    w.text(", \"bytes\": ").number(c.bytes);
    w.text(", \"state\": ").quoted(state_name(state));
    w.text(", \"start_us\": ").number(slot.start_us.load(std::memory_order_relaxed));
    w.text(", \"end_us\": ").number(slot.end_us.load(std::memory_order_relaxed));
    w.text("}");
    any = true;
  }
  w.text(any ? "\n]}\n" : "]}\n");
  w.flush();
  return w.ok();
}

std::string FlightRecorder::json(int rank, int world_size, const char* reason) const {
  int fds[2];
  DIST_CHECK(pipe(fds) == 0, "pipe for FlightRecorder::json");
  // The pipe is read after the write: fine for the small rings of tests (under the pipe's 64 KiB).
  const bool ok = write_json(fds[1], rank, world_size, reason);
  close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, n);
  close(fds[0]);
  DIST_CHECK(ok, "FlightRecorder::json: the ring does not fit in a pipe");
  return out;
}

// ---- The process's recorder, its file and its signal handlers ---------------------------------
namespace flight {
namespace {

constexpr int kSignals[] = {SIGUSR1, SIGTERM, SIGSEGV, SIGBUS, SIGABRT, SIGFPE};
constexpr int kMaxSignal = 65;

// Set once by install_from_environment, read by the handler: plain, preallocated storage.
std::atomic<FlightRecorder*> g_recorder{nullptr};
int g_rank = 0;
int g_world_size = 1;
char g_path[4096];          // DIST_TRACE_DIR/rank_R.json
char g_temporary[2][4200];  // [0]: a dump from the program's own code, [1]: from a handler
struct sigaction g_previous[kMaxSignal];
std::atomic_flag g_in_handler = ATOMIC_FLAG_INIT;  // one handler's dump at a time
std::atomic_flag g_in_dump = ATOMIC_FLAG_INIT;     // one dump from the program's code at a time

const char* signal_reason(int signal) {
  switch (signal) {
    case SIGUSR1:
      return "SIGUSR1";
    case SIGTERM:
      return "SIGTERM";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGABRT:
      return "SIGABRT";
    case SIGFPE:
      return "SIGFPE";
  }
  return "signal";
}

// Async-signal-safe: the ring to a temporary file, then renamed over the record, so that a
// reader (ddprun) sees the previous record or this one, never half of one. Two temporary names,
// so that a handler and the program's own dump (a timeout) never write the same file.
bool dump_to(const char* temporary, const char* reason) {
  FlightRecorder* recorder = g_recorder.load();
  if (recorder == nullptr) return false;
  const int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = recorder->write_json(fd, g_rank, g_world_size, reason);
  const bool closed = close(fd) == 0;
  if (!written || !closed || rename(temporary, g_path) != 0) {
    unlink(temporary);
    return false;
  }
  return true;
}

// The handler. SIGUSR1: write the record and go on. The others: write it, put back the action
// that was there before (by default: end the process), and raise the signal again, which is
// delivered as soon as this handler returns. Async-signal-safe, and keeps errno for the code it
// interrupted.
void on_signal(int signal) {
  const int saved_errno = errno;
  if (!g_in_handler.test_and_set()) {
    dump_to(g_temporary[1], signal_reason(signal));
    g_in_handler.clear();
  }
  if (signal != SIGUSR1) {
    sigaction(signal, &g_previous[signal], nullptr);
    raise(signal);
  }
  errno = saved_errno;
}

std::size_t buffer_size_from_environment() {
  const auto value = env_value("DIST_TRACE_BUFFER_SIZE");
  if (!value) return 256;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(value->c_str(), &end, 10);
  if (errno != 0 || end == value->c_str() || *end != '\0' || n < 1 || n > 1000000) {
    throw ConfigError("DIST_TRACE_BUFFER_SIZE=\"" + *value +
                      "\" is not a whole number from 1 to 1000000: it is how many collectives "
                      "each rank keeps for its flight record (default 256)");
  }
  return static_cast<std::size_t>(n);
}

}  // namespace

void install_from_environment(int rank, int world_size) {
  if (g_recorder.load() != nullptr) return;
  const auto dir = env_value("DIST_TRACE_DIR");
  if (!dir) return;
  const std::size_t capacity = buffer_size_from_environment();
  std::error_code error;
  std::filesystem::create_directories(*dir, error);
  if (error) {
    throw ConfigError("DIST_TRACE_DIR=\"" + *dir + "\" cannot be made a directory: " +
                      error.message() + "; point it to a writable folder, or unset it");
  }
  const std::string path = *dir + "/rank_" + std::to_string(rank) + ".json";
  const std::string pid = std::to_string(getpid());
  if (path.size() + 16 + pid.size() >= sizeof g_path) {
    throw ConfigError("DIST_TRACE_DIR=\"" + *dir + "\" is too long a path");
  }
  std::strcpy(g_path, path.c_str());
  std::strcpy(g_temporary[0], (path + ".tmp." + pid).c_str());
  std::strcpy(g_temporary[1], (path + ".sig." + pid).c_str());
  g_rank = rank;
  g_world_size = world_size;
  g_recorder.store(new FlightRecorder(capacity));  // lives as long as the process
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : kSignals) sigaddset(&action.sa_mask, signal);  // one handler at a time
  action.sa_flags = SA_RESTART;
  for (int signal : kSignals) sigaction(signal, &action, &g_previous[signal]);
}

FlightRecorder* recorder() {
  return g_recorder.load();
}

bool dump(const char* reason) {
  // Two groups timing out at once on two threads would write one temporary file together: the
  // second one leaves it to the first (whose record holds both calls).
  if (g_in_dump.test_and_set()) return false;
  const bool written = dump_to(g_temporary[0], reason);
  g_in_dump.clear();
  return written;
}

std::string dump_path() {
  return g_recorder.load() == nullptr ? "" : std::string(g_path);
}

void uninstall_for_tests() {
  FlightRecorder* recorder = g_recorder.exchange(nullptr);
  if (recorder == nullptr) return;
  for (int signal : kSignals) sigaction(signal, &g_previous[signal], nullptr);
  delete recorder;
}

}  // namespace flight
}  // namespace dist
