// ddprun's per-rank logs (tools/ddprun/logs.cpp): --log-dir, --redirects and --tee, in
// torchrun's layout.
#include <algorithm>
#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddprun_harness.h"

namespace {

using namespace ddprun_test;

// torchrun's layout: LOG_DIR/none_XXXXXX/attempt_0/<local_rank>/. Returns the attempt folder, or
// "" (with a failure) when the layout is not that.
std::string attempt_folder(const std::string& log_dir, int nproc) {
  const std::vector<std::string> runs = entries_of(log_dir);
  if (runs.size() != 1 || !runs[0].starts_with("none_") || runs[0].size() != 11) {
    ADD_FAILURE() << "want one folder none_XXXXXX in " << log_dir << ", found "
                  << ::testing::PrintToString(runs);
    return "";
  }
  const std::string run = log_dir + "/" + runs[0];
  EXPECT_EQ(entries_of(run), std::vector<std::string>{"attempt_0"});
  std::vector<std::string> ranks;
  for (int i = 0; i < nproc; ++i) ranks.push_back(std::to_string(i));
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(entries_of(run + "/attempt_0"), ranks);
  return run + "/attempt_0";
}

// What probe_worker --lines N writes: its probe line first on stdout.
std::string expected_stdout_lines(int rank, int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += "rank " + std::to_string(rank) + " out " + std::to_string(i) + "\n";
  return text;
}
std::string expected_stderr(int rank, int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += "rank " + std::to_string(rank) + " err " + std::to_string(i) + "\n";
  return text + "rank " + std::to_string(rank) + " unterminated";
}

// The lines of `text` that start with `prefix`, in order.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    if (line.starts_with(prefix)) lines.push_back(line);
  }
  return lines;
}

TEST(DdprunLogs, RedirectsEachRanksStdoutAndStderrToItsOwnFilesInTorchrunsLayout) {
  TempFolder logs;
  constexpr int kLines = 50;
  const Result r = run_ddprun({"--nproc-per-node", "3", "--log-dir", logs.path(), "--redirects",
                               "3", PROBE_PATH, "--lines", std::to_string(kLines)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "") << "--redirects 3 sends stdout to the files only";
  EXPECT_FALSE(contains(r.err, "rank 0 err")) << r.err;
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_TRUE(contains(r.err, "ddprun: logs in " + attempt +
                                  "/LOCAL_RANK/: stdout.log of every rank; stderr.log of every "
                                  "rank\n"))
      << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string folder = attempt + "/" + std::to_string(rank);
    const std::string out = read_file(folder + "/stdout.log");
    const std::vector<Probe> probes = probes_in(out);
    ASSERT_EQ(probes.size(), 1u) << out;
    EXPECT_EQ(probes[0]["RANK"], std::to_string(rank));
    EXPECT_EQ(out.substr(out.find('\n') + 1), expected_stdout_lines(rank, kLines));
    EXPECT_EQ(read_file(folder + "/stderr.log"), expected_stderr(rank, kLines));
  }
}

