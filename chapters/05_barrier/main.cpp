// Chapter 05 — barrier: make the ranks wait for each other, and let rank 0 go first.
//
// Ranks run at their own pace; only a collective makes the fast ones wait for the slow. Post C
// uses that on purpose: with barrier(), rank 0 does A while the others wait, and only then do they
// do B; its torch_distributed_zero_first wraps the pattern so that one rank downloads the data set
// while the others wait, and then every rank reads it. This chapter runs both, proves the order
// from clock readings rather than from the order of printed lines, and with --no-barrier shows the
// race that the barriers prevent: B starts before A ends, and every rank downloads.
//
// You will learn: barrier() as "nobody passes until everyone has arrived"; ordering ranks with it;
// dist::zero_first, the rank-0-first call, and why rank 0's failure inside it must reach the
// others; writing a file atomically (temporary file + rename) so a reader never sees half of it.
// Builds on: chapter 04 (collectives; a barrier is a collective that carries no data).
//
// Run:   ./tutorial run 05          (or: ddprun --standalone --nproc-per-node 2 ch05_barrier)
//        ./tutorial run 05 -- --no-barrier      (the same without the barriers: the race)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] A: rank 0 works for 200 ms while the other ranks wait at the barrier
//   [rank 1/2] B: starts
//   [rank 0/2] order: every B started after A ended (clock readings from every rank)
//   [rank 0/2] data set: not there, downloading it (200 ms)
//   [rank 1/2] data set: found, nothing to download
//   [rank 0/2] OK: A ended before every B began, 1 download for 2 ranks, every rank read 1000 ...
#include <dist/dist.h>
#include <dist/zero_first.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace {

namespace fs = std::filesystem;
using ch05::DataSet;
using dist::Tensor;

// Post C's do_A: slow work that the other ranks must not overtake. Returns when it ended.
std::int64_t do_A(int work_ms, bool use_barrier) {
  dist::out() << "A: rank 0 works for " << work_ms << " ms"
              << (use_barrier ? " while the other ranks wait at the barrier" : ", nobody waits");
  std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
  dist::out() << "A: done";
  return ch05::now_ns();
}

// The proof of the order: every rank sends one clock reading (rank 0: when A ended; the others:
// when B began) and each rank counts the Bs that began before A ended. Clocks of different
// machines are not comparable, so across machines it answers "not checked" (nullopt).
std::optional<int> count_early_bs(std::int64_t my_reading, dist::Device device) {
  std::vector<Tensor> readings;
  dist::all_gather(readings, Tensor::from<std::int64_t>({my_reading}, device));
  const dist::DistInfo info = dist::get_dist_info();
  if (info.local_world_size != info.world_size) return std::nullopt;
  const auto reading = [&](std::size_t r) { return readings[r].to_vector<std::int64_t>()[0]; };
  int early = 0;
  for (std::size_t r = 1; r < readings.size(); ++r) early += reading(r) < reading(0) ? 1 : 0;
  return early;
}

// The "download": network time, then the records 1..n, one per line, written atomically so that
// a rank reading at the same moment finds no file or the whole file, never half of one.
void download(const fs::path& file, int records, int download_ms) {
  dist::out() << "data set: not there, downloading it (" << download_ms << " ms)";
  std::this_thread::sleep_for(std::chrono::milliseconds(download_ms));
  std::string text;
  for (int i = 1; i <= records; ++i) text += std::to_string(i) + "\n";
  fs::create_directories(file.parent_path());
  dist::write_file_atomically(file.string(), text);
}

