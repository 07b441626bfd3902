// Small POSIX socket helpers with deadlines (internal). Every call that can block takes a
// deadline and throws dist::TimeoutError when it passes, so no caller can hang forever.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

namespace dist::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// Listens on host:port (port 0: any free port). A loopback host binds only loopback; any other
// host binds every interface of its address family, so ranks on other machines can connect.
// Throws dist::ConfigError naming host and port when the port is taken.
Fd listen_on(const std::string& host, int port);
int local_port(int fd);

// The addresses host:port resolves to, for TCP. Throws dist::ConfigError when it does not
// resolve. Resolve once and retry connecting to the result: a name server can be slow.
struct Address {
  sockaddr_storage storage;
  socklen_t length;
};
std::vector<Address> resolve_tcp(const std::string& host, int port);

// One connection attempt to each address in turn, bounded by `deadline`. Returns an invalid Fd
// when nobody is listening yet (refused, unreachable): the caller decides whether to retry.
Fd try_connect(const std::vector<Address>& addresses, Deadline deadline);

// Sends/receives exactly `n` bytes before `deadline`. Return false if the peer closed the
// connection; throw dist::TimeoutError on the deadline.
bool send_all(int fd, const char* data, std::size_t n, Deadline deadline);
bool recv_all(int fd, char* data, std::size_t n, Deadline deadline);

// The address of this machine's interface that routes to `host` (no packet is sent: a UDP
// socket is connected and asked for its local address). "127.0.0.1" for a loopback host.
std::string local_address_towards(const std::string& host);

// True if `host` names a loopback address (127.0.0.0/8, ::1, "localhost").
bool is_loopback(const std::string& host);

std::string describe_errno(int err);

}  // namespace dist::net
