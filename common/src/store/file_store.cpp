// FileStore (dist/store.h): the store behind init_method file:///path.
//
// The file is an append-only log of records; a process replays the records it has not seen yet
// before every operation, under an exclusive flock(), so all processes agree on the contents.
// Waiting polls the file (every few milliseconds, up to a deadline) because a file cannot notify.
// Each record is [u32 key length][key][u32 value length][value]; a value length of 0xFFFFFFFF
// marks a deletion. A torn record left by a crash is detected and reported, never misread.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <map>
#include <thread>

#include "base/net.h"
#include "dist/check.h"
#include "dist/store.h"
#include "store/wire.h"

namespace dist {
namespace {

constexpr std::uint32_t kTombstone = 0xFFFFFFFFu;
// How many FileStore objects have the file open, across all processes. The one that brings it to
// zero deletes the file, under the lock; anyone who then locks the deleted file reopens the path.
constexpr const char* kUsersKey = "__dist_file_store_users__";

}  // namespace

class FileStore::Log {
 public:
  explicit Log(const std::string& path) : path_(path) { open(); }

  // Runs `fn` with the file locked and the in-memory map up to date. Waiting for the lock ends
  // at `deadline`: a process that stopped while holding it must not stop everyone else too.
  template <typename Fn>
  auto locked(net::Deadline deadline, Fn&& fn) {
    lock_live_file(deadline);
    struct Unlock {
      int fd;
      ~Unlock() { ::flock(fd, LOCK_UN); }
    } unlock{fd_.get()};
    replay();
    return fn();
  }

  // Deletes the file; call only inside locked().
  void unlink() { ::unlink(path_.c_str()); }

  std::map<std::string, std::string>& data() { return data_; }

  void append(const std::string& key, const std::string* value) {
    std::string rec;
    wire::append_u32(rec, static_cast<std::uint32_t>(key.size()));
    rec += key;
    wire::append_u32(rec, value ? static_cast<std::uint32_t>(value->size()) : kTombstone);
    if (value) rec += *value;
    const off_t end = ::lseek(fd_.get(), 0, SEEK_END);
    std::size_t done = 0;
    while (done < rec.size()) {
      const ssize_t n =
          ::pwrite(fd_.get(), rec.data() + done, rec.size() - done, end + static_cast<off_t>(done));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error("cannot write the file store " + path_ + ": " + net::describe_errno(errno));
      }
      done += static_cast<std::size_t>(n);
    }
    offset_ = end + static_cast<off_t>(rec.size());
    if (value) {
      data_[key] = *value;
    } else {
      data_.erase(key);
    }
  }

 private:
  void open() {
    fd_ = net::Fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd_.valid()) {
      throw ConfigError("cannot open the file store " + path_ + ": " + net::describe_errno(errno) +
                        " (init_method file:// needs a writable path that every rank can see)");
    }
    offset_ = 0;
    data_.clear();
  }

  // Takes the lock on a file that is still linked at path_ (if its last user deleted it between
  // our open() and our flock(), start over on the new file at the same path), by `deadline`.
  void lock_live_file(net::Deadline deadline) {
    for (;;) {
      auto pause = std::chrono::milliseconds(1);
      while (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
          throw Error("flock(" + path_ + ") failed: " + net::describe_errno(errno));
        }
        if (net::Clock::now() >= deadline) {
          throw TimeoutError("the file store " + path_ +
                             " stayed locked by another process until the timeout (a rank "
                             "stopped while using it, or the file system's locks are stuck)");
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(20));
      }
      struct stat st {};
      if (::fstat(fd_.get(), &st) == 0 && st.st_nlink > 0) return;
      ::flock(fd_.get(), LOCK_UN);
      open();
    }
  }

  // Reads the records appended since our last look.
  void replay() {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw Error("fstat(" + path_ + ") failed");
    if (st.st_size < offset_) {
      throw Error("the file store " + path_ +
                  " shrank while in use: another job is using the "
                  "same file; give each job its own file:// path");
    }
    if (st.st_size == offset_) return;
    std::string buf(static_cast<std::size_t>(st.st_size - offset_), '\0');
    std::size_t got = 0;
    while (got < buf.size()) {
      const ssize_t n =
          ::pread(fd_.get(), buf.data() + got, buf.size() - got, offset_ + static_cast<off_t>(got));
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        throw Error("cannot read the file store " + path_);
      }
      got += static_cast<std::size_t>(n);
    }
    std::size_t pos = 0;
    auto torn = [&] {
      return Error("the file store " + path_ +
                   " ends in a torn record (a process died while "
                   "writing it): delete the file and restart the job");
    };
    while (pos < buf.size()) {
      if (buf.size() - pos < 4) throw torn();
      const std::uint32_t klen = wire::read_u32(buf.data() + pos);
      if (klen > kMaxStoreKeyBytes || buf.size() - pos - 4 < klen + 4) throw torn();
      std::string key = buf.substr(pos + 4, klen);
      pos += 4 + klen;
      const std::uint32_t vlen = wire::read_u32(buf.data() + pos);
      pos += 4;
      if (vlen == kTombstone) {
        data_.erase(key);
        continue;
      }
      if (vlen > kMaxStoreValueBytes || buf.size() - pos < vlen) throw torn();
      data_[std::move(key)] = buf.substr(pos, vlen);
      pos += vlen;
    }
    offset_ = st.st_size;
  }

  std::string path_;
  net::Fd fd_;
  off_t offset_ = 0;
  std::map<std::string, std::string> data_;
};

