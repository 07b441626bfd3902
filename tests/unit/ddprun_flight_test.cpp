// ddprun's diagnosis from the ranks' flight records (tools/ddprun/flight.h), on folders made here
// with the library's own recorder (dist/flight_recorder.h), so that the writer and the reader are
// tested together.
#include <dist/flight_recorder.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../../tools/ddprun/flight.h"

namespace {

using State = dist::FlightRecorder::State;

struct Step {
  const char* op;
  const char* reduce_op;
  const char* dtype;
  std::int64_t numel;
  State state;
};

const Step kSum = {"all_reduce", "SUM", "torch.float32", 4, State::kCompleted};

Step with_state(Step s, State state) {
  s.state = state;
  return s;
}

// A folder of its own per test, removed at the end.
class Folder {
 public:
  Folder()
      : path_(testing::TempDir() + "/ddprun_flight_" + std::to_string(getpid()) + "_" +
              testing::UnitTest::GetInstance()->current_test_info()->name()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~Folder() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

  // rank_R.json with `steps` as calls #1, #2, ... of group 0.
  void write(int rank, int world_size, const std::vector<Step>& steps,
             const char* reason = "SIGTERM") const {
    dist::FlightRecorder ring(64);
    std::uint64_t seq = 0;
    for (const Step& s : steps) {
      dist::FlightRecorder::Call c;
      c.seq = ++seq;
      std::snprintf(c.op, sizeof c.op, "%s", s.op);
      std::snprintf(c.reduce_op, sizeof c.reduce_op, "%s", s.reduce_op);
      std::snprintf(c.dtype, sizeof c.dtype, "%s", s.dtype);
      c.numel = s.numel;
      ring.set_state(ring.record(c), s.state);
    }
    std::ofstream(path_ + "/rank_" + std::to_string(rank) + ".json")
        << ring.json(rank, world_size, reason);
  }

 private:
  std::string path_;
};

using Lines = std::vector<std::string>;

TEST(DdprunFlight, NamesTheRankInADifferentCall) {
  Folder dir;
  const Step barrier = {"barrier", "", "", 0, State::kStarted};
  for (int r : {0, 1, 3}) dir.write(r, 4, {kSum, with_state(kSum, State::kStarted)});
  dir.write(2, 4, {kSum, barrier});
  EXPECT_EQ(ddprun::diagnose_flight(dir.path(), {0, 1, 2, 3}),
            (Lines{"ranks 0, 1, 3 wait in all_reduce #2 (SUM, torch.float32, 4 elements)",
                   "rank 2 last finished #1 and is in barrier #2",
                   "call #2 differs across ranks: ranks 0, 1, 3 all_reduce (SUM, torch.float32, 4 "
                   "elements); rank 2 barrier"}));
}

TEST(DdprunFlight, NamesTheRankThatIsBehind) {
  Folder dir;
  dir.write(0, 3, {kSum, kSum, with_state(kSum, State::kTimedOut)}, "timeout");
  dir.write(1, 3, {kSum, kSum});  // stopped in its own code after call #2
  dir.write(2, 3, {kSum, kSum, with_state(kSum, State::kFailed)}, "failure");
  EXPECT_EQ(
      ddprun::diagnose_flight(dir.path(), {0, 1, 2}),
      (Lines{"ranks 0, 2 wait in all_reduce #3 (SUM, torch.float32, 4 elements)",
             "rank 1 last finished #2 and is in no collective (in the program's own code, or in a "
             "send/recv)"}));
}

TEST(DdprunFlight, NamesDifferentSizesInTheSameCall) {
  Folder dir;
  dir.write(0, 2, {with_state(kSum, State::kStarted)});
  dir.write(1, 2, {{"all_reduce", "SUM", "torch.float32", 3, State::kStarted}});
  EXPECT_EQ(ddprun::diagnose_flight(dir.path(), {0, 1}),
            (Lines{"rank 0 waits in all_reduce #1 (SUM, torch.float32, 4 elements)",
                   "rank 1 finished no collective and is in all_reduce #1 (SUM, torch.float32, 3 "
                   "elements)",
                   "call #1 differs across ranks: rank 0 all_reduce (SUM, torch.float32, 4 "
                   "elements); rank 1 all_reduce (SUM, torch.float32, 3 elements)"}));
}

// A call refused for its arguments fails, and the group goes on: the rank is where its last call
// left it, not in the failed one.
TEST(DdprunFlight, PlacesARankAfterItsLastCallNotInAnEarlierFailedOne) {
  Folder dir;
  dir.write(0, 2, {with_state(kSum, State::kFailed), kSum});
  dir.write(1, 2, {kSum, kSum});
  EXPECT_EQ(ddprun::diagnose_flight(dir.path(), {0, 1}),
            (Lines{"ranks 0, 1 last finished #2 and are in no collective (in the program's own "
                   "code, or in a "
                   "send/recv)"}));
}

// Without the ranks' exits, every way to end without a record is named, none asserted.
TEST(DdprunFlight, NamesARankThatWroteNoRecord) {
  Folder dir;
  dir.write(0, 3, {kSum, with_state(kSum, State::kTimedOut)}, "timeout");
  EXPECT_EQ(ddprun::diagnose_flight(dir.path(), {0, 1, 2}),
            (Lines{"rank 0 waits in all_reduce #2 (SUM, torch.float32, 4 elements)",
                   "ranks 1, 2 each wrote no record: it ended on its own (an exit code), was "
                   "killed with SIGKILL, or never made its process group; the summary above says "
                   "how it ended"}));
}

// The most common distributed bug, a collective called on one rank only: the other rank finishes
// its program and exits 0. It was not killed, and the line says so.
TEST(DdprunFlight, SaysARankThatExitedZeroFinishedItsProgram) {
  Folder dir;
  dir.write(0, 2, {with_state(kSum, State::kFailed)}, "failure");
  EXPECT_EQ(ddprun::diagnose_flight(dir.path(), {0, 1}, {{0, W_EXITCODE(1, 0)}, {1, 0}}),
            (Lines{"rank 0 waits in all_reduce #1 (SUM, torch.float32, 4 elements)",
                   "rank 1 wrote no record: it exited with code 0: it finished its program, and "
                   "a rank that ends normally writes none; the calls the others wait in are ones "
                   "it never made (a collective called on some ranks only?)"}));
}

TEST(DdprunFlight, TellsEachWayOfEndingWithoutARecordApart) {
  Folder dir;
  dir.write(0, 5, {kSum, kSum}, "SIGTERM");  // every call finished: nobody waits
  EXPECT_EQ(ddprun::diagnose_flight(
                dir.path(), {0, 1, 2, 3, 4},
                {{1, W_EXITCODE(3, 0)}, {2, SIGKILL}, {3, W_EXITCODE(3, 0)}, {4, SIGSEGV}}),
            (Lines{"rank 0 last finished #2 and is in no collective (in the program's own code, "
                   "or in a send/recv)",
                   "ranks 1, 3 each wrote no record: it exited with code 3 on an error of its "
                   "own before any collective of its own failed (or before it made its process "
                   "group): its error line says why",
                   "rank 2 wrote no record: it was killed by SIGKILL, which leaves no time to "
                   "write one",
                   "rank 4 wrote no record: it was killed by signal 11 (SIGSEGV) before it had "
                   "made its process group"}));
  Folder other;
  other.write(0, 2, {kSum});
  EXPECT_EQ(ddprun::diagnose_flight(other.path(), {0, 1}, {{1, 0}})[1],
            "rank 1 wrote no record: it exited with code 0: it finished its program, and a rank "
            "that ends normally writes none");
}

TEST(DdprunFlight, SaysNothingWithoutRecords) {
  Folder dir;
  EXPECT_TRUE(ddprun::diagnose_flight(dir.path(), {0, 1}).empty());
  EXPECT_TRUE(ddprun::diagnose_flight(dir.path() + "/missing", {0, 1}).empty());
}

TEST(DdprunFlight, NamesAFileItCannotRead) {
  Folder dir;
  dir.write(0, 2, {kSum});
  std::ofstream(dir.path() + "/rank_1.json")
      << "{\"format\": \"dist flight recorder\", \"rank\": 1";
  const Lines lines = ddprun::diagnose_flight(dir.path(), {0, 1});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1],
            "rank 1 wrote no record: it ended on its own (an exit code), was killed with SIGKILL, "
            "or never made its process group; the summary above says how it ended");
  EXPECT_EQ(lines[2], "rank_1.json cannot be read: the file ends early");
}

