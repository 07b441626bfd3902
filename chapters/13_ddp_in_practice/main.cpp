// Chapter 13 — DDP in practice: unused parameters, uneven inputs, compressed gradients.
//
// Chapters 08 and 09 ran DDP's happy path: every parameter gets a gradient at every step, every
// rank has as many batches as the others, and each gradient travels whole in float32. A real
// model breaks each of these. A branch taken on some steps leaves parameters without a gradient,
// and DDP's next step fails; a rank with fewer batches stops calling the all_reduce the others
// wait in; and the gradients' traffic can outweigh the step. This program meets each one, shows
// DDP's answer (find_unused_parameters, Join, communication hooks, gradient_as_bucket_view), and
// checks it: the weights against a single-process replay, the bytes against their closed forms.
//
// You will learn: why a parameter without gradient stops DDP and what find_unused_parameters
// costs; how Join shadows the collectives of a rank that ran out of data; what fp16, bf16 and
// PowerSGD compression send and what they cost in loss; what gradient_as_bucket_view saves.
// Builds on: chapter 08/09 (DDP, buckets), 10 (a collective nobody answers), 04 (all_reduce).
//
// Run:   ./tutorial run 13       (or: ddprun --standalone --nproc-per-node 2 ch13_ddp_in_practice)
// Prints, among other lines:
//   [rank 0/2] Join: rank 1 shadowed 2 steps with zeros; every rank holds the same weights: yes
//   [rank 0/2] OK: the replays, the bytes and the memory are their closed forms
#include <dist/comm_hooks.h>
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/join.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "support.h"

namespace {

using namespace ch13;

// The branch: rank r's forward takes it at step s when s + r is odd.
bool takes_branch(int step, int rank) {
  return (step + rank) % 2 == 1;
}

// The hooks of step 3, and what each sends per step on Gloo's one-step exchange.
struct HookRun {
  std::string name;
  std::int64_t bytes = 0, closed_form = 0;
  double loss = 0;
  std::vector<float> weights;
};

HookRun train_with(const Flags& f, const std::string& name, int powersgd_rank) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  Net net(f.hidden);
  std::vector<dist::Parameter*> params = net.parameters();
  dist::DistributedDataParallel ddp(params);
  // start_powerSGD_iter 2: one warm-up step with allreduce_hook (torch's default: 1,000)
  dist::PowerSGDState state(
      {.matrix_approximation_rank = std::max(powersgd_rank, 1), .start_powerSGD_iter = 2});
  if (name == "allreduce_hook") ddp.register_comm_hook(dist::default_group(), dist::allreduce_hook);
  if (name == "fp16_compress_hook")
    ddp.register_comm_hook(dist::default_group(), dist::fp16_compress_hook);
  if (name == "bf16_compress_hook")
    ddp.register_comm_hook(dist::default_group(), dist::bf16_compress_hook);
  if (powersgd_rank > 0) ddp.register_comm_hook(state, dist::powerSGD_hook);
  dist::SGD sgd(params, f.lr);
  HookRun run{.name = name};
  for (int step = 0; step < f.steps; ++step) {
    sgd.zero_grad();
    const std::int64_t before = ddp.bytes_sent();
    const StepResult r = forward_backward(net, f, step, rank, true);
    ddp.grads_ready(r.ready);
    ddp.finish_gradient_sync();
    sgd.step();
    run.bytes = ddp.bytes_sent() - before;  // the last step's: PowerSGD's warm-up is over
    dist::Tensor mean = dist::full(1, r.loss / world, dist::kFloat64);
    dist::all_reduce(mean);
    run.loss = mean.item(0);
  }
  std::int64_t psi = 0;
  for (const dist::Parameter* p : params) psi += p->data.numel();
  const std::int64_t per_value =
      name == "fp16_compress_hook" || name == "bf16_compress_hook" ? 2 : 4;
  const std::int64_t sent = powersgd_rank > 0 ? powersgd_values(params, powersgd_rank) : psi;
  run.closed_form = per_value * sent * (world - 1);
  run.weights = values(params);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<Flags> parsed = parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    const Flags& f = *parsed;
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size();

