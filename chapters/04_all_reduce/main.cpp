// Chapter 04 — all_reduce: every rank ends with the same sum (or mean, min, max, product).
//
// all_reduce is the one collective that data-parallel training cannot do without: after each
// backward pass, every rank holds gradients computed on its own shard, and all_reduce turns them
// into the same average on every rank. This chapter runs post C's example, tensor =
// arange(world_size) + 1 + world_size * rank, through every reduce op, computes the mean the two
// ways PyTorch code does it, and then does a SUM by hand with send/recv, the way a ring
// all-reduce moves the data, to show what the library does for you.
//
// You will learn: all_reduce with SUM, MIN, MAX, PRODUCT and AVG; "reduce-mean" (sum, then divide
// by world_size); why integer tensors need a float copy for a mean; what each rank sends in a ring.
// Builds on: chapter 01 (init, rank, world_size) and chapter 02 (how ranks meet).
//
// Run:   ./tutorial run 04            (or: ddprun --standalone --nproc-per-node 2 ch04_all_reduce)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] tensor:  tensor([1, 2])
//   [rank 1/2] tensor:  tensor([3, 4])
//   [rank 0/2] SUM:     tensor([4, 6])
//   [rank 0/2] OK: every result matches its closed form on every rank
#include <dist/dist.h>

#include <cstdint>
#include <string>

