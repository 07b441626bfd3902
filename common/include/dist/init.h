// dist/init.h — init_process_group and friends, as in torch.distributed.
//
//   dist::init_process_group({.backend = "gloo"});  // env:// : RANK, WORLD_SIZE, MASTER_ADDR/PORT
//   int rank = dist::get_rank(), world = dist::get_world_size();
//   dist::all_reduce(t, dist::ReduceOp::SUM);
//   dist::destroy_process_group();
//
// Where rank and world_size come from, each on its own, for every init_method (this library's
// rule; the first source that gives a value wins):
//   1. explicit arguments: InitOptions::rank / world_size (>= 0 / >= 1; -1 means "not given");
//   2. the init_method URL's query: tcp://host:port?rank=1&world_size=2;
//   3. the environment: RANK / WORLD_SIZE (or OpenMPI's and Slurm's names, see dist/env.h).
// The init_method says how ranks meet:
//   env://            rank 0 hosts a TCP store at MASTER_ADDR:MASTER_PORT (the default);
//   tcp://host:port   the same, with the address in the URL;
//   file:///path      a file every rank can reach (same machine, or a shared file system).
// PyTorch's rule is narrower (torch/distributed/rendezvous.py, 1.13 and 2.x alike): arguments
// and a query never mix (an AssertionError if both give rank or world_size), tcp:// and file://
// read only those two ("rank parameter missing"), and only env:// falls back to RANK and
// WORLD_SIZE. Mixing sources and reading the environment for tcp:// and file:// (so they work
// under ddprun unchanged) is this library's own extension; chapter 02 has the table.
//
// Taught in: chapter 01 (get_dist_info), chapter 02 (init methods), chapter 03 (two programs),
// chapter 04 (the collectives on the default group, async_op), chapter 10 (monitored_barrier).
// Built in: common/src/init/init.cpp (the default group), rendezvous.cpp (steps 1 and 2: resolve,
// meet), backends/factory.cpp (step 3: connect), debug_group.cpp (monitored_barrier),
// one_number.cpp (all_ranks_ok, report_throughput).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/device.h"
#include "dist/init_options.h"
#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist {

// Joins the default process group. Blocks until all world_size ranks have joined or the timeout
// passes; on timeout the error lists the ranks that never arrived. Calling it twice without
// destroy_process_group() in between is an error. It sets SIGPIPE to be ignored in this process:
// Gloo writes to sockets without MSG_NOSIGNAL, and a peer that died must surface as an error
// from the next collective, not kill this rank without a word.
void init_process_group(const InitOptions& options = {});
bool is_initialized();
// Leaves the group and frees it; init_process_group may be called again afterwards.
void destroy_process_group();

// The rank and world size of the default group. Like torch, they throw if called before
// init_process_group (get_dist_info() below does not).
int get_rank();
int get_world_size();
// This process's index on its machine: LOCAL_RANK from the launcher. Without one, the rank
// stands in on a job of one machine; on a job of several, init_process_group refuses to guess
// (a ConfigError naming LOCAL_RANK). Before init: LOCAL_RANK, or 0.
int get_local_rank();
std::string get_backend();
// Where this rank's tensors belong for the default group's backend: its own GPU,
// cuda:LOCAL_RANK, under NCCL; the CPU under Gloo. Throws before init_process_group.
Device get_device();

// get_dist_info: everything a program may want to print about its place in the job (DistInfo,
// dist/init_options.h).
DistInfo get_dist_info();

// The default group itself, for code that wants to hold it explicitly.
ProcessGroup& default_group();

