// dist/store.h — the key-value store that ranks use to find each other.
//
// Before ranks can talk over Gloo or NCCL they must exchange addresses. Like torch.distributed, we
// do that through a small key-value store: rank 0 hosts a TCP server (TCPStore) at
// MASTER_ADDR:MASTER_PORT and every rank connects to it; with init_method file:// a file on a
// shared disk plays the same part (FileStore). A PrefixStore gives each process group and each
// re-initialisation its own key space, so stale keys from an earlier group are never read.
//
// Every blocking call has a deadline: `get` and `wait` throw dist::TimeoutError naming the keys
// they waited for. A client that starts before the server retries until its deadline.
//
// Who may use it: with a local MASTER_ADDR (127.x, localhost) the server listens on loopback only.
// With DIST_STORE_TOKEN set (ddprun sets a fresh one for every one-machine job), a client must
// present the same token to join: other processes that reach the port are turned away before they
// can set or read a key. The token travels in the clear: on a network you do not trust, use a
// private one. What it leaves out: encryption, and persistence across restarts of rank 0.
//
// Taught in: chapter 02 (init methods) and chapter 03 (two programs).
// Built in: common/src/store/: store.cpp (PrefixStore, the read acknowledgements), tcp_store.cpp
// (the client) and tcp_store_server.cpp, file_store.cpp, hash_store.cpp (HashStore, in memory);
// wire.h is the TCP protocol.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dist {

using Millis = std::chrono::milliseconds;

// The longest timeout anything accepts: a week. Longer ones are refused with a ConfigError
// rather than overflowing a clock somewhere.
inline constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(24 * 7);

inline constexpr std::size_t kMaxStoreKeyBytes = 4096;                 // longer keys are refused
inline constexpr std::size_t kMaxStoreTokenBytes = 256;                // DIST_STORE_TOKEN
inline constexpr std::size_t kMaxStoreValueBytes = 64u * 1024 * 1024;  // larger values are refused

class Store {
 public:
  explicit Store(Millis timeout) : timeout_(checked_timeout(timeout)) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists or the timeout passes (dist::TimeoutError).
  virtual std::string get(const std::string& key) = 0;
  // Adds `delta` to the integer stored at `key` (0 if absent) and returns the new value. The value
  // is stored as decimal text, so `get` on it returns e.g. "3", as in torch.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Sets `key` to `desired` if its current value is `expected` (an absent key matches only an
  // empty `expected`). Returns the value the key holds afterwards, as torch's compare_set does.
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  // Blocks until every key exists, or throws dist::TimeoutError listing those still missing.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  // True if every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Removes `key`; true if it existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual std::int64_t num_keys() = 0;

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis timeout) { timeout_ = checked_timeout(timeout); }

  // `timeout` if it is positive and at most kMaxTimeout; a dist::ConfigError otherwise.
  static Millis checked_timeout(Millis timeout);
  // Throw dist::Error for a key or a value over the limits above. Every store checks before it
  // sends or writes anything, so an oversized key never reaches the wire or the file.
  static void check_key(const std::string& key);
  static void check_value(const std::string& value);

 protected:
  Millis timeout_;
};

// A TCP store. The process with `is_server` hosts it (a background thread); every process,
// including the server's own, talks to it as a client. `session` must be the same for every
// member of one job generation: a client whose session differs is turned away and retries, so a
// rank re-initialising early can never join the previous generation's server.
class TCPStore : public Store {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 29500;  // 0 on the server: pick a free port (see port())
    bool is_server = false;
    Millis timeout{std::chrono::seconds(60)};
    std::uint64_t session = 0;
    // The job's shared secret (DIST_STORE_TOKEN). A server with a token turns away, at the
    // handshake, every client that does not present the same one: it can neither join nor read
    // a key. Empty: no token asked. At most kMaxStoreTokenBytes.
    std::string token;
  };
  explicit TCPStore(const Options& options);
  ~TCPStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

  int port() const;  // the port actually used
  const std::string& host() const { return options_.host; }

  // Server only: waits until every other client has disconnected, or until `deadline`. Rank 0
  // calls this before tearing the server down, so ranks still finishing are not cut off. With
  // `at_least`, it also waits until that many clients (its own included) have ever joined: a
  // rank 0 that fails during init stays until the others have come to read why.
  void wait_for_clients_to_leave(std::chrono::steady_clock::time_point deadline, int at_least = 0);

 private:
  class Server;
  class Client;
  Options options_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

// A store kept in one file (init_method file:///path). Every operation takes an exclusive
// flock() on the file, so it works across processes on one machine or on a shared file system
// that supports locks. The last process to close it deletes the file.
class FileStore : public Store {
 public:
  FileStore(std::string path, Millis timeout);
  ~FileStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

  const std::string& path() const { return path_; }

 private:
  class Log;
  std::chrono::steady_clock::time_point deadline() const;  // now + the timeout
  std::string path_;
  std::unique_ptr<Log> log_;
};

// Every key is stored as prefix + "/" + key in the underlying store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;  // counts the base store's keys, as torch's PrefixStore does

  const std::string& prefix() const { return prefix_; }
  Store& base() { return *base_; }

 private:
  std::string prefixed(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

// A store in this process's memory, torch's HashStore: one map under one lock, shared by the
// threads of one process (hand each the same std::shared_ptr). It reaches no other process, so no
// program meets through it; the tests do, to run the rendezvous, the DIST_DEBUG=DETAIL check and
// monitored_barrier with one thread per rank, without sockets or files. `get` and `wait` block
// until the keys exist or the timeout passes (dist::TimeoutError naming the missing keys), as in
// every store here.
class HashStore : public Store {
 public:
  explicit HashStore(Millis timeout = std::chrono::seconds(60));
  ~HashStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

 private:
  struct Map;
  std::unique_ptr<Map> map_;
};

// "Rank 0 keeps the store up until the others have read." Rank 0 hosts a TCP store, so a rank 0
// that throws and exits at once can leave the others with a lost connection instead of the
// message it just published for them. Each other rank, once it has read what it needs, calls
// acknowledge_read(store, topic, rank); rank 0 calls wait_for_reads(store, topic, ranks, limit)
// before it goes on (keys topic + "/" + rank). Both are best effort: acknowledge_read ignores a
// store that is gone already, and wait_for_reads returns at `limit` (rank 0 then goes on anyway).
void acknowledge_read(Store& store, const std::string& topic, int rank);
void wait_for_reads(Store& store, const std::string& topic, const std::vector<int>& ranks,
                    Millis limit);

}  // namespace dist
