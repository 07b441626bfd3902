// Per-rank logs: torchrun's --log-dir, --redirects and --tee.
//
// With N ranks on one terminal, their lines interleave; a log file per rank keeps each rank's
// output whole and in order, for reading after the run or for `tail -f` during it. The layout is
// torchrun's (torch/distributed/elastic/agent/server/local_elastic_agent.py, and
// start_processes in torch/distributed/elastic/multiprocessing/__init__.py):
//
//   LOG_DIR/none_XXXXXX/attempt_0/<local_rank>/stdout.log
//                                             /stderr.log
//
// "none" is the run id (TORCHELASTIC_RUN_ID) and XXXXXX makes the folder new for every run, so
// one LOG_DIR serves many runs; attempt_K is the restart count (TORCHELASTIC_RESTART_COUNT): a
// job restarted by --max-restarts writes attempt_0, attempt_1, ... side by side. A redirected
// stream goes to its file only; a teed one goes to its file and is also copied, line by line, to
// ddprun's own stdout or stderr (as torchrun does it: the rank writes the file, and ddprun follows
// the file). The rank writes the file itself, so the file holds every byte the rank wrote, even
// when the rank crashes, and even when ddprun is killed.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "options.h"

namespace ddprun {

// The files one rank's stdout and stderr are to be, in the rank's process; -1 where the rank
// keeps ddprun's own (the terminal).
struct ChildStreams {
  int out = -1;
  int err = -1;
};

class RankLogs {
 public:
  // Makes the folders when --log-dir, --redirects or --tee asks for logs: LOG_DIR (a new folder
  // under $TMPDIR when only --redirects or --tee is given, as torchrun does), then
  // none_XXXXXX/attempt_0/<local_rank>/ for every local rank. Throws UsageError naming the folder
  // that cannot be made (ddprun exits 2 before any rank starts).
  explicit RankLogs(const Options& options);
  ~RankLogs();
  RankLogs(const RankLogs&) = delete;
  RankLogs& operator=(const RankLogs&) = delete;

  bool enabled() const { return !attempt_dir_.empty(); }

  // Makes attempt_K/<local_rank>/ for every local rank, for the ranks of attempt K (the
  // constructor makes attempt_0); the files of the attempt before are copied to the end (--tee)
  // and closed. Throws UsageError naming the folder that cannot be made.
  void begin_attempt(int attempt);
  const std::string& attempt_dir() const { return attempt_dir_; }

  // What goes where, for ddprun's start-up notice: "stdout.log and stderr.log of every rank
  // (also shown here)". Empty when no stream goes to a file.
  std::string description() const;

  // Opens (creates, empty) the files of local rank `local_rank`, close-on-exec. The caller hands
  // them to the rank's process, then calls close_parent_copies. Throws std::system_error.
  ChildStreams open_files(int local_rank);
  static void close_parent_copies(ChildStreams& streams);

  // From now on, copies the new complete lines of every teed file to ddprun's stdout or stderr,
  // each batch with one write(), so that a teed line is never torn by another rank's line.
  void start_tee();

  // Copies what the ranks have written so far, now: called before ddprun reports a failure, so
  // that a failed rank's last lines come before ddprun's notice. With `ranks_done`, the last
  // line of a file that does not end in a newline is shown too (with one added).
  void catch_up(bool ranks_done);

  // Every rank has exited: copies the rest and stops the tee thread.
  void finish();

 private:
  // One teed file, followed from where the copying got to.
  struct Follow {
    int fd = -1;       // the file, opened for reading
    int console = -1;  // STDOUT_FILENO or STDERR_FILENO
    std::string partial;
  };

  void copy_new(Follow& follow, bool ranks_done);
  void tee_loop();

  int nproc_ = 0;
  StdSetting redirects_;
  StdSetting tee_;
  std::string run_dir_;  // LOG_DIR/none_XXXXXX
  std::string attempt_dir_;
  std::vector<Follow> follows_;
  std::mutex copy_mutex_;  // one copier at a time: the tee thread, or catch_up
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  bool console_gone_[3] = {};  // by fd: ddprun's stdout or stderr was closed; stop copying to it
  std::thread thread_;
};

}  // namespace ddprun
