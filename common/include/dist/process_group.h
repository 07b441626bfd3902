// dist/process_group.h — the collectives, behind one interface for every backend.
//
// A ProcessGroup is "the ranks that talk together": it knows its rank, its size and how to run a
// collective. Gloo (CPU, TCP) is the backend on every machine; NCCL (GPU) arrives with the GPU
// chapter. Chapters call the free functions in dist/init.h, which act on the default group, so
// no lesson ever contains an #ifdef for the backend.
//
// The contract every backend keeps (and the tests check):
//   * Every rank must make the same collective calls in the same order with matching sizes and
//     dtypes; a rank that skips one leaves the others waiting until the group's timeout, which
//     then fails with dist::TimeoutError naming the operation and its sequence number.
//   * A peer that dies makes the others fail with dist::Error, not hang. A call that fails once
//     data has started to move closes the group: every later call is refused, naming that first
//     error. A call refused for its arguments, or stopped by DIST_DEBUG=DETAIL, leaves the group
//     usable.
//   * Tensors of 0 elements are allowed and do nothing but synchronise.
//
// Who runs what, and how mismatched calls (ranks that called different collectives, or the same
// one with different sizes, dtypes or ops) are caught:
//   * Gloo, all_reduce, all_gather, reduce_scatter and their flat forms: on the backend's own
//     synchronous mesh (common/src/backends/gloo_mesh.h): one exchange for a small all_reduce,
//     chapter 04's ring for the rest. Every call first exchanges a header (call number, count,
//     dtype, op), so ranks that called differently all stop at once with an error showing each
//     rank's call.
//   * Gloo, broadcast, barrier, gather, scatter: Gloo's own algorithms. Gloo notices a message of
//     the wrong size on its network thread, where nothing can catch it: the receiving rank aborts
//     (SIGABRT) after a rank-tagged "fatal:" line and a hint. A call that the others never make
//     ends in a timeout.
//   * Point to point (send, recv, isend, irecv, batch_isend_irecv), on either backend: every
//     message is a header of 16 bytes (numel, dtype, tag), then its data. The receiver checks the
//     header before it posts the data's buffer, so a recv of the wrong size or dtype is an error
//     on both ranks, naming both, never an abort (see send() below). A message nobody receives
//     ends in a timeout.
//   * NCCL, every call: NCCL checks nothing across ranks; mismatched calls end in a timeout (or,
//     for sizes, in wrong results), and the communicator is aborted.
//   * With DIST_DEBUG=DETAIL, every collective on either backend is first compared across ranks
//     through the store (op, reduce op, dtype, size, device, root), so any mismatch stops every
//     rank with each rank's call, before data moves (chapter 10).
//
// For whoever adds a backend: the public calls are not virtual. ProcessGroup numbers the call,
// runs the DIST_DEBUG=DETAIL check, checks the arguments, turns a call on 0 elements into a
// barrier, and refuses calls once the group has failed; a backend implements the protected
// do_*() functions, which see only calls that passed all of that (call() says which call it is),
// and says begin_transfer() right before its first byte may move. A do_*() never calls a public
// call of its own group: that would number a second call inside the first.
//
// Every collective also goes into the flight recorder when DIST_TRACE_DIR is set
// (dist/flight_recorder.h): its state as it is scheduled, started, and completed, failed or timed
// out, whichever backend runs it. Point-to-point messages are not collectives, and do not.
//
// Asynchronous point to point, as torch.distributed has it (isend, irecv, batch_isend_irecv with
// a list of P2POp; 1.13 and 2.x alike): each call posts its messages and returns a Work at once;
// wait() says the message has gone or arrived. How torch does it, and how this library does:
//   * Gloo: torch 1.13's ProcessGroupGloo posts the unbound buffer's send() or recv() at once
//     and waits with waitSend()/waitRecv() in Work::wait() (its SendWork and RecvWork), outside
//     the queue of its collectives. Here an isend does the same with its header and data; an
//     irecv posts the header's buffer at once and finishes on a thread of its own, which checks
//     the header and only then posts the data's buffer (so a crossing pair never waits on a
//     wait() the program has not reached yet). torch sends no header.
//   * NCCL: batch_isend_irecv wraps the ops in one of NCCL's group calls (ncclGroupStart/End;
//     1.13 and 2.x through their coalescing manager): NCCL launches them together, so two ranks
//     that send to each other do not each wait in their send. Here a batch is two group calls,
//     the headers' and the data's, run within the call (backends/nccl.cpp).
// The peer is a rank of this group, as for torch's ProcessGroup objects (recent 2.x releases' P2POp
// also takes it as group_peer); torch.distributed.isend's dst is a global rank (global_rank()).
//
// Taught in: chapter 04 (collectives, async_op), chapter 05 (barrier), chapter 10 (mismatched
// calls, DIST_DEBUG=DETAIL, the flight recorder), chapter 16 (pipeline parallel: isend, irecv,
// batch_isend_irecv).
// Built in: common/src/group/process_group.cpp (what every backend shares), work.cpp (Work, the
// communication thread, irecv's threads), backends/gloo.cpp and gloo_mesh.cpp (Gloo),
// backends/nccl.cpp (NCCL, cuda preset), debug_group.cpp (DETAIL).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dist/tensor.h"