TEST(DdprunFlight, ParsesEveryFieldBack) {
  dist::FlightRecorder ring(4);
  dist::FlightRecorder::Call c;
  c.seq = 9;
  c.group = 1;
  std::snprintf(c.op, sizeof c.op, "reduce_scatter");
  std::snprintf(c.reduce_op, sizeof c.reduce_op, "MAX");
  std::snprintf(c.dtype, sizeof c.dtype, "torch.int64");
  c.numel = 12;
  ring.set_state(ring.record(c), State::kTimedOut);
  std::string error;
  const auto record = ddprun::parse_flight_record(ring.json(3, 8, "timeout"), &error);
  ASSERT_TRUE(record) << error;
  EXPECT_EQ(record->rank, 3);
  EXPECT_EQ(record->world_size, 8);
  EXPECT_EQ(record->reason, "timeout");
  ASSERT_EQ(record->calls.size(), 1u);
  const ddprun::FlightCall& got = record->calls[0];
  EXPECT_EQ(got.group, 1);
  EXPECT_EQ(got.seq, 9u);
  EXPECT_EQ(got.op, "reduce_scatter");
  EXPECT_EQ(got.reduce_op, "MAX");
  EXPECT_EQ(got.dtype, "torch.int64");
  EXPECT_EQ(got.numel, 12);
  EXPECT_EQ(got.state, "timed out");
  EXPECT_FALSE(ddprun::parse_flight_record("{\"rank\": 0}", &error));
}

}  // namespace

// A restarted job (--max-restarts): the failed attempt's records move to attempt_K/, so that the
// next attempt's ranks write into an empty folder, and a job that then succeeds keeps them.
TEST(DdprunFlight, KeepsAFailedAttemptsRecordsApartFromTheNextAttempt) {
  Folder dir;
  const Step barrier = {"barrier", "", "", 0, State::kStarted};
  dir.write(0, 2, {kSum, with_state(kSum, State::kTimedOut)}, "timeout");
  dir.write(1, 2, {kSum, barrier});
  const ddprun::FlightDir flight{dir.path(), true};
  ddprun::report_flight_attempt(flight, 0, {0, 1});
  EXPECT_TRUE(ddprun::diagnose_flight(dir.path(), {0, 1}).empty());
  EXPECT_EQ(ddprun::diagnose_flight(dir.path() + "/attempt_0", {0, 1}).size(), 3U);
  ddprun::report_flight(flight, 0, {0, 1});  // attempt 1 succeeded
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/attempt_0/rank_1.json"));
}

TEST(DdprunFlight, RemovesItsFolderAfterASuccessWithNoFailedAttempt) {
  Folder dir;
  const ddprun::FlightDir flight{dir.path(), true};
  ddprun::report_flight_attempt(flight, 0, {0, 1});  // attempt 0 left no record
  ddprun::report_flight(flight, 0, {0, 1});
  EXPECT_FALSE(std::filesystem::exists(dir.path()));
}
