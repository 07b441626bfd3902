// The agents' rendezvous (agents.h): node 0's server and every node's client.
//
// One message per line, fields separated by spaces, free text last. The server is one thread
// sleeping in poll() until a node writes, connects or leaves, or a deadline passes; it never
// polls on a timer. Every wait on either side has a deadline, and every message that ends a
// job names the node that caused it.
#include "agents.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <utility>
#include <vector>

#include "report.h"

namespace ddprun {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxLine = 4096;  // a longer line is not from a ddprun: the peer is dropped
constexpr auto kHelloWithin = std::chrono::seconds(5);  // a connection must say hello by then

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string seconds_text(double s) {
  std::ostringstream text;
  text << s << " s";
  return text.str();
}

// Milliseconds from now until `until`, for poll(): 0 when it has passed, -1 without one.
int poll_ms(std::optional<Clock::time_point> until) {
  if (!until) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 1'000'000'000));
}

// One whole line out. MSG_NOSIGNAL: a peer that left is an EPIPE here, not a SIGPIPE.
bool send_line(int fd, const std::string& line) {
  const std::string data = line + "\n";
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Moves the complete lines at the front of `buffer` into `lines`. False: a line is too long.
bool take_lines(std::string& buffer, std::vector<std::string>& lines) {
  std::size_t newline;
  while ((newline = buffer.find('\n')) != std::string::npos) {
    lines.push_back(buffer.substr(0, newline));
    buffer.erase(0, newline + 1);
  }
  return buffer.size() <= kMaxLine;
}

// The first `count` space-separated words of `line`, then the rest (possibly empty).
std::vector<std::string> words(const std::string& line, int count) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (int i = 0; i < count; ++i) {
    const std::size_t space = line.find(' ', at);
    out.push_back(line.substr(at, space == std::string::npos ? std::string::npos : space - at));
    at = space == std::string::npos ? line.size() : space + 1;
  }
  out.push_back(line.substr(std::min(at, line.size())));
  return out;
}

std::optional<int> number(const std::string& text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// Compares without stopping at the first difference, so that the time taken says nothing
// about how much of a guessed token was right.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string node_list(const std::vector<int>& nodes) {
  std::string text = nodes.size() == 1 ? "node " : "nodes ";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(nodes[i]);
  }
  return text;
}