namespace dist {

// The reduction applied by all_reduce and reduce_scatter, named as in torch.distributed.ReduceOp.
enum class ReduceOp { SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR };
const char* reduce_op_name(ReduceOp op);  // "SUM", ...

// torch's async_op=True: the call returns at once with a Work, and runs behind the caller on the
// group's communication thread, in the order it was made; wait() blocks until it has finished.
//
//   dist::Work w = dist::all_reduce(grad, dist::ReduceOp::SUM, {.async_op = true});
//   compute_something_else();           // overlaps with the all_reduce
//   w.wait();                           // now `grad` holds the sum (or the call's error is thrown)
//
// The tensors must live, and stay untouched, until wait() returns: the call reads and writes
// them meanwhile. A Work waits for its call when it is destroyed, so dropping one is safe. A
// call made without async_op waits for every earlier asynchronous call of the group first, so
// calls never overtake each other. Arguments are checked at once; a failure of the call itself
// (a peer that died, a timeout) is thrown by wait().
//
// A Work also says when its call ran and what it sent, so that a program can draw a timeline of
// calls that ran behind it (DDP's buckets, chapter 09): start_time() is when the call began to
// run, after the calls queued before it, end_time() when it ended, well or not (steady_clock),
// and bytes_sent() what this rank sent on the group meanwhile (ProcessGroup::bytes_sent(); a group
// runs one call at a time, so they are this call's). torch's Work keeps times too from 2.x on
// (getDuration() on NCCL with timing enabled; completion hooks get a WorkInfo with timeStarted and
// timeFinished); 1.13's has none.
struct CallOptions {
  bool async_op = false;
};

class Work {
 public:
  using Clock = std::chrono::steady_clock;

  // No call: finished, with no times. A call with CallOptions but without async_op returns a
  // finished Work with its times.
  Work() = default;
  ~Work();
  Work(Work&&) noexcept = default;
  Work& operator=(Work&&) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the call has finished; throws its error if it failed (once).
  void wait();
  // True once the call has finished, well or not; never blocks.
  bool is_completed() const;
  // Once is_completed(): see above. Before, and for a Work made by Work(), Clock's epoch and 0.
  Clock::time_point start_time() const;
  Clock::time_point end_time() const;
  std::int64_t bytes_sent() const;

  struct State;  // shared with the communication thread

 private:
  friend class ProcessGroup;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// torch.distributed.P2POp: one message of a batch_isend_irecv, an isend or an irecv.
//
//   std::vector<dist::Work> works = group.batch_isend_irecv({dist::P2POp::isend(out, next),
//                                                            dist::P2POp::irecv(in, prev)});
//   for (dist::Work& w : works) w.wait();
//
// The tensor is read (isend) or written (irecv) until its Work's wait() returns: keep it alive
// and untouched until then.
struct P2POp {
  enum class Kind { kIsend, kIrecv };
  Kind op = Kind::kIsend;
  Tensor* tensor = nullptr;
  int peer = -1;  // the rank sent to (isend) or received from (irecv), in the group
  int tag = 0;

