// The TCP store's server: see tcp_store_server.h.
#include "store/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "dist/check.h"
#include "util/worker_signals.h"

namespace dist {

using net::Clock;
using net::Deadline;
using wire::Op;
using wire::Status;

namespace {

constexpr std::size_t kMaxClients = 4096;
constexpr std::size_t kReadChunk = 64 * 1024;
// Replies waiting to be sent to one client. Past this the server stops reading that client's
// requests until it has caught up, so a client that sends without reading cannot make the
// server buffer without end.
constexpr std::size_t kOutputHighWater = 1 << 20;
// Before the handshake a connection may send only a small hello (wire::kMaxHelloBytes), and must
// send it in time: idle strangers would otherwise hold connection slots for ever.
constexpr auto kHelloDeadline = std::chrono::seconds(10);
// After accept() fails for lack of file descriptors, pause accepting for this long instead of
// spinning on a listener that stays readable.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

std::string reply(Status status, std::initializer_list<std::string_view> fields = {}) {
  wire::Writer w(static_cast<std::uint8_t>(status));
  for (auto f : fields) w.field(f);
  return w.finish();
}

}  // namespace

TCPStore::Server::Server(const std::string& host, int port, std::uint64_t session,
                         std::string token)
    : listener_(net::listen_on(host, port)),
      session_(wire::encode_u64(session)),
      token_(std::move(token)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("pipe2() failed");
  wake_read_ = net::Fd(fds[0]);
  wake_write_ = net::Fd(fds[1]);
  port_ = net::local_port(listener_.get());
  const util::WorkerSignals quiet;  // the thread leaves SIGTERM and SIGUSR1 to the program
  thread_ = std::thread([this] { loop(); });
}

TCPStore::Server::~Server() {
  stop_ = true;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &byte, 1);
  thread_.join();
}

void TCPStore::Server::wait_for_clients_to_leave(Deadline deadline, int at_least) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return joined_clients_ == 0 && ever_joined_ >= at_least; });
}

void TCPStore::Server::loop() {
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    // A negative descriptor is ignored by poll(): that is how accepting pauses.
    fds.push_back({Clock::now() >= accept_paused_until_ ? listener_.get() : -1, POLLIN, 0});
    for (auto& c : conns_) {
      short ev = 0;
      if (!c.closing && c.pending_out() < kOutputHighWater) ev |= POLLIN;
      if (c.pending_out() > 0) ev |= POLLOUT;
      fds.push_back({c.fd.get(), ev, 0});
    }
    if (::poll(fds.data(), fds.size(), ms_until_next_timer()) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) accept_one();
    auto it = conns_.begin();
    for (std::size_t i = 2; i < fds.size() && it != conns_.end(); ++i) {
      Conn& c = *it;
      const short rev = fds[i].revents;
      // POLLHUP: the peer closed both directions, so nothing more can be read or delivered.
      bool alive = !(rev & (POLLERR | POLLNVAL | POLLHUP));
      if (alive && (rev & POLLIN)) alive = read_from(c);
      if (alive && (rev & POLLOUT)) alive = write_to(c);
      if (alive && c.closing && c.pending_out() == 0) alive = false;
      it = alive ? std::next(it) : drop(it);
    }
    expire_timers();
  }
}

// How long poll() may sleep: until the next parked request, hello or accept pause expires.
int TCPStore::Server::ms_until_next_timer() const {
  std::optional<Deadline> first;
  auto consider = [&](Deadline d) {
    if (!first || d < *first) first = d;
  };
  for (const auto& c : conns_) {
    if (c.parked) consider(c.parked_until);
    if (!c.joined) consider(c.hello_by);
  }
  if (accept_paused_until_ > Clock::now()) consider(accept_paused_until_);
  if (!first) return -1;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*first - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

// Answers parked requests whose time is up, and closes connections that never said hello.
void TCPStore::Server::expire_timers() {
  const auto now = Clock::now();
  for (auto it = conns_.begin(); it != conns_.end();) {
    Conn& c = *it;
    if (!c.joined && c.hello_by <= now) {
      it = drop(it);
      continue;
    }
    if (c.parked && c.parked_until <= now) {
      c.parked.reset();
      c.out += reply(Status::kTimeout);
      if (!write_to(c)) c.closing = true;
    }
    ++it;
  }
}

void TCPStore::Server::accept_one() {
  net::Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd.valid()) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      accept_paused_until_ = Clock::now() + kAcceptBackoff;
    }
    return;
  }
  if (conns_.size() >= kMaxClients) return;  // over the limit: closed at once
  Conn c;
  c.fd = std::move(fd);
  c.hello_by = Clock::now() + kHelloDeadline;
  conns_.push_back(std::move(c));
}

