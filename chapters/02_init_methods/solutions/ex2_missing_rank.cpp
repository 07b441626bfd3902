// Chapter 02, exercise 2 — a world_size that is one too big: who never came?
//
// Every rank asks for world_size W+1 while only W processes exist. Nothing hangs: init waits until
// its timeout (here 2 s, --wait to change it) and then fails on every rank with a TimeoutError
// that names the rank that never joined, W. The rendezvous is a file:// path private to this job
// (its name drawn by rank 0 and broadcast over a first, correct group), so the failed attempt
// leaves no store behind on a port.
// Grade it: ./tutorial check 02-ex2        Run it: ./tutorial run 02-ex2 --solution
#include <dist/dist.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>

namespace {

// As in main.cpp: a file name no other job uses, drawn by rank 0 and broadcast.
std::string job_file() {
  std::random_device random;
  const std::int64_t drawn =
      ((std::int64_t{random()} << 20) ^ std::int64_t{random()}) & ((std::int64_t{1} << 52) - 1);
  dist::Tensor t = dist::full(1, dist::get_rank() == 0 ? static_cast<double>(drawn) : 0.0,
                              dist::kInt64, dist::get_device());
  dist::broadcast(t, 0);
  std::ostringstream name;
  name << "ch02_init_methods_ex2-" << std::hex << static_cast<std::int64_t>(t.item(0));
  return (std::filesystem::temp_directory_path() / name.str()).string();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch02_init_methods_ex2",
                  "Ask for one rank too many and read which rank the timeout names.");
    int wait_seconds = 2;
    cli.add_int("--wait", &wait_seconds, "seconds the wrong init waits for the missing rank", 1,
                600);
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::string path = job_file();
    dist::destroy_process_group();

    // The wrong init meets at the job's private file, as this rank, and gives up after
    // wait_seconds; every wait in this library has such a deadline.
    dist::InitOptions wrong = cli.init_options();
    wrong.init_method = "file://" + path;
    wrong.rank = rank;
    wrong.timeout = std::chrono::seconds(wait_seconds);

    // One rank too many: rank W never comes, so every rank fails when the timeout ends.
    wrong.world_size = world + 1;
    std::string reason = "init returned";
    try {
      dist::init_process_group(wrong);
      dist::destroy_process_group();
    } catch (const dist::TimeoutError& e) {
      reason = e.what();
      reason = reason.substr(0, reason.find(" at "));  // drop the job's private path
    }
    dist::out() << "world_size=" << world + 1 << " with " << world
                << (world == 1 ? " process: " : " processes: ") << reason;
    return dist::kExitOk;
  });
}