// The token travels as hex, so that any bytes in DIST_STORE_TOKEN (spaces too) fit in one word.
std::string hex(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "x";  // never empty, even for an empty token
  for (const unsigned char c : text) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

// ---- The server ------------------------------------------------------------------------------

struct AgentServer::State {
  struct Peer {
    int fd = -1;
    int node = -1;  // -1 until its hello is accepted
    std::string in;
    Clock::time_point hello_by;
  };
  enum class Phase { kJoining, kRunning, kOver };

  AgentSettings settings;
  std::vector<Peer> peers;
  std::vector<bool> connected, joined, done;
  std::vector<Clock::time_point> last_heard;  // per node: its last line (a ping at least)
  int round = 0;
  Phase phase = Phase::kJoining;
  std::optional<Clock::time_point> join_deadline;
  std::optional<Clock::time_point> exit_deadline;
  int first_done = -1;

  void to_every_node(const std::string& line) {
    for (Peer& p : peers) {
      if (p.node >= 0) send_line(p.fd, line);
    }
  }

  void abort(int code, const std::string& why) {
    phase = Phase::kOver;
    join_deadline.reset();
    exit_deadline.reset();
    to_every_node("abort " + std::to_string(code) + " " + why);
  }

  // A node's ranks failed in the current round (or its ddprun left): every node restarts, or,
  // with no restarts left, every node stops.
  void node_failed(int node, int code, const std::string& why) {
    // A machine whose ranks all exited 0 has ended its job (it waits in the exit barrier), and
    // does not start them again: the job cannot restart as a whole, so it ends.
    const std::vector<int> finished = nodes_with(done);
    if (!finished.empty()) {
      abort(code, "node " + std::to_string(node) + " failed in attempt " + std::to_string(round) +
                      " (" + why + ") after " + node_list(finished) +
                      " had finished; a finished machine does not start again");
      return;
    }
    if (round >= settings.max_restarts) {
      abort(code, "node " + std::to_string(node) + " failed in attempt " + std::to_string(round) +
                      " (" + why + ") and no restarts are left (--max-restarts " +
                      std::to_string(settings.max_restarts) + ")");
      return;
    }
    ++round;
    phase = Phase::kJoining;
    std::fill(joined.begin(), joined.end(), false);
    std::fill(done.begin(), done.end(), false);
    exit_deadline.reset();
    join_deadline = Clock::now() + seconds(settings.join_timeout_s);
    to_every_node("restart " + std::to_string(round) + " " + std::to_string(node) + " " + why);
  }

  std::vector<int> nodes_with(const std::vector<bool>& flags) const {
    std::vector<int> nodes;
    for (int n = 0; n < settings.nnodes; ++n) {
      if (flags[n]) nodes.push_back(n);
    }
    return nodes;
  }

  std::vector<int> nodes_without(const std::vector<bool>& flags) const {
    std::vector<int> nodes;
    for (int n = 0; n < settings.nnodes; ++n) {
      if (!flags[n]) nodes.push_back(n);
    }
    return nodes;
  }

  // A peer's first line must be a hello with the job's token; anything else closes it.
  void hello(Peer& p, const std::string& line) {
    const auto w = words(line, 5);
    const auto refuse = [&](const std::string& why) {
      send_line(p.fd, "refused " + why);
      close_fd(p.fd);
    };
    if (w[0] != "hello") return close_fd(p.fd);
    if (!same_token(w[1], hex(settings.token))) {
      return refuse("a wrong DIST_STORE_TOKEN: export the same token on every node");
    }
    const auto node = number(w[2]);
    const auto nnodes = number(w[3]);
    const auto max_restarts = number(w[4]);
    if (!node || !nnodes || !max_restarts) return refuse("a malformed hello");
    if (*nnodes != settings.nnodes || *max_restarts != settings.max_restarts) {
      return refuse("it runs with --nnodes " + w[3] + " --max-restarts " + w[4] +
                    ", node 0 with --nnodes " + std::to_string(settings.nnodes) +
                    " --max-restarts " + std::to_string(settings.max_restarts) +
                    ": give every node the same values");
    }
    if (*node >= settings.nnodes) return refuse("node rank " + w[2] + " is out of range");
    if (connected[*node]) {
      return refuse("node " + w[2] + " is already connected: give each node its own --node-rank");
    }
    if (phase == Phase::kOver) return refuse("the job is over");
    p.node = *node;
    connected[*node] = true;
    last_heard[*node] = Clock::now();
    send_line(p.fd, "welcome " + std::to_string(round));
  }

  void message(Peer& p, const std::string& line) {
    last_heard[p.node] = Clock::now();
    if (line.starts_with("stop ") && phase != Phase::kOver) {
      // Someone stopped that machine's ddprun (Ctrl-C): the job is over everywhere.
      const auto f = words(line.substr(5), 1);
      return abort(number(f[0]).value_or(1), "node " + std::to_string(p.node) + " " + f[1]);
    }
    const auto w = words(line, 2);
    const auto r = number(w[1]);
    if (!r || *r != round) return;  // news about an earlier round: that round is over already
    if (w[0] == "join" && phase == Phase::kJoining) {
      if (!join_deadline) join_deadline = Clock::now() + seconds(settings.join_timeout_s);
      joined[p.node] = true;
      if (nodes_without(joined).empty()) {
        phase = Phase::kRunning;
        join_deadline.reset();
        to_every_node("go " + std::to_string(round));
      }
    } else if (w[0] == "failed" && phase == Phase::kRunning) {
      const auto f = words(w[2], 1);
      node_failed(p.node, number(f[0]).value_or(1), f[1]);
    } else if (w[0] == "done" && phase == Phase::kRunning) {
      done[p.node] = true;
      if (first_done < 0 || !exit_deadline) first_done = p.node;
      if (!exit_deadline) exit_deadline = Clock::now() + seconds(settings.exit_barrier_timeout_s);
      if (nodes_without(done).empty()) {
        phase = Phase::kOver;
        exit_deadline.reset();
        to_every_node("finish");
      }
    }
  }

  // A node's connection closed: its ddprun exited or was killed, so its ranks are gone too.
  void left(Peer& p, const std::string& why =
                         "its ddprun left the rendezvous: it exited or was "
                         "killed") {
    const int node = p.node;
    close_fd(p.fd);
    if (node < 0) return;
    connected[node] = false;
    if (phase == Phase::kJoining) {
      joined[node] = false;  // if it does not come back, the join deadline names it
    } else if (phase == Phase::kRunning && !done[node]) {
      node_failed(node, 1, why);
    }
  }

  void check_deadlines() {
    const auto now = Clock::now();
    if (join_deadline && now >= *join_deadline) {
      const auto missing = nodes_without(joined);
      abort(1, node_list(missing) + " did not join attempt " + std::to_string(round) + " within " +
                   seconds_text(settings.join_timeout_s) +
                   " (--join-timeout): its ddprun is not running, or cannot reach node 0 at " +
                   settings.address + ":" + std::to_string(settings.port));
    }
    if (exit_deadline && now >= *exit_deadline) {
      const auto missing = nodes_without(done);
      abort(1, node_list(missing) + " did not finish within " +
                   seconds_text(settings.exit_barrier_timeout_s) + " of node " +
                   std::to_string(first_done) + " (--exit-barrier-timeout)");
    }
    for (Peer& p : peers) {
      if (p.node < 0 && p.fd >= 0 && now >= p.hello_by) close_fd(p.fd);
      if (p.node >= 0 && p.fd >= 0 && phase != Phase::kOver && now >= silent_after(p.node)) {
        left(p, "its ddprun sent nothing for " + seconds_text(3 * settings.heartbeat_s) +
                    " (3 x --monitor-interval): its machine is down or cannot reach node 0");
      }
    }
  }

  Clock::time_point silent_after(int node) const {
    return last_heard[node] + seconds(3 * settings.heartbeat_s);
  }

  std::optional<Clock::time_point> next_deadline() const {
    std::optional<Clock::time_point> next = join_deadline;
    if (exit_deadline && (!next || *exit_deadline < *next)) next = exit_deadline;
    for (const Peer& p : peers) {
      if (p.node < 0 && p.fd >= 0 && (!next || p.hello_by < *next)) next = p.hello_by;
      if (p.node >= 0 && p.fd >= 0 && phase != Phase::kOver &&
          (!next || silent_after(p.node) < *next)) {
        next = silent_after(p.node);
      }
    }
    return next;
  }
};

AgentServer::AgentServer(const AgentSettings& settings) : state_(std::make_unique<State>()) {
  state_->settings = settings;
  const auto n = static_cast<std::size_t>(settings.nnodes);
  state_->connected.assign(n, false);
  state_->joined.assign(n, false);
  state_->done.assign(n, false);
  state_->last_heard.assign(n, Clock::now());

  const auto fail = [&](const std::string& what) {
    const int err = errno;
    close_fd(listen_fd_);
    throw AgentError("cannot host the agents' rendezvous on port " + std::to_string(settings.port) +
                     ": " + what + ": " + std::strerror(err));
  };
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) fail("socket");
  const int yes = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);  // every interface, as the ranks' store listens
  addr.sin_port = htons(static_cast<uint16_t>(settings.port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind");
  if (::listen(listen_fd_, 64) != 0) fail("listen");
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  state_->settings.port = port_;
  if (::pipe2(wake_, O_CLOEXEC) != 0) fail("pipe");
  thread_ = std::thread([this] { loop(); });
}

AgentServer::~AgentServer() {
  const char byte = 0;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
  if (thread_.joinable()) thread_.join();
  for (State::Peer& p : state_->peers) close_fd(p.fd);
  close_fd(listen_fd_);
  close_fd(wake_[0]);
  close_fd(wake_[1]);
}

void AgentServer::loop() {
  State& s = *state_;
  while (true) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const State::Peer& p : s.peers) fds.push_back({p.fd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), poll_ms(s.next_deadline()));
    if (ready < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int yes = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
        const timeval send_limit{1, 0};  // a peer that stops reading cannot stall the others
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof send_limit);
        s.peers.push_back({fd, -1, "", Clock::now() + kHelloWithin});
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      State::Peer& p = s.peers[i - 2];
      if (p.fd < 0) continue;
      char chunk[1024];
      const ssize_t n = ::recv(p.fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s.left(p);
        continue;
      }
      p.in.append(chunk, static_cast<std::size_t>(n));
      std::vector<std::string> lines;
      if (!take_lines(p.in, lines)) {
        s.left(p);
        continue;
      }
      for (const std::string& line : lines) {
        if (p.fd < 0) break;
        if (p.node < 0) {
          s.hello(p, line);
        } else {
          s.message(p, line);
        }
      }
    }
    s.check_deadlines();
    std::erase_if(s.peers, [](const State::Peer& p) { return p.fd < 0; });
  }
}