  static P2POp isend(const Tensor& tensor, int dst, int tag = 0) {
    return {Kind::kIsend, const_cast<Tensor*>(&tensor), dst, tag};  // only read
  }
  static P2POp isend(Tensor&& tensor, int dst, int tag = 0) = delete;  // it must outlive the op
  static P2POp irecv(Tensor& tensor, int src, int tag = 0) {
    return {Kind::kIrecv, &tensor, src, tag};
  }
};

class ProcessGroup;
namespace detail {
// Says which ranks of the default group `group` holds, and which of them this process is
// (new_group(ranks), dist/init.h). Internal: groups are made by init_process_group and new_group.
void set_group_ranks(ProcessGroup& group, std::vector<int> ranks, int global_rank);
}  // namespace detail

class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // This rank's rank in the group and the group's size. Every rank argument of a call on a
  // ProcessGroup (src, dst) is a rank in the group, 0 .. size()-1, as in torch's ProcessGroup
  // objects; torch.distributed's functions take global ranks instead and translate them.
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Which ranks of the default group ("global ranks") this group holds, in group-rank order:
  // 0 .. size()-1 for the default group and new_group(); new_group(ranks)'s ranks, sorted.
  // torch: get_process_group_ranks(group) (1.13 on).
  const std::vector<int>& ranks() const { return ranks_; }
  // torch's get_global_rank(group, group_rank) and get_group_rank(group, global_rank) (both 1.13
  // on); each throws a ConfigError for a rank outside the group.
  int global_rank(int group_rank) const;
  int group_rank(int global_rank) const;
  // False on a rank that called new_group(ranks) without being one of `ranks`: there rank() is
  // -1 (torch's get_rank(group) is -1 too) and every call throws a ConfigError naming the group.
  // torch 1.13 and 2.x only warn ("Running all_reduce on global rank 2 which does not belong to
  // the given group.") and skip the call, so a rank that was meant to take part goes on without
  // the result.
  bool is_member() const { return rank_ >= 0; }
  // Throws the ConfigError a call on a group this rank is not in throws, naming `what` (a layer
  // or a stage built on the group): what builds on a group calls it first.
  void require_member(const char* what) const;
  // "rank 3" on a group of every rank in order; "group rank 1 (global rank 3)" on another, so that
  // messages name the process as the launcher's "[rank R/W]" prefix does.
  std::string rank_words(int group_rank) const;
  std::string backend() const { return backend_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Every rank ends with the element-wise reduction of every rank's `tensor`.
  void all_reduce(Tensor& tensor, ReduceOp op);
  // Every rank ends with rank `src`'s `tensor`.
  void broadcast(Tensor& tensor, int src);
  // Returns once every rank has called it.
  void barrier();
  // outputs[i] = rank i's `input`, on every rank. `outputs` is resized to size(); entries that
  // already have the input's size, dtype and device may be filled in place (as torch fills the
  // list it is given), the others are replaced.
  void all_gather(std::vector<Tensor>& outputs, const Tensor& input);
  // Rank r ends with the reduction over ranks of inputs[r]; inputs.size() == size().
  void reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op);
  // Rank `dst` gets outputs[i] = rank i's `input`; `outputs` is ignored on other ranks.
  void gather(const Tensor& input, std::vector<Tensor>* outputs, int dst);
  // Rank r ends with `src`'s inputs[r] in `output`; `inputs` is read on rank `src` only.
  void scatter(Tensor& output, const std::vector<Tensor>* inputs, int src);
  // Point to point: a send must meet a recv with the same tag, size and dtype. Every message
  // (send, isend) first sends a header of kP2PHeaderBytes (numel, dtype, tag), which the
  // receiver checks before it posts the data's buffer: a recv whose tensor differs from what
  // was sent throws a dist::Error naming both ranks, both sizes and dtypes and the tag, and
  // closes the group, so the sender fails at once too, naming the receiver. A message of 0
  // elements is a header alone.
  void send(const Tensor& tensor, int dst, int tag);
  void recv(Tensor& tensor, int src, int tag);
  static constexpr std::int64_t kP2PHeaderBytes = 16;