// The collectives on the default group (see dist/process_group.h for their contracts).
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM);
void broadcast(Tensor& tensor, int src);
void barrier();
// torch.distributed.monitored_barrier: a barrier that says who is missing. Every rank reports to
// rank 0 through the store; rank 0 waits up to `timeout` for all of them and then gives every rank
// its verdict. When some ranks did not come, every rank that did throws a dist::TimeoutError
// naming the missing ranks (all of them, not only the first, as torch's wait_all_ranks=True), and
// so does a late rank that comes within another `timeout` (rank 0 keeps the store up that long).
// The other ranks wait up to twice `timeout` for rank 0's verdict; if none comes, they name
// rank 0. Slower than barrier() (a store round trip per rank): a debugging
// aid, to find the rank that skipped a collective or is stuck. Works on every backend (this
// library's extension: PyTorch's monitored_barrier is Gloo-only).
void monitored_barrier(std::chrono::milliseconds timeout);
void all_gather(std::vector<Tensor>& outputs, const Tensor& input);
void reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::SUM);
void gather(const Tensor& input, std::vector<Tensor>* outputs, int dst = 0);
void scatter(Tensor& output, const std::vector<Tensor>* inputs, int src = 0);
void send(const Tensor& tensor, int dst, int tag = 0);
void recv(Tensor& tensor, int src, int tag = 0);
// torch's dist.isend, dist.irecv and dist.batch_isend_irecv on the default group: they return
// at once, with a Work per message to wait() on (dist/process_group.h says what they promise).
[[nodiscard]] Work isend(const Tensor& tensor, int dst, int tag = 0);
Work isend(Tensor&& tensor, int dst, int tag = 0) = delete;  // keep it alive until wait()
[[nodiscard]] Work irecv(Tensor& tensor, int src, int tag = 0);
[[nodiscard]] std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops);

// torch's async_op=True on the default group: with {.async_op = true} the call returns at once
// with a Work to wait() on (dist/process_group.h says what it promises); without, it is the call
// above. Chapter 04 shows an all_reduce that overlaps with computation.
[[nodiscard]] Work all_reduce(Tensor& tensor, ReduceOp op, CallOptions options);
[[nodiscard]] Work broadcast(Tensor& tensor, int src, CallOptions options);
[[nodiscard]] Work barrier(CallOptions options);
[[nodiscard]] Work all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                              CallOptions options);
[[nodiscard]] Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                  CallOptions options);

// torch.distributed.new_group() over every rank: a second, independent group with the default
// group's ranks, backend and timeout, and connections of its own. A collective: every rank calls
// it, in the same order. Two groups let two threads run collectives at the same time without
// their calls interleaving (ShardedDataParallel uses one, chapter 12).
// Destroy it before destroy_process_group().
std::unique_ptr<ProcessGroup> new_group();

// torch.distributed.new_group(ranks): a group of some of the default group's ranks ("global
// ranks"), with the default group's backend and timeout and connections of its own. Every rank of
// the default group calls it, members or not, the same number of times and in the same order
// (torch's rule); the members check that they asked for the same ranks, and a rank that did not
// is named at once. The ranks are sorted, as torch sorts them: group rank i is the i-th smallest
// (ProcessGroup::ranks(), global_rank(), group_rank() translate). On a rank not in `ranks` it
// returns a group with is_member() false, whose every call throws (torch returns
// GroupMember.NON_GROUP_MEMBER and skips calls on it with a warning). Ranks outside the default
// group, or named twice, are a ConfigError. dist/device_mesh.h builds its groups with it.
std::unique_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

// One verdict for the job: true on every rank exactly when `mine` is true on every rank. It is an
// all_reduce(MIN) of a 0/1 flag on the group's device, so every rank must call it, the same number
// of times. Chapter 01 (Step 6) writes it out in full; later chapters call this.
bool all_ranks_ok(bool mine);

// For --throughput (chapters 08 and 09; bench/run.py reads it): prints on rank 0
//   throughput: N samples/s (S samples in T s)
// where T is the slowest rank's `elapsed` (an all_reduce(MAX): every rank calls it) and S the
// samples all ranks processed together in that time.
void report_throughput(std::chrono::duration<double> elapsed, std::int64_t samples);

}  // namespace dist
