// Chapter 01 — get_dist_info: who am I, how many are we, and where do we meet?
//
// Every distributed program starts by asking its place in the job: its rank, the world_size, its
// local_rank on this machine (which picks its GPU), and where rank 0 hosts the rendezvous. Post
// A asks with get_dist_info(), which it calls a PyTorch function; it is mmcv's, a small helper
// over torch.distributed that answers rank 0 of 1 when no process group exists. This chapter asks
// every one of those questions before init_process_group, after it, and after
// destroy_process_group (post A's torch.distributed.finalize() does not exist), and checks each
// answer against what the launcher said.
//
// You will learn: get_dist_info() and its friends is_initialized(), get_rank(), get_world_size(),
// get_local_rank(), get_backend(); which of them work before init; rank vs local_rank; why the
// master port changes from run to run; the shared flags every chapter accepts.
// Builds on: nothing; this is the first chapter.
//
// Run:   ./tutorial run 01
//        (or: ddprun --standalone --nproc-per-node 2 ch01_get_dist_info)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 1/2] before init: get_dist_info() = (rank 0, world_size 1), as mmcv answers outside a job
//   [rank 1/2] get_dist_info(): rank 1, world_size 2, local_rank 1, local_world_size 2
//   [rank 1/2] ranks present: tensor([1, 1])
//   [rank 0/2] OK: every answer matches the launcher's variables on every rank
#include <dist/dist.h>

#include <cstdint>
#include <optional>
#include <string>

namespace {

// The pair mmcv's get_dist_info() returns, printed as a reader of post A would expect it.
std::string rank_and_world(const dist::DistInfo& info) {
  return "(rank " + std::to_string(info.rank) + ", world_size " + std::to_string(info.world_size) +
         ")";
}

// get_rank() before init_process_group: an error, as in torch (get_dist_info() is the one that
// answers anyway). Returns true when it did refuse, with a clear message.
bool get_rank_refuses_before_init() {
  try {
    dist::get_rank();
    return false;
  } catch (const dist::Error& e) {
    return std::string(e.what()).find("not been initialized") != std::string::npos;
  }
}

// Where rank 0 hosts the store. Under env:// that is MASTER_ADDR:MASTER_PORT, and ddprun
// --standalone picks a free port every run, so the line names the variable instead of printing
// a number that would differ from run to run ($MASTER_PORT: "the value of MASTER_PORT"). Any
// other port is printed as it is.
std::string master_text(const dist::DistInfo& info, const dist::LaunchEnv& env) {
  if (info.init_method == "file://" || info.master_addr.empty()) return "none (file://)";
  const bool from_env = env.master_port && *env.master_port == info.master_port;
  return info.master_addr + ":" +
         (from_env ? std::string("$MASTER_PORT") : std::to_string(info.master_port));
}

// Each field of get_dist_info() must equal what the launcher set (when it set it) and what the
// one-value friends say.
bool agrees_with_launcher(const dist::DistInfo& info, const dist::LaunchEnv& env) {
  const auto same = [](const std::optional<int>& var, int value) { return !var || *var == value; };
  bool ok = same(env.rank, info.rank) && same(env.world_size, info.world_size) &&
            same(env.local_rank, info.local_rank) &&
            same(env.local_world_size, info.local_world_size);
  if (info.init_method == "env://") {
    ok = ok && env.master_addr == info.master_addr && env.master_port == info.master_port;
  }
  ok = ok && info.rank == dist::get_rank() && info.world_size == dist::get_world_size() &&
       info.local_rank == dist::get_local_rank() && info.backend == dist::get_backend();
  // A local_rank indexes the ranks on one machine, so it is below local_world_size.
  return ok && 0 <= info.local_rank && info.local_rank < info.local_world_size;
}

// A one-hot vector with a 1 at this rank, summed over the ranks: all ones exactly when every rank
// number 0..world_size-1 is held by one process (two processes with RANK=0 would give a 2).
// all_reduce(t, SUM) adds t element by element over all ranks and leaves the sum in t on every
// rank: the first collective of the tutorial; chapter 04 teaches it and the others.
dist::Tensor ranks_present(int rank, int world, dist::Device device) {
  dist::Tensor one_hot = dist::zeros(world, dist::kInt64);
  one_hot.set(rank, 1);
  one_hot = one_hot.to(device);
  dist::all_reduce(one_hot, dist::ReduceOp::SUM);
  return one_hot;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help), shared by every chapter
    dist::Cli cli("ch01_get_dist_info",
                  "Ask get_dist_info() and its friends who this rank is, before init, after it, "
                  "and after destroy_process_group().");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    const dist::LaunchEnv env = dist::read_launch_env();  // what the launcher told this process
    bool ok = true;

