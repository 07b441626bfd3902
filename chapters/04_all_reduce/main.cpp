// Chapter 04 — Collectives: all_reduce and its family.
//
// Data-parallel training cannot do without all_reduce: after each backward pass every rank holds
// gradients of its own shard, and all_reduce leaves the same sum on every rank. Its family moves
// data in the other shapes a job needs: broadcast (one rank's tensor to all: the first weights),
// all_gather (everyone's tensor to everyone), reduce_scatter (each rank one slice of the sum),
// gather and scatter (to and from one rank). This chapter runs post C's example tensor through
// each of them, checks every result against a closed form at any world_size, starts one
// all_reduce with async_op and works while it runs, and ends with a SUM done by hand around a
// ring of send/recv, to show what the library moves for you.
//
// You will learn: all_reduce with SUM, MIN, MAX, PRODUCT and AVG; the mean, and why an integer
// tensor needs a float copy for it; broadcast, all_gather, reduce_scatter, gather and scatter;
// async_op and wait(); what each rank sends in a ring; where the local rank comes from.
// Builds on: chapter 01 (init, rank, world_size) and chapter 02 (how ranks meet).
//
// Run:   ./tutorial run 04            (or: ddprun --standalone --nproc-per-node 2 ch04_all_reduce)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] tensor:          tensor([1, 2])
//   [rank 1/2] tensor:          tensor([3, 4])
//   [rank 0/2] SUM:             tensor([4, 6])
//   [rank 0/2] OK: every result matches its closed form on every rank
#include <dist/dist.h>

#include <cstdint>
#include <vector>

#include "support.h"

