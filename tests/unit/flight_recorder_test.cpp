// The flight recorder (dist/flight_recorder.h): its ring, its JSON, a dump on SIGUSR1, and the
// call numbers a process group records in it.
#include <dist/check.h>
#include <dist/flight_recorder.h>
#include <dist/init.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using State = dist::FlightRecorder::State;

dist::FlightRecorder::Call all_reduce(std::uint64_t seq) {
  dist::FlightRecorder::Call c;
  c.seq = seq;
  std::snprintf(c.op, sizeof c.op, "all_reduce");
  std::snprintf(c.reduce_op, sizeof c.reduce_op, "SUM");
  std::snprintf(c.dtype, sizeof c.dtype, "torch.float32");
  c.numel = 4;
  c.bytes = 16;
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FlightRecorder, KeepsTheLastCapacityCallsOldestFirst) {
  dist::FlightRecorder ring(3);
  for (std::uint64_t seq = 1; seq <= 5; ++seq)
    ring.set_state(ring.record(all_reduce(seq)), State::kCompleted);
  const auto entries = ring.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].call.seq, 3u);
  EXPECT_EQ(entries[1].call.seq, 4u);
  EXPECT_EQ(entries[2].call.seq, 5u);
  EXPECT_EQ(entries[2].record, 4u);
}

TEST(FlightRecorder, MovesACallThroughItsStates) {
  dist::FlightRecorder ring(4);
  const auto r = ring.record(all_reduce(7));
  EXPECT_EQ(ring.entries().back().state, State::kScheduled);
  EXPECT_EQ(ring.entries().back().end_us, 0);
  ring.set_state(r, State::kStarted);
  EXPECT_EQ(ring.entries().back().state, State::kStarted);
  ring.set_state(r, State::kTimedOut);
  EXPECT_EQ(ring.entries().back().state, State::kTimedOut);
  EXPECT_GE(ring.entries().back().end_us, ring.entries().back().start_us);
  EXPECT_STREQ(dist::FlightRecorder::state_name(State::kTimedOut), "timed out");
}

TEST(FlightRecorder, IgnoresAStateForACallTheRingHasOverwritten) {
  dist::FlightRecorder ring(1);
  const auto old = ring.record(all_reduce(1));
  ring.record(all_reduce(2));
  ring.set_state(old, State::kFailed);
  ASSERT_EQ(ring.entries().size(), 1u);
  EXPECT_EQ(ring.entries()[0].call.seq, 2u);
  EXPECT_EQ(ring.entries()[0].state, State::kScheduled);
}

TEST(FlightRecorder, CutsNamesLongerThanTheirFields) {
  dist::FlightRecorder ring(1);
  auto c = all_reduce(1);
  ring.record(c);
  const std::string long_name(100, 'x');
  std::snprintf(c.op, sizeof c.op, "%s", long_name.c_str());
  ring.record(c);
  EXPECT_EQ(std::string(ring.entries()[0].call.op), std::string(sizeof c.op - 1, 'x'));
}

// The JSON is read back by Python's json module, as any tool would read it.
TEST(FlightRecorder, WritesJsonThatPythonReadsBack) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  dist::FlightRecorder ring(2);
  ring.set_state(ring.record(all_reduce(1)), State::kCompleted);
  ring.set_state(ring.record(all_reduce(2)), State::kCompleted);
  dist::FlightRecorder::Call barrier;
  barrier.seq = 3;
  std::snprintf(barrier.op, sizeof barrier.op, "bar\"rier");  // a quote, escaped
  ring.set_state(ring.record(barrier), State::kStarted);
  const std::string path = testing::TempDir() + "/flight_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << ring.json(1, 4, "SIGTERM");
  const std::string check =
      "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
      "e=d[\"entries\"]; "
      "assert (d[\"rank\"], d[\"world_size\"], d[\"reason\"], d[\"recorded\"]) == (1, 4, "
      "\"SIGTERM\", 3), d; "
      "assert [x[\"seq\"] for x in e] == [2, 3], e; "
      "assert e[0][\"op\"] == \"all_reduce\" and e[0][\"reduce_op\"] == \"SUM\" and "
      "e[0][\"numel\"] == 4 "
      "and e[0][\"bytes\"] == 16 and e[0][\"state\"] == \"completed\", e; "
      "assert e[1][\"op\"] == \"bar\\\"rier\" and e[1][\"dtype\"] == \"\" and e[1][\"state\"] == "
      "\"started\" "
      "and e[1][\"end_us\"] == 0, e' " +
      path;
  EXPECT_EQ(std::system(check.c_str()), 0) << read_file(path);
  std::filesystem::remove(path);
}

TEST(FlightRecorder, WritesAnEmptyRingAsValidJson) {
  dist::FlightRecorder ring(2);
  EXPECT_NE(ring.json(0, 1, "SIGUSR1").find("\"entries\": []}"), std::string::npos);
}

