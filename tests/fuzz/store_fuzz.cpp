// libFuzzer target: the TCP store's server against arbitrary bytes (tests/fuzz/README.md).
//
// Each input goes to a live server twice, over fresh connections: as the very first bytes (where
// a hello belongs) and after a valid hello (where requests belong). The server must not crash,
// leak or read out of bounds (the target is built with AddressSanitizer), and it must go on
// serving: after every input a real client sets a key and reads it back. The input is also
// parsed as a frame payload; whatever parses must re-encode to a payload that parses the same.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "dist/store.h"
#include "store/wire.h"

namespace {

dist::TCPStore* server() {
  static std::unique_ptr<dist::TCPStore> store = [] {
    dist::TCPStore::Options o;
    o.port = 0;  // a free one
    o.is_server = true;
    o.session = 7;
    return std::make_unique<dist::TCPStore>(o);
  }();
  return store.get();
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc;
  do {  // libFuzzer's timer (-timeout) interrupts system calls with SIGALRM
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    std::perror("store_fuzz: connect to the store");
    std::abort();
  }
  timeval tv{5, 0};  // a server that neither answers nor closes within 5 s is a hang: abort
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  // Close with a reset, not TIME_WAIT: thousands of connections a second would otherwise use up
  // the ephemeral ports within seconds, and connecting would then stall, not the server.
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  return fd;
}

// Sends the bytes, says "no more", and reads until the server closes the connection.
void feed(int port, std::string_view before, std::string_view input) {
  const int fd = connect_to(port);
  const std::string bytes = std::string(before) + std::string(input);
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // the server closed early (a bad hello, an oversized frame): fine
    sent += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;  // closed: the server is done with us
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {  // 5 s without a byte or a close
      std::perror("store_fuzz: the store neither answered nor closed");
      std::abort();
    }
  }
  ::close(fd);
}

void check_round_trip(std::string_view payload) {
  const auto parsed = dist::wire::parse_payload(payload);
  if (!parsed) return;
  dist::wire::Writer w(parsed->head);
  for (const std::string& f : parsed->fields) w.field(f);
  const std::string frame = w.finish();
  const auto again = dist::wire::parse_payload(std::string_view(frame).substr(4));
  if (!again || again->head != parsed->head || again->fields != parsed->fields) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_round_trip(input);
  dist::TCPStore* store = server();
  const std::string hello = dist::wire::Writer(static_cast<std::uint8_t>(dist::wire::Op::kHello))
                                .field(dist::wire::kMagic)
                                .field(dist::wire::encode_u64(7))
                                .field("")
                                .finish();
  feed(store->port(), "", input);
  feed(store->port(), hello, input);
  const std::string mark(input.substr(0, 16));
  store->set("alive", mark);
  if (store->get("alive") != mark) std::abort();
  return 0;
}
