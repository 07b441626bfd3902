// bench_collectives — how fast the collectives are, measured the way nccl-tests measures them.
//
// For each op (all_reduce, broadcast, all_gather, reduce_scatter) and each size from --min-bytes
// to --max-mib, doubling, every rank makes the same calls: a few warm-up calls, a barrier, then
// `iters` calls, each timed. The time of a row is the slowest rank's median call: on a shared,
// noisy machine a few calls stall for milliseconds, and a mean (nccl-tests' choice) would be
// mostly those stalls.
// After the timing, one more call on freshly filled inputs is checked element by element against
// its closed form, and the row reports how many elements were wrong (#wrong, which must be 0).
//
// Size is the whole buffer, as in nccl-tests: all_reduce and broadcast move `size` bytes;
// all_gather gathers `size` bytes in all (size / world_size from each rank); reduce_scatter
// reduces `size` bytes and leaves size / world_size on each rank. float32 throughout.
//
//   algbw = size / time
//   busbw = algbw * factor, the bandwidth each rank's link must carry: 2(W-1)/W for all_reduce,
//           (W-1)/W for all_gather and reduce_scatter, 1 for broadcast (bench/README.md).
//
// Run:  ddprun --standalone --nproc-per-node 2 build/release/bin/bench_collectives
// bench/torch_collectives.py is the same sweep on PyTorch's gloo backend; bench/run.py runs both.
#include <dist/dist.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using dist::Tensor;
using Clock = std::chrono::steady_clock;

struct Row {
  std::string op;
  std::int64_t bytes = 0, count = 0;
  int iters = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = 0;
};

double bus_factor(const std::string& op, int world) {
  if (op == "all_reduce") return 2.0 * (world - 1) / world;
  if (op == "broadcast") return 1.0;
  return static_cast<double>(world - 1) / world;  // all_gather, reduce_scatter
}

// Fewer calls for bigger sizes: about 64 MiB moved per row, at least 5 and at most 200 calls.
int iterations(std::int64_t bytes) {
  return static_cast<int>(std::clamp<std::int64_t>((std::int64_t{64} << 20) / bytes, 5, 200));
}

// One op, set up for one size: `fill` writes the inputs, `call` is the collective, `wrong`
// counts the elements that differ from the closed form after one call on filled inputs.
struct Op {
  std::function<void()> fill, call;
  std::function<std::int64_t()> wrong;
};

std::int64_t mismatches(const Tensor& t, const std::function<float(std::int64_t)>& expected) {
  const float* v = t.data_ptr<float>();
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) bad += v[i] != expected(i) ? 1 : 0;
  return bad;
}

// The inputs are small integers, exact in float32, so every check is an equality.
Op make_op(const std::string& name, std::int64_t count, int rank, int world, Tensor& a,
           std::vector<Tensor>& list, Tensor& b) {
  const std::int64_t part = count / world;
  const float w = static_cast<float>(world);
  if (name == "all_reduce") {
    a = Tensor(count, dist::kFloat32);
    auto fill = [&a, rank] {
      float* v = a.data_ptr<float>();
      for (std::int64_t i = 0; i < a.numel(); ++i) v[i] = static_cast<float>(rank + 1 + i % 7);
    };
    return {fill, [&a] { dist::all_reduce(a, dist::ReduceOp::SUM); },
            [&a, w] {
              return mismatches(a, [w](std::int64_t i) {
                return w * (w + 1) / 2 + w * static_cast<float>(i % 7);
              });
            }};
  }
  if (name == "broadcast") {
    a = Tensor(count, dist::kFloat32);
    auto fill = [&a, rank] {
      float* v = a.data_ptr<float>();
      for (std::int64_t i = 0; i < a.numel(); ++i) {
        v[i] = rank == 0 ? static_cast<float>(1 + i % 251) : -1.0F;
      }
    };
    return {fill, [&a] { dist::broadcast(a, 0); },
            [&a] {
              return mismatches(a, [](std::int64_t i) { return static_cast<float>(1 + i % 251); });
            }};
  }
  if (name == "all_gather") {
    a = Tensor(part, dist::kFloat32);
    auto fill = [&a, rank] {
      float* v = a.data_ptr<float>();
      for (std::int64_t i = 0; i < a.numel(); ++i) v[i] = static_cast<float>(rank * 1000 + i % 97);
    };
    return {fill, [&a, &list] { dist::all_gather(list, a); },
            [&list, world] {
              std::int64_t bad = list.size() == static_cast<std::size_t>(world) ? 0 : 1;
              for (int r = 0; r < world && bad == 0; ++r) {
                bad += mismatches(list[static_cast<std::size_t>(r)], [r](std::int64_t i) {
                  return static_cast<float>(r * 1000 + i % 97);
                });
              }
              return bad;
            }};
  }
  // reduce_scatter: chunk c of rank q holds (q + 1)(c + 1) + i % 5; rank r keeps chunk r summed.
  list.assign(static_cast<std::size_t>(world), Tensor());
  for (Tensor& t : list) t = Tensor(part, dist::kFloat32);
  b = Tensor(part, dist::kFloat32);
  auto fill = [&list, rank] {
    for (std::size_t c = 0; c < list.size(); ++c) {
      float* v = list[c].data_ptr<float>();
      for (std::int64_t i = 0; i < list[c].numel(); ++i) {
        v[i] = static_cast<float>((rank + 1) * static_cast<int>(c + 1) + i % 5);
      }
    }
  };
  return {fill, [&b, &list] { dist::reduce_scatter(b, list, dist::ReduceOp::SUM); },
          [&b, rank, w] {
            return mismatches(b, [rank, w](std::int64_t i) {
              return static_cast<float>(rank + 1) * w * (w + 1) / 2 + w * static_cast<float>(i % 5);
            });
          }};
}