// ---- The client ------------------------------------------------------------------------------

namespace {

// One attempt to connect to address:port, waiting at most `limit`. Returns the socket or -1
// (errno set).
int connect_once(const std::string& address, int port, Clock::duration limit) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    errno = EHOSTUNREACH;
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int result = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  if (fd < 0) return -1;
  if (result != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    const int ms =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(limit).count());
    if (::poll(&p, 1, std::max(ms, 1)) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      result = err == 0 ? 0 : -1;
    } else {
      errno = ETIMEDOUT;
    }
  }
  if (result != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  return fd;
}

}  // namespace

AgentClient::AgentClient(const AgentSettings& settings) : settings_(settings) {
  const std::string where =
      "node 0's ddprun at " + settings.address + ":" + std::to_string(settings.port);
  const auto until = Clock::now() + seconds(settings.connect_timeout_s);
  int last_errno = 0;
  while (fd_ < 0) {
    fd_ = connect_once(settings.address, settings.port,
                       std::min<Clock::duration>(until - Clock::now(), std::chrono::seconds(1)));
    if (fd_ >= 0) break;
    last_errno = errno;
    if (Clock::now() >= until) {
      throw AgentError("cannot reach " + where + " (the agents' rendezvous) within " +
                       seconds_text(settings.connect_timeout_s) + ": " + std::strerror(last_errno));
    }
    // Node 0 may not be listening yet: try again soon, but do not spin.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  send("hello " + hex(settings.token) + " " + std::to_string(settings.node_rank) + " " +
       std::to_string(settings.nnodes) + " " + std::to_string(settings.max_restarts));
  const auto reply = read_line(Clock::now() + std::chrono::seconds(10));
  if (!reply)
    throw AgentError(where + " did not answer node " + std::to_string(settings.node_rank) +
                     "'s hello");
  const auto w = words(*reply, 1);
  if (w[0] == "welcome" && number(w[1])) {
    round_ = *number(w[1]);
    return;
  }
  close_fd(fd_);
  if (w[0] == "refused")
    throw AgentError(where + " refused node " + std::to_string(settings.node_rank) + ": " + w[1]);
  throw AgentError(where + " closed the connection: it refused node " +
                   std::to_string(settings.node_rank) + " or is not a ddprun");
}