// Post C's   with torch_distributed_zero_first(rank):
//                  if not check_if_dataset_exist(): download_dataset()
//                  load_dataset()
// dist::zero_first runs the lambda on rank 0 while the others wait, then on the others, which
// find the file complete. If rank 0's lambda throws, the others are told at once (they throw too).
// Without it every rank looks at once, sees nothing, and downloads.
DataSet prepare_data_set(const fs::path& file, int records, int download_ms, bool use_barrier) {
  const auto check_download_load = [&] {
    DataSet data;
    if (!fs::exists(file)) {
      download(file, records, download_ms);
      data.downloaded = true;
    } else {
      dist::out() << "data set: found, nothing to download";
    }
    return ch05::load(file, data);
  };
  if (!use_barrier) return check_download_load();  // the race: every rank at once
  return dist::zero_first(check_download_load);
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help, and the lesson's own)
    dist::Cli cli("ch05_barrier",
                  "Rank 0 does A while the others wait, then they do B; rank 0 downloads a data "
                  "set while the others wait, then every rank reads it.");
    bool use_barrier = true, keep = false;
    int work_ms = 200, download_ms = 200, records = 1000;
    std::string data_dir;
    cli.add_flag("--barrier", &use_barrier, "use the barriers (--no-barrier: show the race)",
                 "--no-barrier");
    cli.add_int("--work-ms", &work_ms, "how long A takes, in ms", 0, 10000);
    cli.add_int("--download-ms", &download_ms, "how long the download takes, in ms", 0, 10000);
    cli.add_int("--records", &records, "records in the data set", 1, 1000000);
    cli.add_string("--data-dir", &data_dir,
                   "the data set's directory; unset: /tmp/dist-ch05-UID-portPORT, one per job");
    cli.add_flag("--keep", &keep,
                 "keep the data set afterwards: the next run with the same --data-dir finds it");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: join the group
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    if (data_dir.empty()) data_dir = ch05::default_data_dir();
    const fs::path file = fs::path(data_dir) / "dataset.txt";
    dist::out0() << (use_barrier ? "with the barriers" : "without the barriers (--no-barrier)")
                 << ": A takes " << work_ms << " ms, the download " << download_ms << " ms, "
                 << records << " records";

    // ---- Step 2: rank 0 does A while the others wait at the barrier; then they do B.
    // Every rank calls barrier() once, rank 0 after A and the others before B: nobody leaves it
    // until all have entered it, so no B can start before A has ended.
    std::int64_t reading = 0;
    if (rank == 0) {
      reading = do_A(work_ms, use_barrier);
      if (use_barrier) dist::barrier();
    } else {
      if (use_barrier) dist::barrier();
      reading = ch05::now_ns();
      dist::out() << "B: starts";
    }

    // ---- Step 3: prove the order with the clock readings, not with the printed lines
    const std::optional<int> early_bs = count_early_bs(reading, device);
    if (world == 1) {
      dist::out0() << "order: only 1 rank, so there is no B to order";
    } else if (!early_bs) {
      dist::out0() << "order: not checked (ranks on different machines read different clocks)";
    } else if (*early_bs == 0) {
      dist::out0() << "order: every B started after A ended (clock readings from every rank)";
    } else {
      dist::out0() << "order: B started before A ended on " << *early_bs << " of the " << world - 1
                   << " other rank" << (world == 2 ? "" : "s");
    }

    // ---- Step 4: rank 0 first: it downloads the data set while the others wait, then all read
    const DataSet data = prepare_data_set(file, records, download_ms, use_barrier);

    // ---- Step 5: one verdict. Each rank adds (downloaded?, read everything?); the sums say how
    // many downloads the job made and how many ranks read the whole data set.
    const std::int64_t want_sum = std::int64_t{records} * (records + 1) / 2;
    const bool read_all = data.records == records && data.sum == want_sum;
    Tensor tally = Tensor::from<std::int64_t>({data.downloaded ? 1 : 0, read_all ? 1 : 0}, device);
    dist::all_reduce(tally, dist::ReduceOp::SUM);
    const auto downloads = static_cast<int>(tally.item(0));
    const bool all_read = static_cast<int>(tally.item(1)) == world;

    // ---- Step 6: clean up. Every rank has read the file before it joined the all_reduce above,
    // so rank 0 may delete it now without pulling it from under a slow reader.
    if (rank == 0 && !keep) {
      fs::remove(file);
      std::error_code not_empty;  // a --data-dir with other files in it stays
      fs::remove(file.parent_path(), not_empty);
      dist::out0() << "data set: removed (--keep with a --data-dir keeps it for the next run)";
    } else if (rank == 0) {
      dist::out0() << "data set: kept in " << file.string();
    }
    dist::destroy_process_group();

    // ---- Step 7: check against what the lesson claims. With the barriers: no early B, at most
    // one download (none if an earlier --keep run left the file), every rank read every record.
    // Without them nothing orders the ranks, so the race is reported, not judged (it needs time
    // to lose: with --work-ms 0 the ranks may well run in order); what must still hold is that
    // the atomic writes gave every rank a whole file.
    const std::string reads = "every rank read " + std::to_string(records) + " records";
    const std::string counts = std::to_string(downloads) + " download" +
                               (downloads == 1 ? "" : "s") + " for " + std::to_string(world) +
                               " rank" + (world == 1 ? "" : "s");
    const std::string early = std::to_string(early_bs.value_or(0)) + " of " +
                              std::to_string(world - 1) + (early_bs ? "" : " (not checked)");
    if (use_barrier && all_read && downloads <= 1 && early_bs.value_or(0) == 0) {
      dist::out0() << "OK: A ended before every B began, " << counts << ", " << reads;
      return dist::kExitOk;
    }
    if (!use_barrier && all_read && world == 1) {
      dist::out0() << "OK: with 1 rank nothing can race; run with --nproc 2 or more";
      return dist::kExitOk;
    }
    if (!use_barrier && all_read) {
      const bool race_showed = downloads > 1 && early_bs.value_or(1) > 0;
      dist::out0() << "OK: without the barriers "
                   << (race_showed ? "the race showed"
                                   : "nothing ordered the ranks, though this "
                                     "run did not show the whole race")
                   << ": B began before A ended on " << early << ", " << counts
                   << "; the atomic writes still gave every rank a whole file";
      return dist::kExitOk;
    }
    dist::out0() << "MISMATCH: " << counts << ", early Bs: " << early
                 << ", every rank read everything: " << (all_read ? "yes" : "no");
    return dist::kExitFailure;
  });
}
