// The rendezvous stores: every operation on TCPStore and FileStore, their deadlines, and how the
// TCP server survives clients that misbehave.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <thread>

#include "dist/check.h"
#include "dist/store.h"
#include "ranks.h"
#include "store/wire.h"

namespace {

using namespace std::chrono_literals;
using dist::Store;
using dist::TCPStore;
using Clock = std::chrono::steady_clock;

TCPStore::Options server_options(int port = 0, std::chrono::milliseconds timeout = 5s) {
  TCPStore::Options o;
  o.port = port;
  o.is_server = true;
  o.timeout = timeout;
  o.session = 42;
  return o;
}

TCPStore::Options client_options(int port, std::chrono::milliseconds timeout = 5s) {
  TCPStore::Options o = server_options(port, timeout);
  o.is_server = false;
  return o;
}

std::string temp_path(const std::string& name) {
  return "/tmp/dist_store_test_" + std::to_string(::getpid()) + "_" + name;
}

// ---- The same contract for both stores --------------------------------------------------------

struct StorePair {
  std::shared_ptr<Store> a, b;  // two handles on one store, as two ranks would have
};

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tcp") {
      auto server = std::make_shared<TCPStore>(server_options());
      stores_.a = server;
      stores_.b = std::make_shared<TCPStore>(client_options(server->port()));
    } else {
      path_ = temp_path("contract");
      std::remove(path_.c_str());
      stores_.a = std::make_shared<dist::FileStore>(path_, 5s);
      stores_.b = std::make_shared<dist::FileStore>(path_, 5s);
    }
  }
  void TearDown() override {
    stores_ = {};
    if (!path_.empty()) std::remove(path_.c_str());
  }
  StorePair stores_;
  std::string path_;
};

TEST_P(StoreContract, SetThenGetFromAnotherHandle) {
  stores_.a->set("k", "value");
  EXPECT_EQ(stores_.b->get("k"), "value");
  stores_.b->set("k", "changed");
  EXPECT_EQ(stores_.a->get("k"), "changed");
}

TEST_P(StoreContract, ValuesAreBinarySafe) {
  std::string bytes(1 << 20, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 256);
  stores_.a->set("blob", bytes);
  EXPECT_EQ(stores_.b->get("blob"), bytes);
  stores_.a->set("empty", "");
  EXPECT_EQ(stores_.b->get("empty"), "");
}

TEST_P(StoreContract, AddCountsFromZeroAndStoresDecimalText) {
  EXPECT_EQ(stores_.a->add("counter", 1), 1);
  EXPECT_EQ(stores_.b->add("counter", 5), 6);
  EXPECT_EQ(stores_.a->add("counter", -10), -4);
  EXPECT_EQ(stores_.b->get("counter"), "-4");
}

TEST_P(StoreContract, AddOnANonIntegerValueIsAnErrorAndTheHandleStillWorks) {
  stores_.a->set("text", "hello");
  EXPECT_THROW(stores_.b->add("text", 1), dist::Error);
  EXPECT_EQ(stores_.b->add("number", 2), 2);
  EXPECT_EQ(stores_.b->get("text"), "hello");
}

TEST_P(StoreContract, TimeoutsBeyondAWeekAreRefusedNotOverflowed) {
  EXPECT_THROW(stores_.a->set_timeout(std::chrono::milliseconds::max()), dist::ConfigError);
  EXPECT_THROW(stores_.a->wait({"k"}, std::chrono::hours(24 * 8)), dist::ConfigError);
  EXPECT_THROW(stores_.a->set_timeout(0ms), dist::ConfigError);
  stores_.a->set_timeout(dist::kMaxTimeout);  // the limit itself is fine
  stores_.a->set("k", "v");
  EXPECT_EQ(stores_.a->get("k"), "v");
}