namespace {

using ch04::label;
using dist::ReduceOp;
using dist::Tensor;

// Post C's tensor: rank r holds [1 + W r, 2 + W r, ..., W + W r]. (Post C writes
// args.local_rank where it means the global rank: on one machine they agree, on two they do not.)
Tensor example_tensor(std::int64_t rank, std::int64_t world, dist::Device device) {
  return dist::arange(world, dist::kInt64, device) + 1 + world * rank;
}

// What all_reduce must give, element i, summing or multiplying i + 1 + W r over the ranks r. The
// product outgrows int64 from 11 ranks on; int64 arithmetic then wraps modulo 2^64, in torch as in
// this library, so the closed form wraps too (unsigned arithmetic, where wrapping is defined).
Tensor closed_form(ReduceOp op, std::int64_t world) {
  std::vector<std::int64_t> expected;
  for (std::int64_t i = 0; i < world; ++i) {
    std::int64_t sum = 0;
    std::uint64_t product = 1;
    for (std::int64_t r = 0; r < world; ++r) {
      sum += i + 1 + world * r;
      product *= static_cast<std::uint64_t>(i + 1 + world * r);
    }
    if (op == ReduceOp::SUM) expected.push_back(sum);
    if (op == ReduceOp::PRODUCT) expected.push_back(static_cast<std::int64_t>(product));
    if (op == ReduceOp::MIN) expected.push_back(i + 1);
    if (op == ReduceOp::MAX) expected.push_back(i + 1 + world * (world - 1));
  }
  return Tensor::from(expected);
}

// Every rank's tensor, in rank order: what all_gather gives every rank and gather gives one.
std::vector<Tensor> every_rank_tensor(std::int64_t world) {
  std::vector<Tensor> all;
  for (std::int64_t r = 0; r < world; ++r) all.push_back(example_tensor(r, world, {}));
  return all;
}

// The result of one op, by the library: every rank must call this with the same op, or the
// collective waits for a partner that never comes (until --timeout).
Tensor reduce(const Tensor& input, ReduceOp op) {
  Tensor t = input;  // all_reduce works in place; keep the input for the next op
  dist::all_reduce(t, op);
  return t;
}

// A SUM all-reduce by hand, as a ring: the tensor is cut in W chunks; in W-1 reduce-scatter
// steps each rank passes one chunk to its right neighbour and adds the one from its left, so
// rank r ends owning the full sum of chunk r+1; in W-1 all-gather steps the owned sums travel
// round the ring. Each rank sends 2(W-1) chunks of 1/W of the tensor, whatever W is: that is why
// a ring scales. Even ranks send first and odd ranks receive first, so no rank waits on a
// neighbour that is also waiting.
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

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help), and the local rank as
    // python -m torch.distributed.launch passes it, in either spelling, as the robust argparse
    // line add_argument("--local-rank", "--local_rank", type=int) accepts it
    dist::Cli cli("ch04_all_reduce",
                  "Post C's tensor through all_reduce (SUM, the two kinds of mean, MIN, MAX, "
                  "PRODUCT), broadcast, all_gather, reduce_scatter, gather and scatter; an "
                  "all_reduce with async_op; then a SUM by hand around a ring.");
    int local_rank_arg = -1;  // -1: none passed (torchrun, or ddprun without --local-rank-arg)
    cli.add_int("--local-rank", &local_rank_arg,
                "the local rank, as torch.distributed.launch passes it from torch 2.0 (ddprun "
                "--local-rank-arg); it must equal LOCAL_RANK; -1: none given",
                0, 65535);
    cli.add_int("--local_rank", &local_rank_arg,
                "the same, as torch 1.x's launcher spells it (ddprun --local-rank-arg=underscore)",
                0, 65535);
    bool local_rank_only = false;
    cli.add_flag("--local-rank-only", &local_rank_only,
                 "stop after Step 1: say where each rank's local rank came from");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: join the group. The local rank (which GPU is mine) comes from LOCAL_RANK, set
    // by every launcher; an argument from the launcher must say the same.
    const int local_rank = dist::get_local_rank();
    ch04::check_local_rank_argument(local_rank_arg, local_rank);
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    if (local_rank_only) {
      dist::out() << ch04::where_local_rank_came_from(local_rank, local_rank_arg);
      return ch04::verdict(true, rank, "every rank knows its local_rank");
    }
    const dist::Device device = dist::get_device();  // where the backend works: a GPU for nccl
    const Tensor tensor = example_tensor(rank, world, device);
    dist::out() << label("tensor") << tensor;

    // ---- Step 2: all_reduce with SUM, MIN, MAX, PRODUCT: the same answer on every rank
    bool ok = true;
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::PRODUCT}) {
      const Tensor result = reduce(tensor, op);
      dist::out() << label(dist::reduce_op_name(op)) << result;
      ok = ok && result.cpu().equal(closed_form(op, world));
    }

    // ---- Step 3: the mean. Post C sums, then divides by world_size. An int64 tensor cannot
    // hold 2.5, so the mean starts from a float copy (torch refuses int_tensor /= 2 too).
    Tensor mean = reduce(tensor.to(dist::kFloat32), ReduceOp::SUM);
    mean /= static_cast<std::int64_t>(world);
    dist::out() << label("mean") << mean << "  (SUM, then / world_size)";
    const Tensor avg = reduce(tensor.to(dist::kFloat32), ReduceOp::AVG);  // one call does both
    dist::out() << label("AVG") << avg;
    const Tensor expected_mean = closed_form(ReduceOp::SUM, world).to(dist::kFloat32) / world;
    ok = ok && mean.cpu().equal(expected_mean) && avg.cpu().equal(expected_mean);

    // ---- Step 4: broadcast: every rank ends with rank 0's tensor (how DDP starts every replica
    // from the same weights)
    Tensor from_rank0 = tensor;
    dist::broadcast(from_rank0, /*src=*/0);
    dist::out() << label("broadcast") << from_rank0 << "  (rank 0's)";
    ok = ok && from_rank0.cpu().equal(example_tensor(0, world, {}));

    // ---- Step 5: all_gather: every rank ends with every rank's tensor, in rank order
    std::vector<Tensor> everyone;
    dist::all_gather(everyone, tensor);
    dist::out() << label("all_gather") << ch04::list_repr(everyone);
    ok = ok && ch04::equal(everyone, every_rank_tensor(world));

    // ---- Step 6: reduce_scatter: rank r ends with the SUM of every rank's piece r. With post
    // C's tensor cut into W pieces of one element, that is element r of Step 2's SUM: the
    // all_reduce's result, one slice per rank (the ring's first phase, Step 9).
    std::vector<Tensor> pieces;
    for (std::int64_t i = 0; i < world; ++i) pieces.push_back(tensor.slice(i, 1));
    Tensor my_piece(1, dist::kInt64, device);
    dist::reduce_scatter(my_piece, pieces, ReduceOp::SUM);
    dist::out() << label("reduce_scatter") << my_piece << "  (element " << rank << " of the SUM)";
    ok = ok && my_piece.cpu().equal(closed_form(ReduceOp::SUM, world).slice(rank, 1));

    // ---- Step 7: gather to rank 0, then scatter that list back from rank 0: each rank gets its
    // own tensor again. Only the root passes a list; the others pass nullptr.
    std::vector<Tensor> gathered;
    dist::gather(tensor, rank == 0 ? &gathered : nullptr, /*dst=*/0);
    if (rank == 0) dist::out() << label("gather") << ch04::list_repr(gathered) << "  (rank 0 only)";
    Tensor mine(world, dist::kInt64, device);
    dist::scatter(mine, rank == 0 ? &gathered : nullptr, /*src=*/0);
    dist::out() << label("scatter") << mine << "  (item " << rank << " of rank 0's list)";
    ok = ok && (rank != 0 || ch04::equal(gathered, every_rank_tensor(world)));
    ok = ok && mine.cpu().equal(example_tensor(rank, world, {}));

    // ---- Step 8: async_op: the all_reduce starts and returns a Work at once; this rank works
    // on (here: the closed form) while it runs, and wait() blocks until the sum is there.
    // `total` must stay untouched until wait() returns: the collective writes it meanwhile.
    Tensor total = tensor;
    dist::Work work = dist::all_reduce(total, ReduceOp::SUM, {.async_op = true});
    const Tensor expected_total = closed_form(ReduceOp::SUM, world);  // overlaps the all_reduce
    work.wait();  // throws the call's error, if it failed (a peer died, --timeout passed)
    dist::out() << label("async SUM") << total << "  (async_op, other work, wait())";
    ok = ok && total.cpu().equal(expected_total);

    // ---- Step 9: the same SUM by hand, around a ring of send/recv
    ch04::draw_ring(world);
    const Tensor ring = ring_all_reduce(tensor, rank, world);
    dist::out() << label("ring") << ring << "  (send/recv by hand)";
    ok = ok && ring.cpu().equal(closed_form(ReduceOp::SUM, world));

    // ---- Step 10: one verdict for the job: the MIN over ranks of "my results were right"
    // (dist::all_ranks_ok is chapter 01's all_reduce(MIN) of a 0/1 flag)
    return ch04::verdict(ok, rank, "every result matches its closed form on every rank");
  });
}