std::list<TCPStore::Server::Conn>::iterator TCPStore::Server::drop(std::list<Conn>::iterator it) {
  if (it->joined) {
    std::lock_guard lock(mu_);
    --joined_clients_;
    cv_.notify_all();
  }
  return conns_.erase(it);
}

bool TCPStore::Server::read_from(Conn& c) {
  char buf[kReadChunk];
  const ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c.in.append(buf, static_cast<std::size_t>(n));
  if (!handle_frames(c)) c.closing = true;  // flush the error reply, then close
  return true;
}

bool TCPStore::Server::write_to(Conn& c) {
  while (c.pending_out() > 0) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.pending_out(), MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out_sent += static_cast<std::size_t>(n);
  }
  c.out.clear();
  c.out_sent = 0;
  // Requests that arrived while replies were backed up can be served now.
  if (!handle_frames(c)) c.closing = true;
  return true;
}

// Handles the complete frames in c.in, until a request parks or replies back up. False when
// the client broke the protocol: an error reply has been queued, and the caller closes the
// connection once it is sent.
bool TCPStore::Server::handle_frames(Conn& c) {
  while (!c.closing && !c.parked && c.pending_out() < kOutputHighWater && c.in.size() >= 4) {
    const std::uint32_t len = wire::read_u32(c.in.data());
    const std::uint32_t limit = c.joined ? wire::kMaxFrameBytes : wire::kMaxHelloBytes;
    if (len > limit) {
      c.out += reply(Status::kError, {"frame of " + std::to_string(len) + " bytes is over the " +
                                      std::to_string(limit) + "-byte limit"});
      return false;
    }
    if (c.in.size() < 4 + static_cast<std::size_t>(len)) return true;
    auto msg = wire::parse_payload(std::string_view(c.in).substr(4, len));
    c.in.erase(0, 4 + static_cast<std::size_t>(len));
    if (!msg) {
      c.out += reply(Status::kError, {"malformed frame"});
      return false;
    }
    if (!(c.joined ? handle(c, *msg) : handle_hello(c, *msg))) return false;
  }
  return true;
}

bool TCPStore::Server::handle_hello(Conn& c, const wire::Message& m) {
  if (m.head != static_cast<std::uint8_t>(Op::kHello) || m.fields.size() != 3 ||
      m.fields[0] != wire::kMagic) {
    c.out += reply(Status::kError, {"not a dist store client"});
    return false;
  }
  if (!token_.empty() && !same_token(m.fields[2])) {
    c.out += reply(Status::kWrongToken, {"this store asks for another DIST_STORE_TOKEN"});
    c.closing = true;
    return true;
  }
  if (m.fields[1] != session_) {
    c.out += reply(Status::kWrongSession, {"this store serves another generation of the job"});
    c.closing = true;
    return true;
  }
  c.joined = true;
  {
    std::lock_guard lock(mu_);
    ++joined_clients_;
    ++ever_joined_;
  }
  c.out += reply(Status::kOk);
  return true;
}

// Compares every byte whatever the first difference, so the time taken says nothing about how
// much of a guessed token was right.
bool TCPStore::Server::same_token(const std::string& theirs) const {
  unsigned char diff = theirs.size() == token_.size() ? 0 : 1;
  for (std::size_t i = 0; i < token_.size(); ++i) {
    diff |= static_cast<unsigned char>(token_[i] ^ (i < theirs.size() ? theirs[i] : 0));
  }
  return diff == 0;
}

bool TCPStore::Server::has_all(const std::vector<std::string>& keys, std::size_t from) const {
  for (std::size_t i = from; i < keys.size(); ++i) {
    if (!data_.count(keys[i])) return false;
  }
  return true;
}