TEST_P(StoreContract, CompareSetFollowsTorchSemantics) {
  // An absent key is set only when `expected` is empty; otherwise `expected` is returned.
  EXPECT_EQ(stores_.a->compare_set("cs", "x", "y"), "x");
  EXPECT_FALSE(stores_.a->check({"cs"}));
  EXPECT_EQ(stores_.a->compare_set("cs", "", "first"), "first");
  // A present key changes only when it holds `expected`; the result is the value afterwards.
  EXPECT_EQ(stores_.b->compare_set("cs", "wrong", "second"), "first");
  EXPECT_EQ(stores_.b->compare_set("cs", "first", "second"), "second");
  EXPECT_EQ(stores_.a->get("cs"), "second");
}

TEST_P(StoreContract, CheckDeleteAndNumKeys) {
  const auto base = stores_.a->num_keys();
  stores_.a->set("one", "1");
  stores_.a->set("two", "2");
  EXPECT_TRUE(stores_.b->check({"one", "two"}));
  EXPECT_FALSE(stores_.b->check({"one", "three"}));
  EXPECT_EQ(stores_.b->num_keys(), base + 2);
  EXPECT_TRUE(stores_.b->delete_key("one"));
  EXPECT_FALSE(stores_.b->delete_key("one"));
  EXPECT_FALSE(stores_.a->check({"one"}));
  EXPECT_EQ(stores_.a->num_keys(), base + 1);
}

TEST_P(StoreContract, GetBlocksUntilAnotherHandleSetsTheKey) {
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    stores_.b->set("late", "here");
  });
  EXPECT_EQ(stores_.a->get("late"), "here");
  setter.join();
}

TEST_P(StoreContract, WaitReturnsWhenEveryKeyExists) {
  std::thread setter([&] {
    stores_.b->set("w1", "");
    std::this_thread::sleep_for(50ms);
    stores_.b->add("w2", 1);
  });
  stores_.a->wait({"w1", "w2"}, 5s);
  EXPECT_TRUE(stores_.a->check({"w1", "w2"}));
  setter.join();
}

// A timeout is bounded on both sides: a call that gives up early (a rank declared missing while
// it was still on its way) is as wrong as one that hangs. So `call` must end in a TimeoutError
// naming `key` no sooner than kTimeout (less 20 ms for the clocks' granularity), and within 3 s
// (a generous margin for a busy machine).
constexpr auto kTimeout = 300ms;

void expect_timeout_naming(const std::string& key, const std::function<void()>& call) {
  const auto start = Clock::now();
  try {
    call();
    ADD_FAILURE() << "returned instead of timing out";
  } catch (const dist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("\"" + key + "\""), std::string::npos) << e.what();
  }
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, kTimeout - 20ms) << "gave up before its timeout";
  EXPECT_LT(waited, 3s);
}

TEST_P(StoreContract, GetTimesOutNamingTheKey) {
  stores_.a->set_timeout(kTimeout);
  expect_timeout_naming("never", [&] { stores_.a->get("never"); });
  // The handle still works after a timeout.
  stores_.b->set("after", "ok");
  EXPECT_EQ(stores_.a->get("after"), "ok");
}

TEST_P(StoreContract, WaitTimesOutNoSoonerThanItsTimeoutNamingTheMissingKey) {
  stores_.b->set("here", "");
  expect_timeout_naming("missing", [&] { stores_.a->wait({"here", "missing"}, kTimeout); });
}

TEST_P(StoreContract, OversizedKeysAndValuesAreRefusedBeforeAnythingIsWritten) {
  const std::string long_key(dist::kMaxStoreKeyBytes + 1, 'k');
  EXPECT_THROW(stores_.a->set(long_key, "v"), dist::Error);
  EXPECT_THROW(stores_.a->add(long_key, 1), dist::Error);
  EXPECT_THROW(stores_.a->compare_set(long_key, "", "v"), dist::Error);
  EXPECT_THROW(stores_.a->check({"ok", long_key}), dist::Error);
  EXPECT_THROW(stores_.a->delete_key(long_key), dist::Error);
  EXPECT_THROW(stores_.a->wait({long_key}, 100ms), dist::Error);
  EXPECT_THROW(stores_.a->compare_set("cs", "", std::string(dist::kMaxStoreValueBytes + 1, 'v')),
               dist::Error);
  // Nothing half-written: both handles still read the store.
  stores_.a->set("after", "fine");
  EXPECT_EQ(stores_.b->get("after"), "fine");
  EXPECT_FALSE(stores_.b->check({"cs"}));
}

