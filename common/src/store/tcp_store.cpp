// TCPStore (dist/store.h): a key-value server in a background thread of rank 0
// (tcp_store_server.h), and a blocking client with deadlines in every rank.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/net.h"
#include "dist/check.h"
#include "dist/store.h"
#include "store/tcp_store_server.h"
#include "store/wire.h"

namespace dist {

using net::Clock;
using net::Deadline;
using wire::Op;
using wire::Status;

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
    const std::uint32_t len = wire::read_u32(prefix);
    if (len > wire::kMaxFrameBytes) return std::nullopt;
    std::string payload(len, '\0');
    if (!net::recv_all(fd_.get(), payload.data(), len, deadline)) return std::nullopt;
    return wire::parse_payload(payload);
  }

  // Connects and says hello, retrying while the server is not up yet (or still serving the
  // previous generation) until `deadline`. This is the one back-off left in a job's start: a
  // refused connection gives nothing to wait on, so the retry pauses 1, 2, 4 ... ms (at most
  // 200). ddprun starts rank 0 first, so the other ranks rarely arrive before its store listens;
  // when they do (a loaded machine), a refused connect on loopback costs microseconds, so the
  // first retries come soon (bench/README.md, "A job's whole life").
  void connect(Deadline deadline) {
    auto pause = std::chrono::milliseconds(1);
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
      const std::uint32_t len = wire::read_u32(prefix);
      if (len == 0 || len > wire::kMaxHelloBytes) throw ConfigError(stranger);
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
  DIST_CHECK(r.size() == 1 && wire::parse_i64(r[0], v), "the store sent a malformed reply");
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
  DIST_CHECK(r.size() == 1 && wire::parse_i64(r[0], v), "the store sent a malformed reply");
  return v;
}

}  // namespace dist