    // ---- Step 1: before init. No group exists yet: get_dist_info() answers like mmcv (rank 0
    // of 1, on every process), get_rank() refuses, get_local_rank() reads LOCAL_RANK.
    const dist::DistInfo before = dist::get_dist_info();
    dist::out() << "before init: is_initialized() = "
                << (dist::is_initialized() ? "true" : "false");
    dist::out() << "before init: get_dist_info() = " << rank_and_world(before)
                << ", as mmcv answers outside a job";
    const bool refused = get_rank_refuses_before_init();
    dist::out() << "before init: get_rank() "
                << (refused ? "throws: the default process group has not been initialized"
                            : "did not throw");
    dist::out() << "before init: get_local_rank() = " << dist::get_local_rank()
                << " (LOCAL_RANK, set by the launcher)";
    ok = ok && !dist::is_initialized() && !before.initialized && before.rank == 0 &&
         before.world_size == 1 && refused && dist::get_local_rank() == env.local_rank.value_or(0);

    // ---- Step 2: join the group. Every rank blocks here until all world_size ranks arrive.
    dist::init_process_group(cli.init_options());
    const dist::DistInfo info = dist::get_dist_info();
    dist::out() << "after init:  is_initialized() = "
                << (dist::is_initialized() ? "true" : "false");
    ok = ok && dist::is_initialized() && info.initialized;

    // ---- Step 3: everything get_dist_info() reports
    dist::out() << "get_dist_info(): rank " << info.rank << ", world_size " << info.world_size
                << ", local_rank " << info.local_rank << ", local_world_size "
                << info.local_world_size;
    dist::out() << "get_dist_info(): backend " << info.backend << ", init_method "
                << info.init_method << ", master " << master_text(info, env);
    ok = ok && agrees_with_launcher(info, env);

    // ---- Step 4: the friends, one value each: the same answers, and the same as the launcher's
    dist::out() << "get_rank() = " << dist::get_rank()
                << ", get_world_size() = " << dist::get_world_size()
                << ", get_local_rank() = " << dist::get_local_rank()
                << ", get_backend() = " << dist::get_backend();

    // ---- Step 5: every rank number is taken exactly once (an independent check across ranks)
    const dist::Tensor present = ranks_present(info.rank, info.world_size, dist::get_device());
    dist::out() << "ranks present: " << present.cpu();
    ok = ok && present.cpu().equal(dist::full(info.world_size, 1, dist::kInt64));
    const int machines = info.world_size / info.local_world_size;
    dist::out0() << "the job: " << info.world_size << (info.world_size == 1 ? " rank" : " ranks")
                 << " on " << machines << (machines == 1 ? " machine, " : " machines, ")
                 << info.local_world_size << " per machine";

    // ---- Step 6: one verdict for the job, then leave the group (torch: destroy_process_group();
    // post A's torch.distributed.finalize() does not exist). The verdict is an all_reduce with
    // MIN of a 0/1 flag: 1 only if every rank's checks held. Later chapters call this
    // dist::all_ranks_ok(ok).
    dist::Tensor all_ok = dist::full(1, ok ? 1 : 0, dist::kInt32, dist::get_device());
    dist::all_reduce(all_ok, dist::ReduceOp::MIN);
    const bool job_ok = all_ok.item(0) == 1;
    dist::destroy_process_group();

    // ---- Step 7: after destroy, the process is outside any job again
    const dist::DistInfo after = dist::get_dist_info();
    dist::out() << "after destroy_process_group(): is_initialized() = "
                << (dist::is_initialized() ? "true" : "false")
                << ", get_dist_info() = " << rank_and_world(after);
    const bool after_ok = !dist::is_initialized() && after.rank == 0 && after.world_size == 1;
    if (!after_ok) {  // no group is left to share this check: the rank says so itself
      dist::out() << "MISMATCH: after destroy_process_group() this rank still looks initialized";
      return dist::kExitFailure;
    }
    if (!job_ok) {
      dist::out0() << "MISMATCH: an answer differs from the launcher's variables (see above)";
      return dist::kExitFailure;
    }
    // This verdict covers the answers given while the group existed; each rank checked the last
    // one (after destroy) itself, and any that failed has printed MISMATCH and exited 1.
    dist::out0() << "OK: every answer matches the launcher's variables on every rank";
    return dist::kExitOk;
  });
}