TEST_P(StoreContract, PrefixStoresDoNotSeeEachOthersKeys) {
  dist::PrefixStore g0("default/0", stores_.a), g1("default/1", stores_.b);
  g0.set("rank/0", "old generation");
  EXPECT_FALSE(g1.check({"rank/0"}));
  g1.set("rank/0", "new generation");
  EXPECT_EQ(g0.get("rank/0"), "old generation");
  EXPECT_EQ(stores_.b->get("default/1/rank/0"), "new generation");
}

// Rank 0 waits until the others have read (acknowledge_read / wait_for_reads), and no longer.
TEST_P(StoreContract, WaitForReadsReturnsOnceEveryRankAcknowledgedOrAtItsLimit) {
  std::thread reader([&] {
    std::this_thread::sleep_for(100ms);
    dist::acknowledge_read(*stores_.b, "verdict/1", 1);
    dist::acknowledge_read(*stores_.b, "verdict/1", 2);
  });
  auto start = Clock::now();
  dist::wait_for_reads(*stores_.a, "verdict/1", {1, 2}, 5s);
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_TRUE(stores_.a->check({"verdict/1/1", "verdict/1/2"}));
  reader.join();
  start = Clock::now();  // rank 3 never reads: the wait ends at its limit, without an error
  dist::wait_for_reads(*stores_.a, "verdict/1", {1, 3}, 300ms);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_LT(Clock::now() - start, 3s);
}

INSTANTIATE_TEST_SUITE_P(TcpAndFile, StoreContract, ::testing::Values("tcp", "file"),
                         [](const auto& p) { return p.param; });

// ---- TCPStore: connection behaviour ------------------------------------------------------------

TEST(TCPStore, AcknowledgingAReadToAServerThatIsGoneIsNoError) {
  auto server = std::make_unique<TCPStore>(server_options());
  TCPStore client(client_options(server->port(), 1s));
  server.reset();  // rank 0 went on and exited
  EXPECT_NO_THROW(dist::acknowledge_read(client, "verdict/1", 1));
}

TEST(TCPStore, AClientThatStartsFirstRetriesUntilTheServerIsUp) {
  const int port = dist::testing::free_port();
  std::string got;
  std::thread client([&] {
    TCPStore c(client_options(port));
    got = c.get("hello");
  });
  std::this_thread::sleep_for(300ms);
  TCPStore server(server_options(port));
  server.set("hello", "world");
  client.join();
  EXPECT_EQ(got, "world");
}

TEST(TCPStore, NoServerMeansATimeoutThatSaysWhereItLooked) {
  const int port = dist::testing::free_port();
  const auto start = Clock::now();
  try {
    TCPStore c(client_options(port, 400ms));
    FAIL() << "connected to nothing";
  } catch (const dist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("rank 0 has not started"), std::string::npos);
  }
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(TCPStore, ABusyPortIsAConfigErrorNamingIt) {
  TCPStore first(server_options());
  try {
    TCPStore second(server_options(first.port()));
    FAIL() << "two servers on one port";
  } catch (const dist::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("port " + std::to_string(first.port()) +
                                         " on 127.0.0.1 is already in use"),
              std::string::npos)
        << e.what();
  }
}

TEST(TCPStore, AClientOfAnotherSessionIsTurnedAway) {
  TCPStore server(server_options());
  TCPStore::Options other = client_options(server.port(), 300ms);
  other.session = 43;
  EXPECT_THROW(TCPStore c(other), dist::TimeoutError);
}

// A raw TCP connection to the server, for sending what no real client would.
int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

std::string hello_frame(std::uint64_t session, const std::string& token = "") {
  return dist::wire::Writer(static_cast<std::uint8_t>(dist::wire::Op::kHello))
      .field(dist::wire::kMagic)
      .field(dist::wire::encode_u64(session))
      .field(token)
      .finish();
}

