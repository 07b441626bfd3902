// Chapter 05, exercise 1 — take turns: ranks write to one log file in rank order.
//
// The exercise: "Make every rank append one line to a shared log, rank 0 first, then rank 1, and
// so on, using only barrier(). Then prove the order from the file, not from the terminal."
//
// The solution: W turns; in turn t only rank t writes, and every rank then meets at a barrier, so
// rank t+1 cannot write before rank t has finished. That is post C's "A, then B" repeated W
// times. The file is the proof: each line is appended with one write() (O_APPEND), and rank 0 reads
// it back at the end and checks that line t says "turn t: rank t". Without the barriers the lines
// land in whatever order the ranks happen to run.
//
// Run: ddprun --standalone --nproc-per-node 3 ch05_barrier_ex1
#include <dist/dist.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// The same on every rank of one job (see chapter 05's default_data_dir).
fs::path job_log() {
  const dist::DistInfo info = dist::get_dist_info();
  const std::string job =
      info.master_port > 0 ? "port" + std::to_string(info.master_port)
                           : "store" + std::to_string(std::hash<std::string>{}(info.init_method));
  return fs::path("/tmp") / ("dist-ch05-ex1-" + std::to_string(::getuid()) + "-" + job + ".log");
}

// One line, one write(): with O_APPEND the kernel puts it at the end of the file in one piece.
void append_line(const fs::path& log, const std::string& line) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  DIST_CHECK(fd >= 0, "cannot open " + log.string() + " for appending");
  const std::string text = line + "\n";
  const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  DIST_CHECK(whole, "could not append to " + log.string());
}

std::vector<std::string> read_lines(const fs::path& log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch05_barrier_ex1", "Ranks append to one log file in rank order, with barriers.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const fs::path log = job_log();

    // A fresh log: rank 0 removes a leftover before anyone writes (a barrier orders that too).
    if (rank == 0) fs::remove(log);
    dist::barrier();

    // W turns. Every rank calls barrier() once per turn, writer or not, so the calls match.
    for (int turn = 0; turn < world; ++turn) {
      if (turn == rank) {
        append_line(log, "turn " + std::to_string(turn) + ": rank " + std::to_string(rank));
        dist::out() << "wrote my line in turn " << turn;
      }
      dist::barrier();
    }

    // The proof, from the file: line t must be rank t's.
    bool ok = true;
    if (rank == 0) {
      const std::vector<std::string> lines = read_lines(log);
      ok = static_cast<int>(lines.size()) == world;
      for (int t = 0; ok && t < world; ++t) {
        ok = lines[static_cast<std::size_t>(t)] ==
             "turn " + std::to_string(t) + ": rank " + std::to_string(t);
      }
      fs::remove(log);
    }
    dist::destroy_process_group();
    if (!ok) {
      dist::out0() << "MISMATCH: the log's lines are not in rank order";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: the log holds " << world << " lines, in rank order";
    return dist::kExitOk;
  });
}