  // ---- Asynchronous point to point (torch's isend, irecv, batch_isend_irecv) ----
  // Each returns at once with one Work per message; wait() blocks until the message has gone
  // (isend) or arrived (irecv), and throws the message's error. An isend fails if no matching
  // irecv takes it within the group's timeout of its wait(); an irecv if no message comes within
  // the group's timeout of its posting. They do not go through the communication thread of
  // async_op: several may be in flight at once, to several peers, with several tags, and on Gloo
  // two ranks may each isend to the other before either irecvs (on NCCL an isend finishes inside
  // the call, as a group call of its own: pair crossing messages in one batch_isend_irecv, as torch
  // asks). Messages between two ranks with the same tag
  // match in the order they were posted. Every message carries a header that the receiver checks
  // (see above). An isend's is_completed() turns true once wait() has returned (as torch 1.13's
  // Gloo SendWork); an irecv's as soon as the message has arrived. A message's Work starts when it
  // is posted, ends when it has finished, and its bytes_sent() is the tensor's bytes for an isend,
  // 0 for an irecv. Wait for (or drop) every Work before the group is destroyed.
  [[nodiscard]] Work isend(const Tensor& tensor, int dst, int tag = 0);
  // A temporary would be freed while the message still reads it: keep the tensor in a variable
  // until wait() returns (torch's Work keeps it alive; this one does not).
  Work isend(Tensor&& tensor, int dst, int tag = 0) = delete;
  [[nodiscard]] Work irecv(Tensor& tensor, int src, int tag = 0);
  // Posts every op, in order, and returns their Works in the same order. Every op is checked
  // first: a bad one refuses the batch before any message is posted.
  [[nodiscard]] std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops);