Row measure(const std::string& name, std::int64_t bytes, int rank, int world, int iters) {
  Row row{name, bytes, bytes / 4, iters > 0 ? iters : iterations(bytes)};
  Tensor a, b;
  std::vector<Tensor> list;
  Op op = make_op(name, row.count, rank, world, a, list, b);
  op.fill();
  for (int i = 0; i < std::max(1, row.iters / 10); ++i) op.call();  // warm-up: connections, pages
  dist::barrier();
  std::vector<double> us(static_cast<std::size_t>(row.iters));
  for (double& t : us) {
    const auto start = Clock::now();
    op.call();
    t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  std::nth_element(us.begin(), us.begin() + row.iters / 2, us.end());
  const double mine = us[static_cast<std::size_t>(row.iters / 2)];  // the median call
  Tensor slowest = Tensor::full(1, mine, dist::kFloat64);
  dist::all_reduce(slowest, dist::ReduceOp::MAX);
  row.time_us = slowest.item(0);
  row.algbw = static_cast<double>(bytes) / (row.time_us * 1e3);  // bytes per ns = GB/s
  row.busbw = row.algbw * bus_factor(name, world);
  op.fill();
  op.call();
  Tensor wrong = Tensor::full(1, static_cast<double>(op.wrong()), dist::kInt64);
  dist::all_reduce(wrong, dist::ReduceOp::SUM);
  row.wrong = static_cast<std::int64_t>(wrong.item(0));
  return row;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

std::string json_row(const Row& r, int world) {
  char line[400];
  std::snprintf(line, sizeof line,
                "{\"impl\": \"dist\", \"op\": \"%s\", \"world\": %d, \"bytes\": %lld, \"count\": "
                "%lld, \"iters\": %d, \"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, "
                "\"wrong\": %lld}\n",
                r.op.c_str(), world, static_cast<long long>(r.bytes),
                static_cast<long long>(r.count), r.iters, r.time_us, r.algbw, r.busbw,
                static_cast<long long>(r.wrong));
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    std::string ops = "all_reduce,broadcast,all_gather,reduce_scatter", json;
    int min_bytes = 4, max_mib = 256, iters = 0;
    dist::Cli cli("bench_collectives",
                  "Times all_reduce, broadcast, all_gather and reduce_scatter from --min-bytes to "
                  "--max-mib (doubling), checks every result, and prints nccl-tests-style rows.");
    cli.add_string("--ops", &ops, "comma-separated ops to time");
    cli.add_int("--min-bytes", &min_bytes, "smallest size in bytes", 4, 1 << 30);
    cli.add_int("--max-mib", &max_mib, "largest size in MiB", 1, 1024);
    cli.add_int("--iters", &iters, "timed calls per row; 0: by size, 5 to 200 (about 64 MiB moved)",
                0, 100000);
    cli.add_string("--json", &json, "also write one JSON object per row to this file (rank 0)");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    for (const std::string& op : split_list(ops)) {
      if (op != "all_reduce" && op != "broadcast" && op != "all_gather" && op != "reduce_scatter") {
        throw dist::ConfigError("--ops: unknown op '" + op +
                                "' (all_reduce, broadcast, all_gather, reduce_scatter)");
      }
    }

    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    DIST_CHECK(!dist::get_device().is_cuda(), "bench_collectives measures host tensors (gloo)");
    dist::out0() << "bench_collectives: " << world << " ranks, backend " << dist::get_backend()
                 << ", float32, sizes " << min_bytes << " B to " << max_mib << " MiB";
    std::string rows;
    std::int64_t total_wrong = 0;
    for (const std::string& op : split_list(ops)) {
      dist::out0() << "";
      dist::out0() << op << "  (busbw factor " << bus_factor(op, world) << ")";
      dist::out0() << "        size       count   type  iters     time(us)  algbw(GB/s)  "
                      "busbw(GB/s)  #wrong";
      // all_gather and reduce_scatter split the buffer: at least one element per rank.
      const std::int64_t smallest =
          op == "all_reduce" || op == "broadcast" ? min_bytes : std::max(min_bytes, 4 * world);
      for (std::int64_t bytes = smallest; bytes <= (std::int64_t{max_mib} << 20); bytes *= 2) {
        if (op != "all_reduce" && op != "broadcast" && (bytes / 4) % world != 0) continue;
        const Row r = measure(op, bytes, rank, world, iters);
        total_wrong += r.wrong;
        char line[200];
        std::snprintf(line, sizeof line, "%12lld %11lld  float %6d %12.2f %12.3f %12.3f  %6lld",
                      static_cast<long long>(r.bytes), static_cast<long long>(r.count), r.iters,
                      r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong));
        dist::out0() << line;
        rows += json_row(r, world);
      }
    }
    if (rank == 0 && !json.empty()) dist::write_file_atomically(json, rows);
    dist::destroy_process_group();
    if (total_wrong != 0) {
      dist::out0() << "MISMATCH: " << total_wrong << " wrong elements (see #wrong)";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: every result matched its closed form (#wrong = 0 in every row)";
    return dist::kExitOk;
  });
}