AgentClient::~AgentClient() {
  close_fd(fd_);
}

void AgentClient::send(const std::string& line) {
  const std::lock_guard<std::mutex> lock(send_mutex_);
  if (fd_ >= 0) send_line(fd_, line);  // a failed send shows as kLost on the next read
}

void AgentClient::close_connection() {
  const std::lock_guard<std::mutex> lock(send_mutex_);
  close_fd(fd_);
}

void AgentClient::join_round() {
  send("join " + std::to_string(round_));
}

AgentNews AgentClient::join() {
  join_round();
  // The server names a missing node at its own deadline; a little more here, for the message.
  const auto limit =
      std::chrono::duration_cast<std::chrono::milliseconds>(seconds(settings_.join_timeout_s + 10));
  while (true) {
    const auto news = next(limit);
    if (!news) {
      return {AgentNews::Kind::kLost, round_, 0, 1,
              "node 0's ddprun said nothing for " + seconds_text(settings_.join_timeout_s + 10) +
                  " while node " + std::to_string(settings_.node_rank) +
                  " waited to join attempt " + std::to_string(round_)};
    }
    if (news->kind == AgentNews::Kind::kGo && news->round != round_) continue;
    return *news;
  }
}

void AgentClient::report_failed(int code, const std::string& why) {
  send("failed " + std::to_string(round_) + " " + std::to_string(code) + " " + why);
}

void AgentClient::report_stopped(int code, const std::string& why) {
  send("stop " + std::to_string(code) + " " + why);
}

void AgentClient::report_done() {
  send("done " + std::to_string(round_));
}

