// Who hung where: the ranks' flight records (DIST_TRACE_DIR/rank_R.json), read after a failed job.
//
// Each rank of a program built on the dist library keeps its last collectives in a ring and writes
// it to DIST_TRACE_DIR/rank_R.json when a collective times out or fails, and when it gets SIGTERM
// (what ddprun sends the other ranks after the first failure), SIGUSR1 or a crash signal
// (common/include/dist/flight_recorder.h). Read together, the files say what no single rank's error
// can: which ranks waited in which call, and which rank was behind or in a different call:
//
//   ranks 0, 1, 3 wait in all_reduce #42 (SUM, torch.float32, 4 elements)
//   rank 2 last finished #41 and is in barrier #42
//   call #42 differs across ranks: ranks 0, 1, 3 all_reduce (SUM, torch.float32, 4 elements);
//     rank 2 barrier
//   rank 5 wrote no record: it exited with code 0: it finished its program, ...
//
// ddprun links no dist library, so this reads the recorder's own format with a small reader of its
// own: a header line, then one entry per line, each a flat JSON object of numbers and strings.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddprun {

// One collective as a rank recorded it.
struct FlightCall {
  int group = 0;
  std::uint64_t seq = 0;
  std::string op, reduce_op, dtype, state;
  std::int64_t numel = 0;
};

// One rank's file.
struct FlightRecord {
  int rank = -1;
  int world_size = 0;
  std::string reason;             // "timeout", "failure", "SIGTERM", "SIGUSR1", "SIGSEGV", ...
  std::vector<FlightCall> calls;  // oldest first
};

// Parses a rank_R.json written by the dist library; nullopt, with `error` set, if the text is not
// one (an older format, a truncated file).
std::optional<FlightRecord> parse_flight_record(const std::string& text, std::string* error);

// How each of this machine's ranks ended: rank -> its waitpid() status (an exit code, or the
// signal that killed it). A rank that is not in it ended unseen.
using RankExits = std::map<int, int>;

// The diagnosis from the files in `dir`, one line each (without "ddprun: "), for the ranks that
// wrote one and for `expected_ranks` (this machine's ranks: one that wrote no file is named, with
// what is true of it given how it ended, from `exits`: it exited 0, it exited on an error of its
// own, or a signal killed it). Empty when `dir` holds no record at all.
std::vector<std::string> diagnose_flight(const std::string& dir,
                                         const std::vector<int>& expected_ranks,
                                         const RankExits& exits = {});

// Where this machine's ranks write their records.
struct FlightDir {
  std::string path;        // empty: no folder, no records
  bool temporary = false;  // ddprun made it under $TMPDIR, and removes it when there is no failure
};

// DIST_TRACE_DIR as the user exported it (the ranks inherit it); otherwise a new folder
// $TMPDIR/ddprun_flight_XXXXXX that ddprun exports to the ranks. A folder that cannot be made is
// a notice, not an error: the job runs without records.
FlightDir prepare_flight_dir();

// Between attempts (--max-restarts): when the attempt that failed left records, prints its
// diagnosis, then moves its records to DIR/attempt_K/, so that the next attempt writes into an
// empty folder and this one's are kept.
void report_flight_attempt(const FlightDir& dir, int attempt, const std::vector<int>& local_ranks,
                           const RankExits& exits = {});

// After the job: when it failed and records exist, prints "who was where" and the diagnosis,
// and names the folder. A temporary folder is removed when the job succeeded or left no record,
// unless it keeps the records of attempts that failed.
void report_flight(const FlightDir& dir, int exit_code, const std::vector<int>& local_ranks,
                   const RankExits& exits = {});

}  // namespace ddprun
