// Per-rank logs (logs.h).
#include "logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace ddprun {
namespace {

// How often the tee thread looks for new lines (torchrun's TailLog looks every 0.1 s too).
constexpr auto kTeeInterval = std::chrono::milliseconds(100);
// A "line" longer than this without a newline is shown in pieces, so memory stays bounded.
constexpr std::size_t kMaxPartialLine = 64 * 1024;
// What one look copies from one file at most while the ranks run, so one chatty rank cannot
// hold the others' lines back.
constexpr std::size_t kMaxReadPerLook = 1024 * 1024;

UsageError cannot_make(const std::string& path, int error) {
  return UsageError("cannot create the log folder '" + path + "': " + std::strerror(error),
                    "--log-dir needs a folder ddprun may create and write to; pick another, "
                    "e.g. --log-dir /tmp/logs");
}

// mkdir -p: every missing folder on the way, then `path` itself.
void make_folders(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (std::filesystem::is_directory(path)) return;
  // Something that is not a folder stands in the way (`path` or one on the way to it).
  throw cannot_make(path, error && error != std::errc::file_exists ? error.value() : ENOTDIR);
}

// A new folder `parent`/`prefix`XXXXXX, as Python's tempfile.mkdtemp(prefix=...) makes one.
std::string make_new_folder(const std::string& parent, const std::string& prefix) {
  std::string pattern = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw cannot_make(pattern, errno);
  return pattern;
}

std::string temp_folder() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

// Whole writes; false when `fd` is gone (EPIPE, a closed terminal).
bool write_all(int fd, const char* p, std::size_t left) {
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

int open_log(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  return fd;
}

// "every rank", "local rank 2", "local ranks 0, 2".
std::string ranks_text(const std::vector<int>& ranks, int nproc) {
  if (static_cast<int>(ranks.size()) == nproc) return nproc == 1 ? "the rank" : "every rank";
  std::string text = ranks.size() == 1 ? "local rank " : "local ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

RankLogs::RankLogs(const Options& o)
    : nproc_(o.nproc_per_node), redirects_(o.redirects), tee_(o.tee) {
  bool any = !o.log_dir.empty();
  for (int local_rank = 0; local_rank < nproc_; ++local_rank) {
    any = any || (redirects_.for_local_rank(local_rank) | tee_.for_local_rank(local_rank)) != 0;
  }
  if (!any) return;
  std::string base = o.log_dir;
  if (base.empty()) {
    base = make_new_folder(temp_folder(), "ddprun_");
  } else {
    make_folders(base);
  }
  run_dir_ = make_new_folder(base, "none_");
  begin_attempt(0);
}

void RankLogs::begin_attempt(int attempt) {
  if (run_dir_.empty()) return;
  const std::string folder = run_dir_ + "/attempt_" + std::to_string(attempt);
  if (::mkdir(folder.c_str(), 0777) != 0) throw cannot_make(folder, errno);
  for (int local_rank = 0; local_rank < nproc_; ++local_rank) {
    const std::string rank_folder = folder + "/" + std::to_string(local_rank);
    if (::mkdir(rank_folder.c_str(), 0777) != 0) throw cannot_make(rank_folder, errno);
  }
  // The last attempt's files are copied to the end, then closed: the next attempt has its own.
  std::lock_guard<std::mutex> lock(copy_mutex_);
  for (Follow& follow : follows_) {
    copy_new(follow, true);
    ::close(follow.fd);
  }
  follows_.clear();
  attempt_dir_ = folder;
}

RankLogs::~RankLogs() {
  if (thread_.joinable()) finish();
  for (const Follow& follow : follows_) ::close(follow.fd);
}

std::string RankLogs::description() const {
  std::string text;
  for (const auto& [bit, name] : {std::pair{kStdOut, "stdout"}, std::pair{kStdErr, "stderr"}}) {
    std::vector<int> files, teed;
    for (int local_rank = 0; local_rank < nproc_; ++local_rank) {
      const bool tee = (tee_.for_local_rank(local_rank) & bit) != 0;
      if (tee) teed.push_back(local_rank);
      if (tee || (redirects_.for_local_rank(local_rank) & bit) != 0) files.push_back(local_rank);
    }
    if (files.empty()) continue;
    text += (text.empty() ? "" : "; ") + std::string(name) + ".log of " + ranks_text(files, nproc_);
    if (teed == files) {
      text += " (also shown here)";
    } else if (!teed.empty()) {
      text += " (" + ranks_text(teed, nproc_) + " also shown here)";
    }
  }
  return text;
}

ChildStreams RankLogs::open_files(int local_rank) {
  ChildStreams streams;
  if (!enabled()) return streams;
  const int to_file = redirects_.for_local_rank(local_rank) | tee_.for_local_rank(local_rank);
  const int teed = tee_.for_local_rank(local_rank);
  const std::string folder = attempt_dir_ + "/" + std::to_string(local_rank) + "/";
  std::lock_guard<std::mutex> lock(copy_mutex_);  // the tee thread reads follows_
  try {
    for (const auto& [bit, name, fd, console] :
         {std::tuple{kStdOut, "stdout.log", &streams.out, STDOUT_FILENO},
          std::tuple{kStdErr, "stderr.log", &streams.err, STDERR_FILENO}}) {
      if ((to_file & bit) == 0) continue;
      const std::string path = folder + name;
      *fd = open_log(path);
      if ((teed & bit) == 0) continue;
      const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (reader < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
      follows_.push_back({reader, console, ""});
    }
  } catch (...) {
    close_parent_copies(streams);
    throw;
  }
  return streams;
}

void RankLogs::close_parent_copies(ChildStreams& streams) {
  for (int* fd : {&streams.out, &streams.err}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void RankLogs::start_tee() {
  if (follows_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { tee_loop(); });
}

void RankLogs::tee_loop() {
  // SIGPIPE is blocked in ddprun (block_watched_signals), and so in this thread: a closed stdout
  // (ddprun ... | head) makes the write fail with EPIPE, and the copying stops, instead of
  // killing ddprun and with it every rank.
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_) {
    lock.unlock();
    catch_up(false);
    lock.lock();
    stop_cv_.wait_for(lock, kTeeInterval, [this] { return stop_; });
  }
}

void RankLogs::catch_up(bool ranks_done) {
  std::lock_guard<std::mutex> lock(copy_mutex_);
  for (Follow& follow : follows_) copy_new(follow, ranks_done);
}

void RankLogs::finish() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  catch_up(true);
}

void RankLogs::copy_new(Follow& follow, bool ranks_done) {
  char buffer[64 * 1024];
  std::size_t copied = 0;
  while (ranks_done || copied < kMaxReadPerLook) {
    const ssize_t n = ::read(follow.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the end of what the rank has written so far
    copied += static_cast<std::size_t>(n);
    follow.partial.append(buffer, static_cast<std::size_t>(n));
    // Only whole lines go out, all of them in one write().
    std::size_t end = follow.partial.rfind('\n');
    end = end == std::string::npos ? 0 : end + 1;
    if (end == 0 && follow.partial.size() >= kMaxPartialLine) end = follow.partial.size();
    if (end > 0 && !console_gone_[follow.console]) {
      console_gone_[follow.console] = !write_all(follow.console, follow.partial.data(), end);
    }
    follow.partial.erase(0, end);
  }
  if (ranks_done && !follow.partial.empty()) {
    follow.partial += '\n';  // the rank's last line had no newline; the file keeps it as it was
    if (!console_gone_[follow.console]) {
      console_gone_[follow.console] =
          !write_all(follow.console, follow.partial.data(), follow.partial.size());
    }
    follow.partial.clear();
  }
}

}  // namespace ddprun