TEST(DdprunLogs, TeeWritesTheFilesAndCopiesWholeLinesToTheTerminal) {
  TempFolder logs;
  constexpr int kLines = 300;
  const Result r = run_ddprun({"--nproc_per_node=3", "--log_dir=" + logs.path(), "-t", "3",
                               PROBE_PATH, "--lines", std::to_string(kLines)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_TRUE(contains(r.err,
                       "stdout.log of every rank (also shown here); stderr.log of every "
                       "rank (also shown here)"))
      << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string who = "rank " + std::to_string(rank);
    const std::string folder = attempt + "/" + std::to_string(rank);
    EXPECT_EQ(read_file(folder + "/stderr.log"), expected_stderr(rank, kLines));
    // On the terminal: every line once, whole and in order, whatever the other ranks wrote.
    std::vector<std::string> want;
    for (int i = 0; i < kLines; ++i) want.push_back(who + " out " + std::to_string(i));
    EXPECT_EQ(lines_starting(r.out, who + " "), want);
    want.clear();
    for (int i = 0; i < kLines; ++i) want.push_back(who + " err " + std::to_string(i));
    want.push_back(who + " unterminated");  // the file keeps it as it was; the terminal gets a '\n'
    EXPECT_EQ(lines_starting(r.err, who + " "), want);
  }
  EXPECT_EQ(probes_in(r.out).size(), 3u) << r.out;
  // Nothing but whole lines: ranks' lines and ddprun's own.
  std::size_t start = 0;
  for (std::size_t end; (end = r.err.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = r.err.substr(start, end - start);
    EXPECT_TRUE(line.starts_with("rank ") || line.starts_with("ddprun: ")) << "torn: " << line;
  }
}

TEST(DdprunLogs, RedirectsOnlyTheStreamsOfTheLocalRanksNamed) {
  TempFolder logs;
  const Result r = run_ddprun({"--nproc-per-node", "3", "--log-dir", logs.path(), "-r", "0:1,2:2",
                               PROBE_PATH, "--lines", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_TRUE(contains(r.err, "stdout.log of local rank 0; stderr.log of local rank 2\n")) << r.err;
  // Rank 0: stdout to its file, stderr here. Rank 1: both here. Rank 2: stderr to its file.
  EXPECT_EQ(entries_of(attempt + "/0"), std::vector<std::string>{"stdout.log"});
  EXPECT_EQ(entries_of(attempt + "/1"), std::vector<std::string>{});
  EXPECT_EQ(entries_of(attempt + "/2"), std::vector<std::string>{"stderr.log"});
  EXPECT_TRUE(contains(read_file(attempt + "/0/stdout.log"), "rank 0 out 4\n"));
  EXPECT_EQ(read_file(attempt + "/2/stderr.log"), expected_stderr(2, 5));
  EXPECT_EQ(lines_starting(r.out, "rank 0 ").size(), 0u) << r.out;
  EXPECT_EQ(lines_starting(r.out, "rank 1 ").size(), 5u) << r.out;
  EXPECT_EQ(lines_starting(r.out, "rank 2 ").size(), 5u) << r.out;
  EXPECT_TRUE(contains(r.err, "rank 0 err 4\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 err 4\n")) << r.err;
  EXPECT_FALSE(contains(r.err, "rank 2 err")) << r.err;
}

TEST(DdprunLogs, KeepsACrashingRanksLastLinesAndShowsThemBeforeTheFailure) {
  TempFolder logs;
  const Result r =
      run_ddprun({"--nproc-per-node", "3", "--log-dir", logs.path(), "--tee", "3", PROBE_PATH,
                  "--lines", "20", "--sigkill-on-rank", "1", "--sleep", "10"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_EQ(read_file(attempt + "/1/stderr.log"), expected_stderr(1, 20));
  EXPECT_TRUE(read_file(attempt + "/1/stdout.log").ends_with("rank 1 out 19\n"));
  // The crashed rank's last whole line comes before ddprun says it failed; its unterminated
  // last words are shown once every rank has exited (the file has them as they were).
  const std::size_t last_line = r.err.find("rank 1 err 19\n");
  const std::size_t notice = r.err.find("ddprun: rank 1 (local_rank 1");
  ASSERT_NE(last_line, std::string::npos) << r.err;
  ASSERT_NE(notice, std::string::npos) << r.err;
  EXPECT_LT(last_line, notice) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 unterminated\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun: each rank's own output: " + attempt + "/LOCAL_RANK/\n"))
      << r.err;
  expect_every_probe_gone(read_file(attempt + "/0/stdout.log"));
}

TEST(DdprunLogs, MakesAFolderUnderTmpdirWhenNoLogDirIsGiven) {
  TempFolder tmp;
  const Result r = run_ddprun({"--nproc-per-node", "2", "--redirects", "1", PROBE_PATH},
                              {"TMPDIR=" + tmp.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> made = entries_of(tmp.path());
  ASSERT_EQ(made.size(), 1u);
  EXPECT_TRUE(made[0].starts_with("ddprun_")) << made[0];
  const std::string attempt = attempt_folder(tmp.path() + "/" + made[0], 2);
  ASSERT_FALSE(attempt.empty());
  EXPECT_EQ(probes_in(read_file(attempt + "/1/stdout.log")).size(), 1u);
}

TEST(DdprunLogs, RefusesALogFolderItCannotCreateWithExitCode2) {
  TempFolder tmp;
  const std::string file = tmp.path() + "/a-file";
  std::ofstream(file) << "not a folder\n";
  for (const std::string& dir : {file, file + "/logs"}) {
    SCOPED_TRACE(dir);
    const Result r =
        run_ddprun({"--nproc-per-node", "2", "--log-dir", dir, "--tee", "3", PROBE_PATH});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");  // nothing was started
    EXPECT_TRUE(contains(r.err, "ddprun: error: cannot create the log folder '" + file)) << r.err;
    EXPECT_TRUE(contains(r.err, "Not a directory")) << r.err;
    EXPECT_EQ(count_of(r.err, "ddprun: hint: "), 1) << r.err;
  }
}

}  // namespace
