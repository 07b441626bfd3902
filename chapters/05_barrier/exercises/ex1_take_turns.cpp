// Chapter 05, exercise 1 — take turns: ranks append to one log file in rank order.
//
// Every rank appends one line to a shared log. Rank r is ready to write after (W - 1 - r) * 100 ms
// of work, so the last rank is ready first. With only barrier(), make the lines land in rank
// order: rank 0's first, then rank 1's, and so on. The proof is the file: rank 0 reads it back.
// Grade it: ./tutorial check 05-ex1        Run it: ./tutorial run 05-ex1
#include <dist/dist.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace {

namespace fs = std::filesystem;

// The same on every rank of one job, without talking (see chapter 05's default_data_dir).
fs::path job_log() {
  const dist::DistInfo info = dist::get_dist_info();
  const std::string job =
      info.master_port > 0 ? "port" + std::to_string(info.master_port)
                           : "store" + std::to_string(std::hash<std::string>{}(info.init_method));
  return fs::path("/tmp") / ("dist-ch05-ex1-" + std::to_string(::getuid()) + "-" + job + ".log");
}

// One line, one write(): with O_APPEND the kernel puts it at the end of the file in one piece.
void append_line(const fs::path& log, int rank) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  DIST_CHECK(fd >= 0, "cannot open " + log.string() + " for appending");
  const std::string text = "rank " + std::to_string(rank) + "\n";
  const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  DIST_CHECK(whole, "could not append to " + log.string());
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch05_barrier_ex1", "Ranks append to one log file in rank order, with barriers.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const fs::path log = job_log();

    // A fresh log: rank 0 removes a leftover before anyone writes (the barrier orders that).
    if (rank == 0) fs::remove(log);
    dist::barrier();
    // Work of uneven length: the last rank is ready first, rank 0 last.
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * (world - 1 - rank)));

    // TODO(exercise): append this rank's line in its turn, rank 0 first, using only
    // dist::barrier(). Every rank must call barrier() the same number of times, or it hangs.
    append_line(log, rank);  // whoever is ready first writes first: replace it

    dist::barrier();  // every line is written before rank 0 reads the log
    if (rank == 0) {
      std::ifstream in(log);
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        dist::out() << "log line " << number++ << ": " << line;
      }
      fs::remove(log);
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