  // The same collectives with CallOptions: {.async_op = true} returns at once (see Work).
  [[nodiscard]] Work all_reduce(Tensor& tensor, ReduceOp op, CallOptions options);
  [[nodiscard]] Work broadcast(Tensor& tensor, int src, CallOptions options);
  [[nodiscard]] Work barrier(CallOptions options);
  [[nodiscard]] Work all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                CallOptions options);
  [[nodiscard]] Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                    CallOptions options);

  // The flat collectives: one tensor holds every rank's part, rank r's at elements [r*n, (r+1)*n),
  // so no list of W tensors is made, copied in or copied out. torch.distributed has them under
  // these names from 1.13 on; up to 1.12 they were the private
  // _all_gather_base and _reduce_scatter_base, which 1.13 keeps with a warning that they will be
  // deprecated. torch 1.13's Gloo backend refuses them ("no support for _allgather_base in Gloo
  // process group"), so there they need NCCL; here both backends run them.
  //
  // output.numel() == size() * input.numel(); afterwards rank r's input is at [r*n, (r+1)*n),
  // on every rank. FSDP gathers a unit's parameters with it.
  void all_gather_into_tensor(Tensor& output, const Tensor& input);
  // input.numel() == size() * output.numel(); rank r ends with the reduction over ranks of
  // input's elements [r*n, (r+1)*n). `input` is only read. FSDP reduces gradients with it. On
  // Gloo from 3 ranks on, the ring's partial sums take a scratch buffer of W-2 parts, freed when
  // the call returns (the NCCL path adds none).
  void reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM);
  [[nodiscard]] Work all_gather_into_tensor(Tensor& output, const Tensor& input,
                                            CallOptions options);
  [[nodiscard]] Work reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op,
                                           CallOptions options);

  // Traffic: bytes of tensor data this rank has sent on this group since it was made, counted
  // where the backend sends them (safe to read while asynchronous calls run). A call on 0
  // elements, a barrier, and the set-up made at init count nothing. How much each call sends is
  // the backend's own affair, and its header says: Gloo's in common/src/backends/gloo_mesh.h
  // (all_reduce, all_gather, reduce_scatter) and gloo.h (its own algorithms), NCCL's, nominal,
  // in nccl.h.
  // header_bytes_sent() counts what a backend sends beyond tensor data to check its calls: the
  // Gloo mesh's per-call header (gloo_mesh.h; NCCL's collectives send none), and on both
  // backends each point-to-point message's kP2PHeaderBytes. Transport framing is in neither.
  std::int64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  std::int64_t header_bytes_sent() const {
    return header_bytes_sent_.load(std::memory_order_relaxed);
  }

  // One call, as messages name it. Collectives are numbered 1, 2, ... in the order this rank
  // makes them, the same on every rank that makes the same calls; send and recv are not
  // collectives and carry the number of the last collective.
  struct Call {
    const char* name = "";
    std::uint64_t seq = 0;
    bool collective = true;
    const Tensor* tensor = nullptr;  // the tensor that describes the call; none for barrier
    std::optional<ReduceOp> op;
    const char* peer_role = nullptr;  // "src" or "dst" for a rooted collective, "to"/"from" p2p
    int peer = -1;

    // "SUM, torch.float32, 4 elements" (", cuda:0" for a GPU tensor; ", src 0"; " to rank 1").
    std::string details() const;
    // "all_reduce #3 (SUM, torch.float32, 4 elements)": how errors name the call.
    std::string str() const;
    // "all_reduce(SUM, torch.float32, 4 elements, cpu)": what DIST_DEBUG=DETAIL compares.
    std::string fingerprint() const;
  };

  // DIST_DEBUG=DETAIL (common/src/group/debug_group.h): a check that runs before every collective
  // and throws when the ranks' calls differ. The group owns it.
  class CallChecker {
   public:
    virtual ~CallChecker() = default;
    virtual void check(const Call& call) = 0;
  };
  void set_call_checker(std::unique_ptr<CallChecker> checker);

 protected:
  ProcessGroup(int rank, int size, std::string backend, std::chrono::milliseconds timeout);

  // The call being made; valid inside the do_*() functions.
  const Call& call() const { return call_; }
  // Says that data may move from now on (a Gloo call, an NCCL enqueue): if the call fails after
  // this, the group is closed. Staging copies and allocations come before it.
  void begin_transfer() { transferring_ = true; }
  // Why the group was closed (the first error's first sentence); empty while it is usable.
  std::string closed_reason() const;
  // Adds to bytes_sent() and header_bytes_sent(): the backend calls it where it sends.
  void count_sent(std::int64_t payload, std::int64_t header = 0) {
    bytes_sent_.fetch_add(payload, std::memory_order_relaxed);
    header_bytes_sent_.fetch_add(header, std::memory_order_relaxed);
  }

  // What a backend refuses beyond the common checks, before the call is numbered: each tensor
  // argument (`call` names the collective), and the reduce op. Throw a ConfigError to refuse.
  virtual void check_tensor(const Tensor& tensor, const char* call) const;
  virtual void check_op(ReduceOp op) const;

  // Each runs with its arguments checked, on tensors of at least one element.
  virtual void do_all_reduce(Tensor& tensor, ReduceOp op) = 0;
  virtual void do_broadcast(Tensor& tensor, int src) = 0;
  virtual void do_barrier() = 0;
  virtual void do_all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  virtual void do_reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                 ReduceOp op) = 0;
  // output.numel() == size() * input.numel() (all_gather_into_tensor), input.numel() ==
  // size() * output.numel() (reduce_scatter_tensor); same dtype. Never a temporary of the whole.
  virtual void do_all_gather_into_tensor(Tensor& output, const Tensor& input) = 0;
  virtual void do_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) = 0;
  // `outputs` is non-null on the destination rank.
  virtual void do_gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) = 0;
  // `inputs` holds one tensor per rank, each of the output's size and dtype, on the source rank.
  virtual void do_scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) = 0;

  // ---- Point to point: what a backend implements ----
  // What every message sends first (kP2PHeaderBytes); the receiver checks it with
  // check_p2p_header() before it posts the data's buffer.
  struct P2PHeader {
    std::int64_t numel = 0;
    std::int32_t dtype = 0;  // the DType's value
    std::int32_t tag = 0;
  };
  static P2PHeader p2p_header(const Tensor& tensor, int tag);
  // Throws the dist::Error for a header that does not describe `expected`: the message names
  // this rank, `src`, the tag and both sizes and dtypes.
  void check_p2p_header(const P2PHeader& sent, const Tensor& expected, int src, int tag) const;
  // "isend to rank 1 (tag 3, 12 float32 elements)": how errors name a message.
  std::string p2p_name(const P2POp& op, bool blocking) const;
  // A message the backend has posted. wait() finishes it, by the group's timeout at the latest,
  // or throws; it counts what it sent (count_sent) once it has sent it. in_flight() is false
  // for a message the backend finished while posting it (NCCL), whose wait() returns at once.
  class Transfer {
   public:
    virtual ~Transfer() = default;
    virtual void wait() = 0;
    virtual bool in_flight() const { return true; }
  };
  // Posts `ops` (checked; blocking: made by send/recv, which wait at once) and returns one
  // Transfer per op, in order. It may be called from several threads at once (irecvs finish on
  // threads of their own); errors name each message with p2p_name().
  virtual std::vector<std::unique_ptr<Transfer>> do_batch_isend_irecv(const std::vector<P2POp>& ops,
                                                                      bool blocking) = 0;
  // Runs once, after the first call that failed while transferring: drop the connections (or
  // abort the communicator), so that peers waiting on this rank fail at once instead of at their
  // timeout, even when the program catches the error and goes on.
  virtual void close() noexcept = 0;

  // Every backend's destructor calls this first: it lets the asynchronous calls still queued
  // finish (each ends by the group's timeout at the latest) and stops the communication thread,
  // which must not run a do_*() of a backend that is being destroyed.
  void stop_async() noexcept;
  // Waits until the asynchronous calls made so far have finished (a backend whose
  // point-to-point calls must not run beside a collective, NCCL, calls it first).
  void wait_for_async();

 private:
  template <typename Validate, typename Body>
  void run(Call call, Validate&& validate, Body&& body);
  template <typename Validate, typename Body>
  Work dispatch(CallOptions options, const Call& call, Validate&& validate, Body&& body);
  void close_after(const std::string& error);
  // The communication thread (work.cpp), started by the first asynchronous call.
  class AsyncQueue;
  Work submit(std::function<void()> call);
  // Runs `call` here and now, and returns it finished, with its times (exceptions pass through).
  Work run_now(const std::function<void()>& call);

  friend void detail::set_group_ranks(ProcessGroup&, std::vector<int>, int);
  // Refuses `call` on a rank that is not in the group (is_member()).
  void check_member(const Call& call) const;

  int rank_;
  int size_;
  std::vector<int> ranks_;  // global ranks, by group rank
  int global_self_;         // this process's global rank
  std::string backend_;
  std::chrono::milliseconds timeout_;
  int group_id_;  // this process's groups in the order they were made: 0, 1, ... (flight recorder)
  std::uint64_t sequence_ = 0;
  Call call_;
  std::unique_ptr<CallChecker> checker_;
  bool transferring_ = false;  // the current call has said begin_transfer()
  std::string closed_;         // why the group was closed; empty while it is usable
  std::unique_ptr<AsyncQueue> async_;
  std::atomic<std::int64_t> bytes_sent_{0}, header_bytes_sent_{0};

  // Point to point (process_group.cpp, work.cpp): the threads that finish irecvs, and the lock
  // that lets a message fail on one of them while the program calls on another.
  class P2PThreads;
  std::unique_ptr<P2PThreads> p2p_threads_;
  mutable std::mutex close_mu_;  // guards closed_
  std::vector<Work> post_p2p(const std::vector<P2POp>& ops);
};

}  // namespace dist
