// bench_loopback — the floor for small messages: one byte there and back over TCP on 127.0.0.1.
//
// A child process echoes every byte it receives; the parent sends one byte, waits for it to come
// back, and does that --round-trips times (after a warm-up), with TCP_NODELAY as Gloo sets it.
// Prints the median and the 10th percentile in microseconds. No collective can beat this: a
// 2-rank all_reduce of a few bytes needs at least one message each way.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// Every socket gives up after 5 s: a lost peer is an error, never a hang.
void set_options(int fd) {
  const int one = 1;
  check(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");
  const timeval limit{5, 0};
  check(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) == 0, "SO_RCVTIMEO");
  check(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit) == 0, "SO_SNDTIMEO");
}

bool echo_once(int fd) {
  char byte = 0;
  if (recv(fd, &byte, 1, 0) != 1) return false;
  return send(fd, &byte, 1, 0) == 1;
}

}  // namespace

int main(int argc, char** argv) {
  int round_trips = 20000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: bench_loopback [--round-trips N]\n"
          "  Times one byte there and back over TCP on 127.0.0.1 (TCP_NODELAY), N times after a\n"
          "  warm-up (default 20000), and prints the median and 10th percentile in "
          "microseconds.\n");
      return 0;
    }
    if (arg == "--round-trips" && i + 1 < argc) {
      round_trips = std::atoi(argv[++i]);
      if (round_trips < 100 || round_trips > 10000000) {
        std::fprintf(stderr, "bench_loopback: --round-trips must be 100..10000000\n");
        return 2;
      }
      continue;
    }
    std::fprintf(stderr, "bench_loopback: unknown argument '%s' (--help)\n", arg.c_str());
    return 2;
  }
  try {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    check(listener >= 0, "socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    check(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
    check(listen(listener, 1) == 0, "listen");
    socklen_t len = sizeof addr;
    check(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname");
    const pid_t child = fork();
    check(child >= 0, "fork");
    if (child == 0) {  // the echo side
      const int fd = accept(listener, nullptr, nullptr);
      if (fd < 0) _exit(1);
      set_options(fd);
      while (echo_once(fd)) {
      }
      _exit(0);
    }
    close(listener);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    check(fd >= 0, "socket");
    check(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "connect");
    set_options(fd);
    std::vector<double> us(static_cast<std::size_t>(round_trips));
    char byte = 'x';
    for (int i = -1000; i < round_trips; ++i) {  // the first 1000 are the warm-up
      const auto start = std::chrono::steady_clock::now();
      check(send(fd, &byte, 1, 0) == 1, "send");
      check(recv(fd, &byte, 1, 0) == 1, "recv (the echo process stopped answering)");
      if (i >= 0) {
        us[static_cast<std::size_t>(i)] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count();
      }
    }
    close(fd);
    waitpid(child, nullptr, 0);
    std::sort(us.begin(), us.end());
    std::printf("loopback_rtt_us: median %.2f p10 %.2f (%d round trips of 1 byte)\n",
                us[us.size() / 2], us[us.size() / 10], round_trips);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_loopback: error: %s\n", e.what());
    return 1;
  }
}