FileStore::FileStore(std::string path, Millis timeout)
    : Store(timeout), path_(std::move(path)), log_(std::make_unique<Log>(path_)) {
  add(kUsersKey, 1);
}

FileStore::~FileStore() {
  // The last user removes the file, so the next job starts from nothing.
  try {
    const auto soon = net::Clock::now() + std::min<Millis>(timeout_, std::chrono::seconds(2));
    log_->locked(soon, [&] {
      auto it = log_->data().find(kUsersKey);
      const bool last = it == log_->data().end() || it->second == "1" || it->second == "0";
      if (last) {
        log_->unlink();
      } else {
        const std::string fewer = std::to_string(std::stoll(it->second) - 1);
        log_->append(kUsersKey, &fewer);
      }
    });
  } catch (const std::exception&) {
    // A destructor must not throw; a leftover file makes the next job report duplicate ranks.
  }
}

net::Deadline FileStore::deadline() const {
  return net::Clock::now() + timeout_;
}

void FileStore::set(const std::string& key, const std::string& value) {
  check_key(key);
  check_value(value);
  log_->locked(deadline(), [&] { log_->append(key, &value); });
}

std::string FileStore::get(const std::string& key) {
  wait({key}, timeout_);
  return log_->locked(deadline(), [&] {
    auto it = log_->data().find(key);
    if (it == log_->data().end()) throw Error("key \"" + key + "\" was deleted while being read");
    return it->second;
  });
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  return log_->locked(deadline(), [&] {
    std::int64_t current = 0;
    if (auto it = log_->data().find(key); it != log_->data().end()) {
      const std::string& text = it->second;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || ptr != text.data() + text.size()) {
        throw Error("key \"" + key + "\" in " + path_ + " does not hold an integer");
      }
    }
    const auto next = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) +
                                                static_cast<std::uint64_t>(delta));
    const std::string text = std::to_string(next);
    log_->append(key, &text);
    return next;
  });
}

std::string FileStore::compare_set(const std::string& key, const std::string& expected,
                                   const std::string& desired) {
  check_key(key);
  check_value(desired);
  return log_->locked(deadline(), [&]() -> std::string {
    auto it = log_->data().find(key);
    if (it == log_->data().end()) {
      if (!expected.empty()) return expected;
    } else if (it->second != expected) {
      return it->second;
    }
    log_->append(key, &desired);
    return desired;
  });
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& k : keys) check_key(k);
  const auto until = net::Clock::now() + checked_timeout(timeout);
  auto pause = std::chrono::milliseconds(1);
  while (!check(keys)) {
    if (net::Clock::now() >= until) {
      std::string missing;
      log_->locked(deadline(), [&] {
        for (const auto& k : keys) {
          if (!log_->data().count(k)) missing += " \"" + k + "\"";
        }
      });
      throw TimeoutError("file store " + path_ + ": timed out waiting for" + missing);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key(k);
  return log_->locked(deadline(), [&] {
    for (const auto& k : keys) {
      if (!log_->data().count(k)) return false;
    }
    return true;
  });
}

bool FileStore::delete_key(const std::string& key) {
  check_key(key);
  return log_->locked(deadline(), [&] {
    if (!log_->data().count(key)) return false;
    log_->append(key, nullptr);
    return true;
  });
}

std::int64_t FileStore::num_keys() {
  return log_->locked(deadline(), [&] { return static_cast<std::int64_t>(log_->data().size()); });
}

}  // namespace dist
