// The TCP store's server (internal): a key-value map served by one background thread of rank 0.
//
// The server is a single poll() loop: no thread per client, so a thousand idle connections cost
// nothing, and a client that vanishes only closes its own socket. `get` and `wait` on missing keys
// are parked on the server and answered when a later `set`/`add`/`compare_set` creates the keys;
// the client enforces its own deadline and drops the connection when it passes. Every connection
// must first say hello with the job's session (and token, when the server has one).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/net.h"
#include "dist/store.h"
#include "store/wire.h"

namespace dist {

class TCPStore::Server {
 public:
  // Listens on host:port (port 0: one the kernel picks) and starts the serving thread.
  Server(const std::string& host, int port, std::uint64_t session, std::string token);
  ~Server();  // stops the thread; connections close

  int port() const { return port_; }
  // Returns when every client but those still to come has disconnected and at least `at_least`
  // have ever joined, or at `deadline`.
  void wait_for_clients_to_leave(net::Deadline deadline, int at_least);

 private:
  struct Conn {
    net::Fd fd;
    std::string in;
    std::string out;
    std::size_t out_sent = 0;             // bytes of `out` already sent
    bool joined = false;                  // passed the hello handshake...
    net::Deadline hello_by{};             // ...which it must do by then
    bool closing = false;                 // close once `out` is flushed
    std::optional<wire::Message> parked;  // a get/wait waiting for keys...
    net::Deadline parked_until{};         // ...until this moment, then it gets kTimeout
    std::size_t pending_out() const { return out.size() - out_sent; }
  };

  // The poll() loop and its connections.
  void loop();
  int ms_until_next_timer() const;
  void expire_timers();
  void accept_one();
  std::list<Conn>::iterator drop(std::list<Conn>::iterator it);
  bool read_from(Conn& c);
  bool write_to(Conn& c);

  // The protocol: frames, the handshake, the requests.
  bool handle_frames(Conn& c);
  bool handle_hello(Conn& c, const wire::Message& m);
  bool same_token(const std::string& theirs) const;
  bool handle(Conn& c, const wire::Message& m);
  bool has_all(const std::vector<std::string>& keys, std::size_t from) const;
  void answer_ready(Conn& c, const wire::Message& m);
  void wake_parked();

  net::Fd listener_;
  net::Fd wake_read_, wake_write_;
  std::string session_;
  std::string token_;
  int port_ = 0;
  std::list<Conn> conns_;
  std::map<std::string, std::string> data_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int joined_clients_ = 0;
  int ever_joined_ = 0;  // every client that joined since the server started, ours included
  net::Deadline accept_paused_until_{};
  std::thread thread_;
};

}  // namespace dist