// SIGUSR1 writes DIST_TRACE_DIR/rank_R.json, and the program goes on.
TEST(FlightRecorder, DumpsOnSigusr1AndGoesOn) {
  const std::string dir =
      testing::TempDir() + "/flight_dir_" + std::to_string(getpid()) + "/nested";
  setenv("DIST_TRACE_DIR", dir.c_str(), 1);
  setenv("DIST_TRACE_BUFFER_SIZE", "8", 1);
  dist::flight::install_from_environment(2, 3);
  ASSERT_NE(dist::flight::recorder(), nullptr);
  EXPECT_EQ(dist::flight::recorder()->capacity(), 8u);
  EXPECT_EQ(dist::flight::dump_path(), dir + "/rank_2.json");
  dist::flight::recorder()->record(all_reduce(42));
  ASSERT_EQ(raise(SIGUSR1), 0);  // the handler runs before raise returns
  const std::string text = read_file(dir + "/rank_2.json");
  EXPECT_NE(text.find("\"reason\": \"SIGUSR1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"seq\": 42"), std::string::npos) << text;
  EXPECT_NE(text.find("\"state\": \"scheduled\""), std::string::npos) << text;
  // No temporary file is left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
  dist::flight::uninstall_for_tests();
  unsetenv("DIST_TRACE_DIR");
  unsetenv("DIST_TRACE_BUFFER_SIZE");
  std::filesystem::remove_all(testing::TempDir() + "/flight_dir_" + std::to_string(getpid()));
}

// What a process group hands the recorder: each collective under its group's own call number
// (1, 2, ... per group, the numbers a timeout's message gives), with its op, dtype and size.
// A group of one rank in this process: its calls run through the same numbering as any other.
TEST(FlightRecorder, RecordsEachCollectiveUnderItsGroupsCallNumber) {
  const std::string dir = testing::TempDir() + "/flight_seq_" + std::to_string(getpid());
  dist::testing::clear_launcher_env();
  setenv("DIST_TRACE_DIR", dir.c_str(), 1);
  dist::init_process_group(
      {.init_method = "file://" + dir + "_store", .world_size = 1, .rank = 0, .timeout = 10s});
  dist::Tensor t = dist::full(4, 1.0);
  dist::all_reduce(t, dist::ReduceOp::MAX);
  dist::broadcast(t, 0);
  auto other = dist::new_group();  // a group of its own: its calls are numbered from 1 again
  other->all_reduce(t, dist::ReduceOp::SUM);
  ASSERT_NE(dist::flight::recorder(), nullptr);
  const auto entries = dist::flight::recorder()->entries();
  std::string seen;
  for (const auto& e : entries) {
    seen += std::string(e.call.op) + " #" + std::to_string(e.call.seq) + " of group " +
            std::to_string(e.call.group) + "; ";
  }
  // The default group's all_reduce and broadcast are its calls 1 and 2; the new group's first
  // call is its 1 (new_group itself makes no collective call on the default group).
  EXPECT_EQ(seen, "all_reduce #1 of group 0; broadcast #2 of group 0; all_reduce #1 of group 1; ");
  if (entries.size() == 3) {
    EXPECT_STREQ(entries[0].call.reduce_op, "MAX");
    EXPECT_EQ(entries[1].call.numel, 4);
    EXPECT_EQ(entries[1].state, State::kCompleted);
  }
  // The same numbers in rank_0.json, the file ddprun reads.
  ASSERT_TRUE(dist::flight::dump("test"));
  const std::string text = read_file(dir + "/rank_0.json");
  EXPECT_NE(text.find("\"group\": 0, \"seq\": 2, \"op\": \"broadcast\""), std::string::npos)
      << text;
  other.reset();
  dist::destroy_process_group();
  dist::flight::uninstall_for_tests();
  unsetenv("DIST_TRACE_DIR");
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorder, InstallsNothingWithoutDistTraceDir) {
  unsetenv("DIST_TRACE_DIR");
  dist::flight::install_from_environment(0, 1);
  EXPECT_EQ(dist::flight::recorder(), nullptr);
  EXPECT_FALSE(dist::flight::dump("SIGUSR1"));
  struct sigaction now {};
  sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(FlightRecorder, RefusesABadBufferSize) {
  setenv("DIST_TRACE_DIR", testing::TempDir().c_str(), 1);
  setenv("DIST_TRACE_BUFFER_SIZE", "many", 1);
  EXPECT_THROW(dist::flight::install_from_environment(0, 1), dist::ConfigError);
  EXPECT_EQ(dist::flight::recorder(), nullptr);
  unsetenv("DIST_TRACE_DIR");
  unsetenv("DIST_TRACE_BUFFER_SIZE");
}

}  // namespace
