// TCPStore (dist/store.h): a key-value server in a background thread of rank 0, and a blocking
// client with deadlines in every rank.
//
// The server is a single poll() loop: no thread per client, so a thousand idle connections cost
// nothing, and a client that vanishes only closes its own socket. `get` and `wait` on missing keys
// are parked on the server and answered when a later `set`/`add`/`compare_set` creates the keys;
// the client enforces its own deadline and drops the connection when it passes.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "dist/check.h"
#include "dist/store.h"
#include "net.h"
#include "store/wire.h"

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
// Before the handshake a connection may send only a small hello, and must send it in time:
// idle strangers would otherwise hold connection slots for ever.
constexpr std::uint32_t kMaxHelloBytes = 4096;
constexpr auto kHelloDeadline = std::chrono::seconds(10);
// After accept() fails for lack of file descriptors, pause accepting for this long instead of
// spinning on a listener that stays readable.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

std::string reply(Status status, std::initializer_list<std::string_view> fields = {}) {
  wire::Writer w(static_cast<std::uint8_t>(status));
  for (auto f : fields) w.field(f);
  return w.finish();
}

bool parse_i64(const std::string& text, std::int64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------
class TCPStore::Server {
 public:
  Server(const std::string& host, int port, std::uint64_t session, std::string token)
      : listener_(net::listen_on(host, port)),
        session_(wire::encode_u64(session)),
        token_(std::move(token)) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("pipe2() failed");
    wake_read_ = net::Fd(fds[0]);
    wake_write_ = net::Fd(fds[1]);
    port_ = net::local_port(listener_.get());
    thread_ = std::thread([this] { loop(); });
  }

  ~Server() {
    stop_ = true;
    const char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &byte, 1);
    thread_.join();
  }

  int port() const { return port_; }

  void wait_for_clients_to_leave(Deadline deadline, int at_least) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline,
                   [&] { return joined_clients_ == 0 && ever_joined_ >= at_least; });
  }

 private:
  struct Conn {
    net::Fd fd;
    std::string in;
    std::string out;
    std::size_t out_sent = 0;             // bytes of `out` already sent
    bool joined = false;                  // passed the hello handshake...
    Deadline hello_by{};                  // ...which it must do by then
    bool closing = false;                 // close once `out` is flushed
    std::optional<wire::Message> parked;  // a get/wait waiting for keys...
    Deadline parked_until{};              // ...until this moment, then it gets kTimeout
    std::size_t pending_out() const { return out.size() - out_sent; }
  };

  void loop() {
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
  int ms_until_next_timer() const {
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
  void expire_timers() {
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

  void accept_one() {
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

  std::list<Conn>::iterator drop(std::list<Conn>::iterator it) {
    if (it->joined) {
      std::lock_guard lock(mu_);
      --joined_clients_;
      cv_.notify_all();
    }
    return conns_.erase(it);
  }

  bool read_from(Conn& c) {
    char buf[kReadChunk];
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.in.append(buf, static_cast<std::size_t>(n));
    if (!handle_frames(c)) c.closing = true;  // flush the error reply, then close
    return true;
  }

  bool write_to(Conn& c) {
    while (c.pending_out() > 0) {
      const ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.out_sent, c.pending_out(), MSG_NOSIGNAL);
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
  bool handle_frames(Conn& c) {
    while (!c.closing && !c.parked && c.pending_out() < kOutputHighWater && c.in.size() >= 4) {
      const std::uint32_t len = wire::read_length(c.in.data());
      const std::uint32_t limit = c.joined ? wire::kMaxFrameBytes : kMaxHelloBytes;
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

  bool handle_hello(Conn& c, const wire::Message& m) {
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
  bool same_token(const std::string& theirs) const {
    unsigned char diff = theirs.size() == token_.size() ? 0 : 1;
    for (std::size_t i = 0; i < token_.size(); ++i) {
      diff |= static_cast<unsigned char>(token_[i] ^ (i < theirs.size() ? theirs[i] : 0));
    }
    return diff == 0;
  }

  bool has_all(const std::vector<std::string>& keys, std::size_t from) const {
    for (std::size_t i = from; i < keys.size(); ++i) {
      if (!data_.count(keys[i])) return false;
    }
    return true;
  }

  // Executes one request. A get/wait on missing keys is parked instead of answered.
  bool handle(Conn& c, const wire::Message& m) {
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
            !parse_i64(f[0], timeout_ms) || timeout_ms < 0 || timeout_ms > kMaxTimeout.count()) {
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
        if (f.size() != 2 || !parse_i64(f[1], delta)) return bad();
        auto it = data_.find(f[0]);
        if (it != data_.end() && !parse_i64(it->second, current)) {
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

  void answer_ready(Conn& c, const wire::Message& m) {
    if (m.head == static_cast<std::uint8_t>(Op::kGet)) {
      c.out += reply(Status::kOk, {data_.at(m.fields[1])});
    } else {
      c.out += reply(Status::kOk);
    }
  }

  void wake_parked() {
    for (auto& c : conns_) {
      if (c.parked && has_all(c.parked->fields, 1)) {
        answer_ready(c, *c.parked);
        c.parked.reset();
        if (!write_to(c)) c.closing = true;
      }
    }
  }

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
  Deadline accept_paused_until_{};
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------
class TCPStore::Client {
 public:
  Client(const Options& o, int port)
      : host_(o.host),
        port_(port),
        session_(o.session),
        token_(o.token),
        addresses_(net::resolve_tcp(host_, port_)) {
    connect(Clock::now() + o.timeout);
  }

  // Sends one request and returns the reply's fields. Throws on error replies, lost
  // connections and the deadline.
  std::vector<std::string> call(Op op, const std::vector<std::string>& fields, Deadline deadline,
                                const std::string& what) {
    std::lock_guard lock(mu_);
    if (!fd_.valid()) connect(deadline);
    wire::Writer w(static_cast<std::uint8_t>(op));
    for (const auto& field : fields) w.field(field);
    const std::string frame = w.finish();
    std::optional<wire::Message> m;
    try {
      if (!net::send_all(fd_.get(), frame.data(), frame.size(), deadline)) lost(what);
      m = read_reply(deadline);
    } catch (const TimeoutError&) {
      // No reply at all: the socket is in an unknown state, and a late reply would be mistaken
      // for the next one. Start over on a new connection next time.
      fd_.reset();
      throw TimeoutError("store at " + address() + ": no reply to " + what + " before the timeout");
    }
    if (!m) lost(what);
    // The server answers a get/wait that outlived its own timeout; the connection stays usable.
    if (m->head == static_cast<std::uint8_t>(Status::kTimeout)) {
      throw TimeoutError("store at " + address() + ": " + what + " timed out");
    }
    if (m->head != static_cast<std::uint8_t>(Status::kOk)) {
      fd_.reset();  // the server may close after an error reply; the next call reconnects
      throw Error("store at " + address() + " refused " + what + ": " +
                  (m->fields.empty() ? std::string("no reason given") : m->fields[0]));
    }
    return std::move(m->fields);
  }

  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  [[noreturn]] void lost(const std::string& what) {
    fd_.reset();
    throw Error("lost the connection to the store at " + address() + " during " + what +
                ": the process hosting it (rank 0) has exited or crashed");
  }

  std::optional<wire::Message> read_reply(Deadline deadline) {
    char prefix[4];
    if (!net::recv_all(fd_.get(), prefix, 4, deadline)) return std::nullopt;
    const std::uint32_t len = wire::read_length(prefix);
    if (len > wire::kMaxFrameBytes) return std::nullopt;
    std::string payload(len, '\0');
    if (!net::recv_all(fd_.get(), payload.data(), len, deadline)) return std::nullopt;
    return wire::parse_payload(payload);
  }

  // Connects and says hello, retrying while the server is not up yet (or still serving the
  // previous generation) until `deadline`.
  void connect(Deadline deadline) {
    auto pause = std::chrono::milliseconds(5);
    for (;;) {
      fd_ = net::try_connect(addresses_, deadline);
      if (fd_.valid() && hello(deadline)) return;
      fd_.reset();
      if (Clock::now() + pause >= deadline) {
        if (turned_away_) {
          throw TimeoutError("the store at " + address() +
                             " kept serving another generation of this job until the timeout: "
                             "every rank must call init_process_group and destroy_process_group "
                             "the same number of times");
        }
        throw TimeoutError("could not reach the store at " + address() +
                           " before the timeout: rank 0 has not started, or is not listening "
                           "there (check MASTER_ADDR and MASTER_PORT on every rank)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }

  // True when the server let us in; false when it asked us to come back (another generation)
  // or closed the connection unanswered (it is shutting down): the caller retries. Anything
  // else is not our store, and retrying would not help.
  bool hello(Deadline deadline) {
    const std::string frame = wire::Writer(static_cast<std::uint8_t>(Op::kHello))
                                  .field(wire::kMagic)
                                  .field(wire::encode_u64(session_))
                                  .field(token_)
                                  .finish();
    // A foreign server may never answer; do not let it eat the whole deadline.
    const Deadline hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    const std::string stranger = "something is listening at " + address() +
                                 ", but it is not this job's store: another program owns that "
                                 "port; pick a free MASTER_PORT";
    try {
      char prefix[4];
      if (!net::send_all(fd_.get(), frame.data(), frame.size(), hello_deadline) ||
          !net::recv_all(fd_.get(), prefix, 4, hello_deadline)) {
        return false;
      }
      const std::uint32_t len = wire::read_length(prefix);
      if (len == 0 || len > 4096) throw ConfigError(stranger);
      std::string payload(len, '\0');
      if (!net::recv_all(fd_.get(), payload.data(), len, hello_deadline)) return false;
      const auto m = wire::parse_payload(payload);
      if (!m) throw ConfigError(stranger);
      if (m->head == static_cast<std::uint8_t>(Status::kOk)) return true;
      if (m->head == static_cast<std::uint8_t>(Status::kWrongSession)) {
        turned_away_ = true;
        return false;
      }
      if (m->head == static_cast<std::uint8_t>(Status::kWrongToken)) {
        throw ConfigError("the store at " + address() + " turned this process away: " +
                          (token_.empty()
                               ? "it asks for a DIST_STORE_TOKEN and this process has none"
                               : "its DIST_STORE_TOKEN is not this process's") +
                          ". Every rank of a job needs the same DIST_STORE_TOKEN: ddprun sets one "
                          "for a job on one machine; on several, export the same value on each");
      }
      throw ConfigError(stranger);
    } catch (const TimeoutError&) {
      throw ConfigError(stranger + " (it did not answer the handshake)");
    }
  }

  std::string host_;
  int port_;
  std::uint64_t session_;
  std::string token_;
  std::vector<net::Address> addresses_;
  bool turned_away_ = false;  // the last hello met a server of another generation
  std::mutex mu_;
  net::Fd fd_;
};

// ---------------------------------------------------------------------------------------------
// TCPStore
// ---------------------------------------------------------------------------------------------
TCPStore::TCPStore(const Options& options) : Store(options.timeout), options_(options) {
  if (options.token.size() > kMaxStoreTokenBytes) {
    throw ConfigError("DIST_STORE_TOKEN is " + std::to_string(options.token.size()) +
                      " bytes long; it may be at most " + std::to_string(kMaxStoreTokenBytes));
  }
  if (options.is_server)
    server_ = std::make_unique<Server>(options.host, options.port, options.session, options.token);
  client_ = std::make_unique<Client>(options_, port());
}

TCPStore::~TCPStore() {
  client_.reset();
  server_.reset();
}

int TCPStore::port() const {
  return server_ ? server_->port() : options_.port;
}

void TCPStore::wait_for_clients_to_leave(std::chrono::steady_clock::time_point deadline,
                                         int at_least) {
  client_.reset();  // our own connection counts as a client too
  if (server_) server_->wait_for_clients_to_leave(deadline, at_least);
}

namespace {
Deadline deadline_after(Millis timeout) {
  return Clock::now() + timeout;
}
// get and wait are timed by the server, which answers kTimeout; the client waits a little
// longer, so that only a server that stopped answering altogether trips the client's deadline.
constexpr auto kServerTimedGrace = std::chrono::seconds(5);
// A key for messages: quoted, and cut short if it is long.
std::string quoted(const std::string& key) {
  constexpr std::size_t kShown = 80;
  return "\"" + (key.size() <= kShown ? key : key.substr(0, kShown) + "...") + "\"";
}

}  // namespace

void TCPStore::set(const std::string& key, const std::string& value) {
  check_key(key);
  check_value(value);
  client_->call(Op::kSet, {key, value}, deadline_after(timeout_), "set(" + quoted(key) + ")");
}

std::string TCPStore::get(const std::string& key) {
  check_key(key);
  auto r = client_->call(Op::kGet, {std::to_string(timeout_.count()), key},
                         deadline_after(timeout_ + kServerTimedGrace), "get(" + quoted(key) + ")");
  DIST_CHECK(r.size() == 1, "the store sent a malformed reply");
  return r[0];
}

std::int64_t TCPStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  auto r = client_->call(Op::kAdd, {key, std::to_string(delta)}, deadline_after(timeout_),
                         "add(" + quoted(key) + ")");
  std::int64_t v = 0;
  DIST_CHECK(r.size() == 1 && parse_i64(r[0], v), "the store sent a malformed reply");
  return v;
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  check_key(key);
  check_value(desired);
  auto r = client_->call(Op::kCompareSet, {key, expected, desired}, deadline_after(timeout_),
                         "compare_set(" + quoted(key) + ")");
  DIST_CHECK(r.size() == 1, "the store sent a malformed reply");
  return r[0];
}

void TCPStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  if (keys.empty()) return;
  for (const auto& k : keys) check_key(k);
  timeout = checked_timeout(timeout);
  std::string what = "wait for";
  for (const auto& k : keys) what += " " + quoted(k);
  std::vector<std::string> fields{std::to_string(timeout.count())};
  fields.insert(fields.end(), keys.begin(), keys.end());
  client_->call(Op::kWait, fields, deadline_after(timeout + kServerTimedGrace), what);
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  for (const auto& k : keys) check_key(k);
  auto r = client_->call(Op::kCheck, keys, deadline_after(timeout_), "check");
  return r.size() == 1 && r[0] == "1";
}

bool TCPStore::delete_key(const std::string& key) {
  check_key(key);
  auto r = client_->call(Op::kDelete, {key}, deadline_after(timeout_),
                         "delete_key(" + quoted(key) + ")");
  return r.size() == 1 && r[0] == "1";
}

std::int64_t TCPStore::num_keys() {
  auto r = client_->call(Op::kNumKeys, {}, deadline_after(timeout_), "num_keys");
  std::int64_t v = 0;
  DIST_CHECK(r.size() == 1 && parse_i64(r[0], v), "the store sent a malformed reply");
  return v;
}

}  // namespace dist