namespace {

using dist::ReduceOp;
using dist::Tensor;

// Post C's tensor: rank r holds [1 + W r, 2 + W r, ..., W + W r]. (Post C writes
// args.local_rank where it means the global rank: on one machine they agree, on two they do not.)
// --8<-- [start:example_tensor]
Tensor example_tensor(std::int64_t rank, std::int64_t world, dist::Device device) {
  return dist::arange(world, dist::kInt64, device) + 1 + world * rank;
}
// --8<-- [end:example_tensor]

// What each op must give, element i, summing or multiplying i + 1 + W r over the ranks r.
Tensor closed_form(ReduceOp op, std::int64_t world) {
  Tensor expected(world, dist::kInt64);
  for (std::int64_t i = 0; i < world; ++i) {
    double value = op == ReduceOp::PRODUCT ? 1 : 0;
    for (std::int64_t r = 0; r < world; ++r) {
      const double x = static_cast<double>(i + 1 + world * r);
      if (op == ReduceOp::SUM) value += x;
      if (op == ReduceOp::PRODUCT) value *= x;
    }
    if (op == ReduceOp::MIN) value = static_cast<double>(i + 1);
    if (op == ReduceOp::MAX) value = static_cast<double>(i + 1 + world * (world - 1));
    expected.set(i, value);
  }
  return expected;
}

// "SUM:     ": the name and a colon, padded so that the tensors line up.
std::string label(const std::string& name) {
  std::string text = name + ":";
  text.resize(9, ' ');
  return text;
}

// --8<-- [start:reduce]
// The result of one op, by the library: every rank must call this with the same op, or the
// collective waits for a partner that never comes (until --timeout).
Tensor reduce(const Tensor& input, ReduceOp op) {
  Tensor t = input;  // all_reduce works in place; keep the input for the next op
  dist::all_reduce(t, op);
  return t;
}
// --8<-- [end:reduce]

// A SUM all-reduce by hand, as a ring: the tensor is cut in W chunks; in W-1 reduce-scatter
// steps each rank passes one chunk to its right neighbour and adds the one from its left, so
// rank r ends owning the full sum of chunk r+1; in W-1 all-gather steps the owned sums travel
// round the ring. Each rank sends 2(W-1) chunks of 1/W of the tensor, whatever W is: that is why
// a ring scales. Even ranks send first and odd ranks receive first, so no rank waits on a
// neighbour that is also waiting.
// --8<-- [start:ring_all_reduce]
Tensor ring_all_reduce(Tensor t, int rank, int world) {
  const std::int64_t chunk = t.numel() / world;  // post C's tensor has world elements
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  const auto index = [&](int c) { return ((c % world) + world) % world; };
  for (int phase = 0; phase < 2; ++phase) {
    for (int step = 0; step < world - 1; ++step) {
      const int out = index(phase == 0 ? rank - step : rank + 1 - step);
      const int in = index(phase == 0 ? rank - step - 1 : rank - step);
      Tensor received(chunk, t.dtype(), t.device());
      const Tensor sent = t.slice(out * chunk, chunk);
      if (rank % 2 == 0) dist::send(sent, right);
      dist::recv(received, left);
      if (rank % 2 != 0) dist::send(sent, right);
      if (phase == 0) received += t.slice(in * chunk, chunk);  // reduce: add our own part
      t.assign_slice(in * chunk, received);
    }
  }
  return t;
}
// --8<-- [end:ring_all_reduce]

// Rank 0 draws what the ring moves: who sends which chunk at each step.
void draw_ring(int world) {
  if (world == 1) {
    dist::out0() << "ring all-reduce on 1 rank: nothing to send";
    return;
  }
  dist::out0() << "ring all-reduce on " << world << " ranks, the tensor cut in " << world
               << " chunks c0..c" << world - 1 << ":";
  for (int phase = 0; phase < 2; ++phase) {
    for (int step = 0; step < world - 1; ++step) {
      std::string moves;
      for (int r = 0; r < world; ++r) {
        const int c = (((phase == 0 ? r - step : r + 1 - step) % world) + world) % world;
        moves += (r ? " | " : "") + std::to_string(r) + "->" + std::to_string((r + 1) % world) +
                 " c" + std::to_string(c);
      }
      dist::out0() << "  " << (phase == 0 ? "reduce-scatter" : "all-gather    ") << " step "
                   << step + 1 << ": " << moves;
    }
  }
  dist::out0() << "  each rank sent " << 2 * (world - 1) << " chunks of 1/" << world
               << " of the tensor";
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help)
    dist::Cli cli("ch04_all_reduce",
                  "All-reduce post C's tensor with SUM, the two kinds of mean, MIN, MAX and "
                  "PRODUCT, then a SUM by hand around a ring.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: join the group; tensors live where the backend works (GPU for nccl)
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    const Tensor tensor = example_tensor(rank, world, device);
    dist::out() << label("tensor") << tensor;

    // --8<-- [start:step2_ops]
    // ---- Step 2: SUM, MIN, MAX, PRODUCT: the same answer on every rank
    bool ok = true;
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::PRODUCT}) {
      const Tensor result = reduce(tensor, op);
      dist::out() << label(dist::reduce_op_name(op)) << result;
      ok = ok && result.cpu().equal(closed_form(op, world));
    }
    // --8<-- [end:step2_ops]

    // --8<-- [start:step3_mean]
    // ---- Step 3: the mean. Post C sums, then divides by world_size. An int64 tensor cannot
    // hold 2.5, so the mean starts from a float copy (torch refuses int_tensor /= 2 too).
    Tensor mean = reduce(tensor.to(dist::kFloat32), ReduceOp::SUM);
    mean /= static_cast<std::int64_t>(world);
    dist::out() << label("mean") << mean << "  (SUM, then / world_size)";
    const Tensor avg = reduce(tensor.to(dist::kFloat32), ReduceOp::AVG);  // one call does both
    dist::out() << label("AVG") << avg;
    const Tensor expected_mean = closed_form(ReduceOp::SUM, world).to(dist::kFloat32) / world;
    ok = ok && mean.cpu().equal(expected_mean) && avg.cpu().equal(expected_mean);
    // --8<-- [end:step3_mean]

    // ---- Step 4: the same SUM by hand, around a ring of send/recv
    draw_ring(world);
    const Tensor ring = ring_all_reduce(tensor, rank, world);
    dist::out() << label("ring") << ring << "  (send/recv by hand)";
    ok = ok && ring.cpu().equal(closed_form(ReduceOp::SUM, world));

    // ---- Step 5: one verdict for the job: the MIN over ranks of "my results were right"
    // (dist::all_ranks_ok is chapter 01's all_reduce(MIN) of a 0/1 flag)
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: some rank's result differs from its closed form (see above)";
      // Only rank 0 fails the job: it prints the verdict, and a rank that exited 1 first would make
      // ddprun stop rank 0 before its MISMATCH line is out.
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: every result matches its closed form on every rank";
    return dist::kExitOk;
  });
}