std::optional<std::string> AgentClient::read_line(std::optional<Clock::time_point> until) {
  while (true) {
    const std::size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (fd_ < 0) return std::string();  // lost: an empty line
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_ms(until));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return std::nullopt;
    char chunk[1024];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || buffer_.size() > kMaxLine) {
      close_connection();
      return std::string();
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::optional<AgentNews> AgentClient::next(std::optional<std::chrono::milliseconds> timeout) {
  std::optional<Clock::time_point> until;
  if (timeout) until = Clock::now() + *timeout;
  const auto line = read_line(until);
  if (!line) return std::nullopt;
  AgentNews news;
  const auto w = words(*line, 2);
  if (w[0] == "go" && number(w[1])) {
    news.kind = AgentNews::Kind::kGo;
    news.round = *number(w[1]);
  } else if (w[0] == "restart" && number(w[1])) {
    const auto rest = words(w[2], 1);
    news.kind = AgentNews::Kind::kRestart;
    news.round = *number(w[1]);
    news.node = number(rest[0]).value_or(-1);
    news.text = rest[1];
    round_ = news.round;
  } else if (w[0] == "abort" && number(w[1])) {
    news.kind = AgentNews::Kind::kAbort;
    news.code = *number(w[1]);
    news.text = w[2];
  } else if (w[0] == "finish") {
    news.kind = AgentNews::Kind::kFinish;
  } else {
    close_connection();
    news.kind = AgentNews::Kind::kLost;
    news.code = 1;
    news.text = "lost the agents' rendezvous: node 0's ddprun at " + settings_.address + ":" +
                std::to_string(settings_.port) + " closed the connection (it exited or was killed)";
  }
  return news;
}

// ---- One machine's agents ---------------------------------------------------------------------

MachineAgents::MachineAgents(const AgentSettings& settings) : settings_(settings) {
  if (settings.node_rank == 0) server_ = std::make_unique<AgentServer>(settings);
  if (server_) settings_.port = server_->port();
  client_ = std::make_unique<AgentClient>(settings_);
  sigset_t stops;
  sigemptyset(&stops);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, signal);
  signal_fd_ = ::signalfd(-1, &stops, SFD_CLOEXEC);  // -1: the waits then see no signals
  pinger_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(pinger_mutex_);
    while (!pinger_wake_.wait_for(lock, seconds(settings_.heartbeat_s),
                                  [this] { return pinger_stop_; })) {
      client_->ping();
    }
  });
}

MachineAgents::~MachineAgents() {
  {
    const std::lock_guard<std::mutex> lock(pinger_mutex_);
    pinger_stop_ = true;
  }
  pinger_wake_.notify_one();
  pinger_.join();
  client_.reset();  // node 0's own connection first, then its server
  server_.reset();
  close_fd(signal_fd_);
}

AgentNews MachineAgents::begin_attempt() {
  client_->join_round();
  return wait(
      std::chrono::duration_cast<std::chrono::milliseconds>(seconds(settings_.join_timeout_s + 10)),
      "every machine to join attempt " + std::to_string(attempt()));
}

AgentNews MachineAgents::news() {
  return wait(std::chrono::milliseconds(10'000), "node 0's news");
}

AgentNews MachineAgents::after_failure(int code, const std::string& why) {
  client_->report_failed(code, why);
  return wait(std::chrono::milliseconds(10'000), "node 0's answer to this machine's failure");
}

void MachineAgents::stopped(int signal) {
  client_->report_stopped(128 + signal, "was stopped by " + signal_name(signal));
}

AgentNews MachineAgents::after_success() {
  client_->report_done();
  return wait(std::chrono::duration_cast<std::chrono::milliseconds>(
                  seconds(settings_.exit_barrier_timeout_s + 10)),
              "the other machines to finish");
}

AgentNews MachineAgents::wait(std::chrono::milliseconds limit, const std::string& waiting_for) {
  const auto until = Clock::now() + limit;
  while (true) {
    pollfd fds[2] = {{client_->fd(), POLLIN, 0}, {signal_fd_, POLLIN, 0}};
    const int ready = ::poll(fds, signal_fd_ >= 0 ? 2 : 1, poll_ms(until));
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo info{};
      if (::read(signal_fd_, &info, sizeof info) == sizeof info) {
        const int signal = static_cast<int>(info.ssi_signo);
        stopped(signal);
        return {AgentNews::Kind::kAbort, attempt(), settings_.node_rank, 128 + signal,
                "stopped by " + signal_name(signal) + " while waiting for " + waiting_for};
      }
    }
    if (ready == 0 || Clock::now() >= until) {
      return {AgentNews::Kind::kLost, attempt(), 0, 1,
              "node 0's ddprun at " + settings_.address + ":" + std::to_string(settings_.port) +
                  " said nothing for " +
                  seconds_text(std::chrono::duration<double>(limit).count()) +
                  " while this machine waited for " + waiting_for};
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const std::optional<AgentNews> news = client_->next(std::chrono::milliseconds(0));
    if (!news) continue;
    if (news->kind == AgentNews::Kind::kGo && news->round != attempt()) continue;
    return *news;
  }
}

}  // namespace ddprun