// Reads until the server closes the connection (or `seconds` pass without a byte).
std::string read_until_closed(int fd, int seconds = 5) {
  timeval tv{seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string all;
  char buf[256];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) all.append(buf, static_cast<std::size_t>(n));
  return all;
}

TEST(TCPStoreToken, OnlyClientsWithTheJobsTokenJoin) {
  TCPStore::Options o = server_options();
  o.token = "0123456789abcdef";
  TCPStore server(o);
  server.set("secret", "value");
  TCPStore::Options same = client_options(server.port(), 5s);
  same.token = o.token;
  TCPStore friendly(same);
  EXPECT_EQ(friendly.get("secret"), "value");
  // No token, or another one: turned away at the handshake, at once (not after the timeout),
  // with a message that names the variable.
  for (const std::string token : {"", "0123456789abcdeX", "0123456789abcdef0"}) {
    TCPStore::Options other = client_options(server.port(), 30s);
    other.token = token;
    const auto start = std::chrono::steady_clock::now();
    try {
      TCPStore stranger(other);
      ADD_FAILURE() << "a client with token '" << token << "' joined";
    } catch (const dist::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("DIST_STORE_TOKEN"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  }
  EXPECT_EQ(friendly.get("secret"), "value");  // the server is unharmed
}

TEST(TCPStoreToken, ARawConnectionWithoutTheTokenCannotReadAKey) {
  TCPStore::Options o = server_options();
  o.token = "right";
  TCPStore server(o);
  server.set("secret", "value");
  // A well-formed get right behind the hello: with the right token it would be answered.
  const std::string get = dist::wire::Writer(static_cast<std::uint8_t>(dist::wire::Op::kGet))
                              .field("1000")
                              .field("secret")
                              .finish();
  for (const std::string token : {"right", "wrong"}) {
    const int fd = raw_connect(server.port());
    const std::string hello = hello_frame(42, token);
    ::send(fd, hello.data(), hello.size(), 0);
    ::send(fd, get.data(), get.size(), 0);
    // The wrong token: the server closes at once. The right one: it answers and waits for more.
    const std::string reply = read_until_closed(fd, token == "right" ? 1 : 5);
    ::close(fd);
    EXPECT_EQ(reply.find("value") != std::string::npos, token == "right") << token;
    EXPECT_EQ(reply.find("DIST_STORE_TOKEN") != std::string::npos, token == "wrong") << token;
  }
}

// This machine's first IPv4 address that is not loopback, or "" if it has none.
std::string non_loopback_ipv4() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  ::freeifaddrs(all);
  return found;
}

TEST(TCPStore, ALoopbackMasterAddressListensOnLoopbackOnly) {
  // MASTER_ADDR=127.0.0.1 means one machine: other machines must not reach the store at all.
  const std::string outside = non_loopback_ipv4();
  if (outside.empty()) GTEST_SKIP() << "this machine has no IPv4 address besides loopback";
  TCPStore server(server_options());  // host 127.0.0.1
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(server.port()));
  ::inet_pton(AF_INET, outside.c_str(), &addr.sin_addr);
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << "the store answered on " << outside;
  ::close(fd);
  const int inside = raw_connect(server.port());  // and on loopback it does
  ::close(inside);
}

TEST(TCPStoreToken, ATokenOverTheLimitIsAConfigError) {
  TCPStore::Options o = server_options();
  o.token = std::string(dist::kMaxStoreTokenBytes + 1, 'x');
  EXPECT_THROW(TCPStore server(o), dist::ConfigError);
}

TEST(TCPStoreHardening, AnOversizedFrameClosesOnlyThatConnection) {
  TCPStore server(server_options());
  const int fd = raw_connect(server.port());
  const std::string hello = hello_frame(42);
  const char huge[4] = {'\xff', '\xff', '\xff', '\x7f'};
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  ASSERT_EQ(::send(fd, huge, 4, 0), 4);
  const std::string reply = read_until_closed(fd);
  ::close(fd);
  EXPECT_NE(reply.find("over the"), std::string::npos);
  server.set("still", "serving");
  EXPECT_EQ(server.get("still"), "serving");
}

