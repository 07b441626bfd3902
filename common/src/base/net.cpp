// POSIX socket helpers with deadlines (see net.h).
#include "net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "dist/check.h"

namespace dist::net {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port, int socktype, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    throw ConfigError("cannot resolve host \"" + host + "\": " + gai_strerror(rc) +
                      " (check the address, e.g. MASTER_ADDR)");
  }
  return AddrInfoPtr(result);
}

int remaining_ms(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1 << 30));
}

// Waits for `events` on fd; false when the deadline passes first.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw Error("poll failed: " + describe_errno(errno));
  }
}

bool loopback_sockaddr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string describe_errno(int err) {
  return std::strerror(err);
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

Fd listen_on(const std::string& host, int port) {
  AddrInfoPtr ai = resolve(host, port, SOCK_STREAM, false);
  const bool loopback = loopback_sockaddr(ai->ai_addr);
  Fd fd(::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw Error("socket() failed: " + describe_errno(errno));
  const int one = 1;
  // Lets rank 0 re-listen on MASTER_PORT right after a previous group closed it (TIME_WAIT);
  // on Linux it does not let two live listeners share the port.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage addr{};
  std::memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
  if (!loopback) {
    if (ai->ai_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (ai->ai_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr = in6addr_any;
    }
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), ai->ai_addrlen) != 0) {
    const int e = errno;
    if (e == EADDRINUSE) {
      throw ConfigError("port " + std::to_string(port) + " on " + host +
                        " is already in use (another job, or a process left over from one): pick "
                        "a free MASTER_PORT, or let `ddprun --standalone` choose one");
    }
    throw ConfigError("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                      describe_errno(e) + " (is " + host + " an address of this machine?)");
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) throw Error("listen() failed: " + describe_errno(errno));
  return fd;
}

int local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

std::vector<Address> resolve_tcp(const std::string& host, int port) {
  AddrInfoPtr ai = resolve(host, port, SOCK_STREAM, false);
  std::vector<Address> out;
  for (addrinfo* p = ai.get(); p != nullptr; p = p->ai_next) {
    Address a{};
    std::memcpy(&a.storage, p->ai_addr, p->ai_addrlen);
    a.length = p->ai_addrlen;
    out.push_back(a);
  }
  return out;
}

Fd try_connect(const std::vector<Address>& addresses, Deadline deadline) {
  for (const Address& a : addresses) {
    const auto* sa = reinterpret_cast<const sockaddr*>(&a.storage);
    Fd fd(::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) continue;
    int rc = ::connect(fd.get(), sa, a.length);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_for(fd.get(), POLLOUT, deadline)) return Fd();
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) continue;
    // Back to blocking mode; every later wait goes through poll() with a deadline anyway.
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  return Fd();
}

bool send_all(int fd, const char* data, std::size_t n, Deadline deadline) {
  while (n > 0) {
    if (!wait_for(fd, POLLOUT, deadline)) throw TimeoutError("timed out sending to the store");
    const ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;  // EPIPE, ECONNRESET: the peer is gone
    }
    data += sent;
    n -= static_cast<std::size_t>(sent);
  }
  return true;
}

bool recv_all(int fd, char* data, std::size_t n, Deadline deadline) {
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) throw TimeoutError("timed out waiting for the store");
    const ssize_t got = ::recv(fd, data, n, MSG_DONTWAIT);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
    data += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

std::string local_address_towards(const std::string& host) {
  if (is_loopback(host)) return "127.0.0.1";
  AddrInfoPtr ai = resolve(host, 9, SOCK_DGRAM, false);
  Fd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    throw ConfigError("no route from this machine to " + host + ": " + describe_errno(errno) +
                      " (check MASTER_ADDR and the network)");
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
  char text[INET6_ADDRSTRLEN] = {};
  if (local.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace dist::net