// Executes one request. A get/wait on missing keys is parked instead of answered.
bool TCPStore::Server::handle(Conn& c, const wire::Message& m) {
  const auto& f = m.fields;
  auto bad = [&] {
    c.out += reply(Status::kError, {"bad request"});
    return false;
  };
  // get and wait carry their timeout in milliseconds first, then the keys.
  const bool waits = m.head == static_cast<std::uint8_t>(Op::kGet) ||
                     m.head == static_cast<std::uint8_t>(Op::kWait);
  const bool all_fields_are_keys = waits || m.head == static_cast<std::uint8_t>(Op::kCheck);
  for (std::size_t i = waits ? 1 : 0; i < f.size() && (i == 0 || all_fields_are_keys); ++i) {
    if (f[i].size() > kMaxStoreKeyBytes) return bad();
  }
  switch (static_cast<Op>(m.head)) {
    case Op::kSet:
      if (f.size() != 2) return bad();
      data_[f[0]] = f[1];
      c.out += reply(Status::kOk);
      wake_parked();
      return true;
    case Op::kGet:
    case Op::kWait: {
      std::int64_t timeout_ms = 0;
      if (f.size() < 2 || (m.head == static_cast<std::uint8_t>(Op::kGet) && f.size() != 2) ||
          !wire::parse_i64(f[0], timeout_ms) || timeout_ms < 0 ||
          timeout_ms > kMaxTimeout.count()) {
        return bad();
      }
      if (has_all(f, 1)) {
        answer_ready(c, m);
      } else {
        c.parked = m;
        c.parked_until = Clock::now() + std::chrono::milliseconds(timeout_ms);
      }
      return true;
    }
    case Op::kAdd: {
      std::int64_t delta = 0, current = 0;
      if (f.size() != 2 || !wire::parse_i64(f[1], delta)) return bad();
      auto it = data_.find(f[0]);
      if (it != data_.end() && !wire::parse_i64(it->second, current)) {
        c.out += reply(Status::kError, {"key \"" + f[0] + "\" does not hold an integer"});
        return true;
      }
      const std::string next = std::to_string(static_cast<std::int64_t>(
          static_cast<std::uint64_t>(current) + static_cast<std::uint64_t>(delta)));
      data_[f[0]] = next;
      c.out += reply(Status::kOk, {next});
      wake_parked();
      return true;
    }
    case Op::kCompareSet: {
      if (f.size() != 3) return bad();
      auto it = data_.find(f[0]);
      if (it == data_.end()) {
        if (f[1].empty()) {
          data_[f[0]] = f[2];
          c.out += reply(Status::kOk, {f[2]});
          wake_parked();
        } else {
          c.out += reply(Status::kOk, {f[1]});  // torch returns `expected` for a missing key
        }
      } else if (it->second == f[1]) {
        it->second = f[2];
        c.out += reply(Status::kOk, {f[2]});
        wake_parked();
      } else {
        c.out += reply(Status::kOk, {it->second});
      }
      return true;
    }
    case Op::kCheck:
      c.out += reply(Status::kOk, {has_all(f, 0) ? "1" : "0"});
      return true;
    case Op::kDelete:
      if (f.size() != 1) return bad();
      c.out += reply(Status::kOk, {data_.erase(f[0]) ? "1" : "0"});
      return true;
    case Op::kNumKeys:
      c.out += reply(Status::kOk, {std::to_string(data_.size())});
      return true;
    case Op::kHello:
      break;
  }
  return bad();
}

void TCPStore::Server::answer_ready(Conn& c, const wire::Message& m) {
  if (m.head == static_cast<std::uint8_t>(Op::kGet)) {
    c.out += reply(Status::kOk, {data_.at(m.fields[1])});
  } else {
    c.out += reply(Status::kOk);
  }
}

void TCPStore::Server::wake_parked() {
  for (auto& c : conns_) {
    if (c.parked && has_all(c.parked->fields, 1)) {
      answer_ready(c, *c.parked);
      c.parked.reset();
      if (!write_to(c)) c.closing = true;
    }
  }
}

}  // namespace dist