TEST(TCPStoreHardening, GarbageInsteadOfAHelloIsRefused) {
  TCPStore server(server_options());
  const int fd = raw_connect(server.port());
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  read_until_closed(fd);
  ::close(fd);
  EXPECT_EQ(server.add("alive", 1), 1);
}

TEST(TCPStoreHardening, AMalformedFieldLengthIsRefused) {
  TCPStore server(server_options());
  const int fd = raw_connect(server.port());
  const std::string hello = hello_frame(42);
  // A payload of 6 bytes: opcode kSet, then a field that claims 1000 bytes.
  const char frame[10] = {6,      0,      0, 0, static_cast<char>(dist::wire::Op::kSet),
                          '\xe8', '\x03', 0, 0, 'k'};
  ::send(fd, hello.data(), hello.size(), 0);
  ::send(fd, frame, sizeof(frame), 0);
  EXPECT_NE(read_until_closed(fd).find("malformed frame"), std::string::npos);
  ::close(fd);
  EXPECT_EQ(server.add("alive", 1), 1);
}

// Sends raw bytes on a fresh connection that has said hello with `session`.
int joined_raw_client(int port, std::uint64_t session) {
  const int fd = raw_connect(port);
  const std::string hello = hello_frame(session);
  EXPECT_EQ(::send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  return fd;
}

std::string frame(dist::wire::Op op, std::initializer_list<std::string> fields) {
  dist::wire::Writer w(static_cast<std::uint8_t>(op));
  for (const auto& f : fields) w.field(f);
  return w.finish();
}

TEST(TCPStoreHardening, AHugeServerSideTimeoutIsRefusedWithoutHarm) {
  TCPStore server(server_options());
  const int fd = joined_raw_client(server.port(), 42);
  const std::string get = frame(dist::wire::Op::kGet, {"9223372036854775807", "k"});
  ::send(fd, get.data(), get.size(), 0);
  EXPECT_NE(read_until_closed(fd).find("bad request"), std::string::npos);
  ::close(fd);
  EXPECT_EQ(server.add("alive", 1), 1);
}

TEST(TCPStoreHardening, ATurnedAwayClientCannotSlipARequestIn) {
  TCPStore server(server_options());
  const int fd = raw_connect(server.port());
  const std::string both = hello_frame(7) + frame(dist::wire::Op::kSet, {"sneaky", "x"});
  ::send(fd, both.data(), both.size(), 0);
  read_until_closed(fd);
  ::close(fd);
  EXPECT_FALSE(server.check({"sneaky"}));
}

TEST(TCPStoreHardening, AClientThatSendsWithoutReadingDoesNotStallTheOthers) {
  TCPStore server(server_options());
  server.set("big", std::string(8 << 20, 'x'));
  // 200 requests for 8 MiB each, never read: 1.6 GB of replies if the server buffered them all.
  const int greedy = joined_raw_client(server.port(), 42);
  const std::string get = frame(dist::wire::Op::kGet, {"1000", "big"});
  std::string burst;
  for (int i = 0; i < 200; ++i) burst += get;
  ::send(greedy, burst.data(), burst.size(), MSG_DONTWAIT);
  TCPStore other(client_options(server.port()));
  const auto start = Clock::now();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(other.add("counter", 1), i + 1);
  EXPECT_LT(Clock::now() - start, 3s);
  ::close(greedy);
}

TEST(TCPStoreHardening, AClientThatVanishesMidRequestDoesNotHurtTheServer) {
  TCPStore server(server_options());
  for (int i = 0; i < 50; ++i) {
    const int fd = raw_connect(server.port());
    const std::string hello = hello_frame(42);
    ::send(fd, hello.data(), hello.size(), 0);
    const char partial[6] = {100, 0, 0, 0, 2, 0};  // announces 100 bytes, sends 2
    ::send(fd, partial, sizeof(partial), 0);
    ::close(fd);
  }
  // A client parked in get() that disappears must not leave the server stuck either.
  {
    TCPStore waiter(client_options(server.port(), 200ms));
    EXPECT_THROW(waiter.get("nobody-sets-this"), dist::TimeoutError);
  }
  EXPECT_EQ(server.add("alive", 1), 1);
  EXPECT_EQ(server.num_keys(), 1);
}

TEST(TCPStoreHardening, AForeignServerIsNamedAsSuch) {
  // Something that is not a dist store listens on the port and answers nonsense.
  const auto listener = dist::testing::listen_on_loopback();
  std::thread foreign([&] {
    const int c = ::accept(listener.fd, nullptr, nullptr);
    const char answer[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    ::send(c, answer, sizeof(answer) - 1, 0);
    ::close(c);
  });
  try {
    TCPStore c(client_options(listener.port, 2s));
    FAIL() << "joined a foreign server";
  } catch (const dist::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not this job's store"), std::string::npos) << e.what();
  }
  foreign.join();
  ::close(listener.fd);
}

TEST(TCPStore, ServerWaitsForClientsToLeaveButNotPastTheDeadline) {
  TCPStore server(server_options());
  auto client = std::make_unique<TCPStore>(client_options(server.port()));
  std::thread leaver([&] {
    std::this_thread::sleep_for(200ms);
    client.reset();
  });
  auto start = Clock::now();
  server.wait_for_clients_to_leave(Clock::now() + 10s);
  EXPECT_GE(Clock::now() - start, 150ms);
  EXPECT_LT(Clock::now() - start, 5s);
  leaver.join();

  TCPStore server2(server_options());
  TCPStore stays(client_options(server2.port()));
  start = Clock::now();
  server2.wait_for_clients_to_leave(Clock::now() + 300ms);
  EXPECT_LT(Clock::now() - start, 3s);
}

// ---- FileStore --------------------------------------------------------------------------------

TEST(FileStore, TheLastUserDeletesTheFile) {
  const std::string path = temp_path("cleanup");
  std::remove(path.c_str());
  struct stat st {};
  {
    dist::FileStore a(path, 2s);
    {
      dist::FileStore b(path, 2s);
      b.set("k", "v");
    }
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << "deleted while still in use";
    EXPECT_EQ(a.get("k"), "v");
  }
  EXPECT_NE(::stat(path.c_str(), &st), 0) << "left behind after the last user";
}

TEST(FileStore, ATornRecordIsReportedNotMisread) {
  const std::string path = temp_path("torn");
  std::remove(path.c_str());
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    const char torn[] = {5, 0, 0, 0, 'a', 'b'};  // a key of 5 bytes, cut after 2
    std::fwrite(torn, 1, sizeof(torn), f);
    std::fclose(f);
  }
  try {
    dist::FileStore s(path, 1s);
    FAIL() << "read a torn file";
  } catch (const dist::Error& e) {
    EXPECT_NE(std::string(e.what()).find("torn record"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(FileStore, ALockHeldByAStoppedProcessEndsInATimeout) {
  const std::string path = temp_path("locked");
  std::remove(path.c_str());
  dist::FileStore store(path, 300ms);
  // Another open file description of the same file holds the lock, as a stopped rank would.
  const int holder = ::open(path.c_str(), O_RDWR);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);
  const auto start = Clock::now();
  try {
    store.set("k", "v");
    FAIL() << "set went through a held lock";
  } catch (const dist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("stayed locked by another process"), std::string::npos);
  }
  EXPECT_LT(Clock::now() - start, 3s);
  ::close(holder);
  store.set("k", "v");
  EXPECT_EQ(store.get("k"), "v");
}

TEST(FileStore, AddIsAtomicAcrossProcesses) {
  const std::string path = temp_path("atomic");
  std::remove(path.c_str());
  dist::FileStore keep(path, 10s);  // keeps the file alive after the other processes close it
  constexpr int kAdds = 200;
  auto results = dist::testing::run_ranks(4, [&](int) {
    dist::FileStore store(path, 10s);
    for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
    return 0;
  });
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << dist::testing::describe(results);
  EXPECT_EQ(keep.add("counter", 0), 4 * kAdds);
}

TEST(FileStore, AnUnwritablePathIsAConfigError) {
  EXPECT_THROW(dist::FileStore("/proc/dist-no-such-dir/store", 1s), dist::ConfigError);
}

}  // namespace