    // ---- Step 1: a branch taken on some steps; the parameters it leaves without a gradient
    std::string error;
    {
      Net net(f.hidden);
      dist::DistributedDataParallel ddp(net.parameters());  // find_unused_parameters=False
      dist::SGD sgd(net.parameters(), f.lr);
      try {
        for (int step = 0; step < 2; ++step) {  // step 0 leaves the branch out on every rank
          sgd.zero_grad();
          ddp.grads_ready(forward_backward(net, f, step, rank, step == 1).ready);
          ddp.finish_gradient_sync();  // b's bucket never filled: returns, grads not averaged
          sgd.step();
        }
      } catch (const dist::Error& e) {  // thrown by step 1's first call
        error = e.what();
      }
    }
    // The library's message opens with torch's sentence (tests/parity/ddp_practice_parity.py)
    const std::size_t from = error.find("Expected");
    const std::string sentence =
        from == std::string::npos ? "" : error.substr(from, error.find(". ", from) + 1 - from);
    dist::out0() << "without find_unused_parameters, step 2 fails: " << sentence;
    std::vector<float> trained;
    {
      Net net(f.hidden);
      dist::DistributedDataParallel ddp(net.parameters(), {.find_unused_parameters = true});
      dist::SGD sgd(net.parameters(), f.lr);
      for (int step = 0; step < f.steps; ++step) {
        sgd.zero_grad();
        ddp.grads_ready(forward_backward(net, f, step, rank, takes_branch(step, rank)).ready);
        ddp.finish_gradient_sync();  // b: the mean over the ranks that used it, zeros counted
        sgd.step();
      }
      trained = values(net.parameters());
    }
    const std::vector<float> unused_replay = replay(
        f, world, f.steps, [](int, int) { return true; }, takes_branch);
    const double unused_diff = largest_difference(unused_replay, trained);
    const bool unused_ok = same_on_every_rank(trained) && unused_diff <= 1e-5 && !sentence.empty();
    dist::out0() << "with find_unused_parameters=True: " << f.steps << " steps, the branch on "
                 << "odd step + rank; every rank holds the replay's weights: "
                 << (unused_ok ? "yes" : "NO");

    // ---- Step 2: uneven inputs; Join shadows the all_reduces of a rank out of batches
    const auto batches_of = [&](int r) { return std::max(1, f.batches - f.fewer * r); };
    std::vector<float> joined;
    {
      Net net(f.hidden);
      dist::DistributedDataParallel ddp(net.parameters());
      dist::SGD sgd(net.parameters(), f.lr);
      dist::Join join(ddp);  // torch: with Join([ddp]):
      for (int step = 0; step < batches_of(rank); ++step) {
        sgd.zero_grad();
        ddp.grads_ready(forward_backward(net, f, step, rank, true).ready);
        ddp.finish_gradient_sync();
        sgd.step();
      }
      join.join();  // out of batches: all_reduce zeros until every rank has joined
      dist::out() << "trained " << batches_of(rank) << " batches, then shadowed "
                  << join.shadowed_steps() << " steps with zeros";
      joined = values(net.parameters());
    }
    const std::vector<float> join_replay = replay(
        f, world, batches_of(0), [&](int s, int r) { return s < batches_of(r); },
        [](int, int) { return true; });
    const bool join_ok =
        same_on_every_rank(joined) && largest_difference(join_replay, joined) <= 1e-5;
    dist::out0() << "Join: every rank holds the same weights, the replay's (a joined rank adds "
                 << "zeros, the mean still divides by " << world
                 << "): " << (join_ok ? "yes" : "NO");

    // ---- Step 3: communication hooks: what each sends, and what it costs
    std::vector<HookRun> runs = {train_with(f, "no hook", 0), train_with(f, "allreduce_hook", 0),
                                 train_with(f, "fp16_compress_hook", 0),
                                 train_with(f, "bf16_compress_hook", 0)};
    for (int r = 1; r <= f.max_rank; ++r) {
      runs.push_back(train_with(f, "powerSGD_hook", r));
      runs.back().name += " rank " + std::to_string(r);
    }
    bool bytes_ok = runs[0].weights == runs[1].weights;  // allreduce_hook: DDP's own, bit for bit
    std::string losses;
    for (const HookRun& run : runs) {
      dist::out0() << run.name << ": " << grouped(run.bytes) << " bytes a step (closed form "
                   << grouped(run.closed_form) << ")";
      bytes_ok = bytes_ok && run.bytes == run.closed_form;
      losses += (losses.empty() ? "" : ", ") + run.name + " " + fixed6(run.loss);
    }
    dist::out0() << "loss at step " << f.steps << ": " << losses;

    // ---- Step 4: gradient_as_bucket_view: the grads live in the buckets
    std::int64_t rise[2] = {0, 0}, psi = 0;
    for (const bool as_view : {false, true}) {
      Net net(f.hidden);
      const std::int64_t before = dist::memory_allocated();
      dist::DistributedDataParallel ddp(net.parameters(), {.gradient_as_bucket_view = as_view});
      rise[as_view] = dist::memory_allocated() - before;
      psi = static_cast<std::int64_t>(values(net.parameters()).size());
    }
    dist::out0() << "memory DDP adds: " << grouped(rise[0]) << " bytes, with "
                 << "gradient_as_bucket_view " << grouped(rise[1]) << " (closed form: 4 bytes "
                 << "less per value, " << grouped(4 * psi) << " for Ψ = " << grouped(psi) << ")";
    const bool memory_ok = rise[0] - rise[1] == 4 * psi;

    const bool job_ok = dist::all_ranks_ok(unused_ok && join_ok && bytes_ok && memory_ok);
    dist::destroy_process_group();
    if (!job_ok) {
      const auto yes = [](bool b) { return b ? "yes" : "NO"; };
      dist::out0() << "MISMATCH: as their closed forms: unused parameters " << yes(unused_ok)
                   << ", Join " << yes(join_ok) << ", the hooks' bytes " << yes(bytes_ok)
                   << ", memory " << yes(memory_ok) << " (rank 0's; a rank may differ)";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: the replays, the bytes and the memory are their closed forms";
    return dist::kExitOk;
  });
}
