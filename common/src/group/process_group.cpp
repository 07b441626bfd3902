// What every backend's calls share (dist/process_group.h): the argument checks, the numbering of
// calls, the DIST_DEBUG=DETAIL hook, the rule for 0 elements, and a group that stays closed after
// its first failure. The backends (common/src/backends/) only move data.
#include "dist/process_group.h"

#include <algorithm>
#include <utility>

#include "dist/check.h"
#include "dist/flight_recorder.h"
#include "util/text.h"

namespace dist {
namespace {

// `r` must be a rank of a group of `size` ranks; `what` names the argument ("src", "dst").
void check_rank(int r, int size, const char* what) {
  if (r < 0 || r >= size) {
    throw ConfigError(std::string(what) + " rank " + std::to_string(r) +
                      " is out of range for world_size " + std::to_string(size));
  }
}

// The same, and not `self`: a rank cannot send to or receive from itself.
void check_peer(int r, int self, int size, const char* what) {
  check_rank(r, size, what);
  if (r == self) {
    throw ConfigError(std::string(what) + " rank " + std::to_string(r) + " is this rank itself");
  }
}

// Bitwise ops need integers; AVG needs a floating dtype (the average of integers is not one).
void check_op_fits(ReduceOp op, DType dtype) {
  const bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (bitwise && is_floating_point(dtype)) {
    throw ConfigError(std::string("ReduceOp::") + reduce_op_name(op) +
                      " needs an integer tensor, but this one is " +
                      std::string(dtype_name(dtype)) +
                      ": bitwise reductions are defined only for int32 and int64");
  }
  if (op == ReduceOp::AVG && !is_floating_point(dtype)) {
    throw ConfigError(std::string("ReduceOp::AVG needs a floating-point tensor, but this one is ") +
                      std::string(dtype_name(dtype)) +
                      ": the average of integers is not an integer. Convert first with "
                      ".to(dist::kFloat32), or use SUM and divide");
  }
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + ", " + std::to_string(t.numel()) + " elements" +
         (t.is_cuda() ? ", " + t.device().str() : "");
}

// The inputs of a reduce_scatter, or of a scatter on its source rank: one tensor per rank, each
// with `output`'s numel and dtype.
void check_one_per_rank(const char* call, const std::vector<Tensor>* inputs, const Tensor& output,
                        int size) {
  if (inputs == nullptr || static_cast<int>(inputs->size()) != size) {
    throw ConfigError(std::string(call) + " needs one input tensor per rank: got " +
                      (inputs == nullptr ? "none" : std::to_string(inputs->size())) +
                      " for world_size " + std::to_string(size));
  }
  for (std::size_t r = 0; r < inputs->size(); ++r) {
    const Tensor& in = (*inputs)[r];
    if (in.numel() != output.numel() || in.dtype() != output.dtype()) {
      throw ConfigError(std::string(call) + " input " + std::to_string(r) + " (" + describe(in) +
                        ") does not match the output (" + describe(output) +
                        "): every input must have the output's size and dtype");
    }
  }
}

// The flat collectives' two tensors: the same dtype and device, and `whole` holding `size` times
// `part`'s elements. `call` names the collective, `whole_name` and `part_name` its arguments.
void check_flat(const char* call, const Tensor& whole, const char* whole_name, const Tensor& part,
                const char* part_name, int size) {
  if (whole.dtype() != part.dtype() || whole.device() != part.device()) {
    throw ConfigError(std::string(call) + ": the " + whole_name + " (" + describe(whole) +
                      ") and the " + part_name + " (" + describe(part) +
                      ") must have the same dtype and device");
  }
  if (whole.numel() != part.numel() * size) {
    throw ConfigError(std::string(call) + " needs an " + whole_name + " of world_size x the " +
                      part_name + "'s elements: the " + whole_name + " has " +
                      std::to_string(whole.numel()) + " elements and the " + part_name + " " +
                      std::to_string(part.numel()) + ", but world_size is " + std::to_string(size) +
                      " (" + std::to_string(size) + " x " + std::to_string(part.numel()) + " = " +
                      std::to_string(part.numel() * size) + ")");
  }
}

// What the flight recorder keeps of a call: plain characters and numbers, cut to its fields.
FlightRecorder::Call flight_call(const ProcessGroup::Call& call, int group) {
  FlightRecorder::Call out;
  out.seq = call.seq;
  out.group = group;
  std::string_view dtype = call.tensor != nullptr ? dtype_name(call.tensor->dtype()) : "";
  const std::string_view reduce = call.op ? reduce_op_name(*call.op) : "";
  const std::string_view op = call.name;
  op.copy(out.op, sizeof out.op - 1);
  reduce.copy(out.reduce_op, sizeof out.reduce_op - 1);
  dtype.copy(out.dtype, sizeof out.dtype - 1);
  if (call.tensor != nullptr) {
    out.numel = call.tensor->numel();
    out.bytes = out.numel * static_cast<std::int64_t>(call.tensor->element_size());
  }
  return out;
}

std::vector<Tensor> empty_per_rank(const Tensor& like, int size) {
  return std::vector<Tensor>(static_cast<std::size_t>(size),
                             Tensor(0, like.dtype(), like.device()));
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::PRODUCT:
      return "PRODUCT";
    case ReduceOp::MIN:
      return "MIN";
    case ReduceOp::MAX:
      return "MAX";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::BAND:
      return "BAND";
    case ReduceOp::BOR:
      return "BOR";
    case ReduceOp::BXOR:
      return "BXOR";
  }
  return "?";
}

// ---- How a call is named ----------------------------------------------------------------------

std::string ProcessGroup::Call::details() const {
  if (tensor == nullptr) return "";
  std::string text = op ? std::string(reduce_op_name(*op)) + ", " : "";
  text += describe(*tensor);
  if (peer_role != nullptr) {
    const std::string role = peer_role;
    text += (role == "to" || role == "from" ? " " + role + " rank " : ", " + role + " ") +
            std::to_string(peer);
  }
  return text;
}

std::string ProcessGroup::Call::str() const {
  const std::string what = details();
  return std::string(name) + (collective ? " #" + std::to_string(seq) : "") +
         (what.empty() ? "" : " (" + what + ")");
}

std::string ProcessGroup::Call::fingerprint() const {
  if (tensor == nullptr) return std::string(name) + "()";
  std::string detail = op ? reduce_op_name(*op) : "";
  if (peer_role != nullptr) detail = std::string(peer_role) + " " + std::to_string(peer);
  return std::string(name) + "(" + detail + (detail.empty() ? "" : ", ") +
         std::string(dtype_name(tensor->dtype())) + ", " + std::to_string(tensor->numel()) +
         " elements, " + tensor->device().str() + ")";
}

// ---- Which ranks the group holds
// -----------------------------------------------------------------

void detail::set_group_ranks(ProcessGroup& group, std::vector<int> ranks, int global_rank) {
  group.ranks_ = std::move(ranks);
  group.global_self_ = global_rank;
}

int ProcessGroup::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size_) {
    throw ConfigError("group rank " + std::to_string(group_rank) +
                      " is not in this group of global ranks " + util::rank_list(ranks_) +
                      ": group ranks go from 0 to " + std::to_string(size_ - 1));
  }
  return ranks_[static_cast<std::size_t>(group_rank)];
}

int ProcessGroup::group_rank(int global_rank) const {
  const auto it = std::find(ranks_.begin(), ranks_.end(), global_rank);
  if (it == ranks_.end()) {
    throw ConfigError("global rank " + std::to_string(global_rank) +
                      " is not in this group of global ranks " + util::rank_list(ranks_));
  }
  return static_cast<int>(it - ranks_.begin());
}

void ProcessGroup::require_member(const char* what) const {
  if (is_member()) return;
  throw ConfigError(std::string(what) + " on global rank " + std::to_string(global_self_) +
                    ", which is not in its group (global ranks " + util::rank_list(ranks_) +
                    "): every rank calls new_group(ranks), but only the ranks in `ranks` may build "
                    "on the group it returns (check is_member())");
}

std::string ProcessGroup::rank_words(int group_rank) const {
  bool whole = true;
  for (std::size_t i = 0; i < ranks_.size(); ++i) whole = whole && ranks_[i] == static_cast<int>(i);
  if (whole || group_rank < 0 || group_rank >= size_) return "rank " + std::to_string(group_rank);
  return "group rank " + std::to_string(group_rank) + " (global rank " +
         std::to_string(ranks_[static_cast<std::size_t>(group_rank)]) + ")";
}

void ProcessGroup::check_member(const Call& call) const {
  if (is_member()) return;
  throw ConfigError(std::string(call.name) + " on global rank " + std::to_string(global_self_) +
                    ", which is not in this group (global ranks " + util::rank_list(ranks_) +
                    "): every rank calls new_group(ranks), but only the ranks in `ranks` may use "
                    "the group it returns (check is_member(), or use the group this rank is in)");
}

// ---- The calls ---------------------------------------------------------------------------------

void ProcessGroup::check_tensor(const Tensor&, const char*) const {}
void ProcessGroup::check_op(ReduceOp) const {}

void ProcessGroup::set_call_checker(std::unique_ptr<CallChecker> checker) {
  checker_ = std::move(checker);
}

// Every public call goes through here, in this order:
//   0. let the asynchronous calls made before it finish (none when it runs on their thread);
//   1. number the call, and refuse it on a closed group; a collective goes into the flight
//      recorder (DIST_TRACE_DIR) as scheduled;
//   2. DIST_DEBUG=DETAIL: compare the call with every rank's, before anything else can throw on
//      one rank only, so a rank with a bad argument stops every rank with each rank's call;
//   3. check the arguments (`validate`): a refused call leaves the group as it was;
//   4. run the backend (`body`), the call now started in the flight recorder. Once the backend
//      has said begin_transfer(), a failure leaves the connections in an unknown state (half a
//      message may be on the wire), so the group is closed and every later call refused; a
//      failure before it (a staging copy, a GPU allocation) leaves the group usable.
//   5. the flight recorder marks the call completed, failed or timed out; a timeout, or a
//      failure that closes the group, writes the record before the error reaches the program.
template <typename Validate, typename Body>
void ProcessGroup::run(Call call, Validate&& validate, Body&& body) {
  check_member(call);
  wait_for_async();  // on the caller's thread: the queued calls go first
  call.seq = call.collective ? ++sequence_ : sequence_;
  if (const std::string closed = closed_reason(); !closed.empty()) {
    throw Error(call.str() + " on rank " + std::to_string(rank_) +
                ": this process group was closed after an earlier error (" + closed +
                "); start again with destroy_process_group() and init_process_group()");
  }
  // call() is valid for the backend during this call only.
  struct Current {
    Call& slot;
    ~Current() { slot = Call{}; }
  } current{call_};
  call_ = std::move(call);
  FlightRecorder* const flight = call_.collective ? flight::recorder() : nullptr;
  const std::uint64_t record =
      flight != nullptr ? flight->record(flight_call(call_, group_id_)) : 0;
  const auto ended = [&](FlightRecorder::State state, bool write_record) {
    if (flight == nullptr) return;
    flight->set_state(record, state);
    if (write_record)
      flight::dump(state == FlightRecorder::State::kTimedOut ? "timeout" : "failure");
  };
  transferring_ = false;
  try {
    if (checker_ != nullptr && call_.collective) checker_->check(call_);
    validate();
    if (flight != nullptr) flight->set_state(record, FlightRecorder::State::kStarted);
    body();
  } catch (const TimeoutError& e) {
    ended(FlightRecorder::State::kTimedOut, true);
    if (transferring_) close_after(e.what());
    throw;
  } catch (const std::exception& e) {
    ended(FlightRecorder::State::kFailed, transferring_);
    if (transferring_) close_after(e.what());
    throw;
  } catch (...) {
    ended(FlightRecorder::State::kFailed, transferring_);
    if (transferring_) close_after("an exception that is not a std::exception");
    throw;
  }
  ended(FlightRecorder::State::kCompleted, false);
}

// Once: a point-to-point message may fail on an irecv's thread while another fails here.
void ProcessGroup::close_after(const std::string& error) {
  {
    std::lock_guard lock(close_mu_);
    if (!closed_.empty()) return;
    closed_ = error.substr(0, error.find(". "));
  }
  close();
}

std::string ProcessGroup::closed_reason() const {
  std::lock_guard lock(close_mu_);
  return closed_;
}

// A collective with CallOptions: at once, or (async_op) checked now and queued behind the
// calls already waiting, on the communication thread. A queued body captures the tensors by
// reference (the caller keeps them alive until wait()) and everything else by value.
template <typename Validate, typename Body>
Work ProcessGroup::dispatch(CallOptions options, const Call& call, Validate&& validate,
                            Body&& body) {
  check_member(call);
  if (!options.async_op) {
    wait_for_async();  // as run() would, but before the clock starts: the queued calls are not
                       // this call's time
    return run_now([&] { run(call, validate, body); });
  }
  validate();
  return submit([this, call, body] {
    run(
        call, [] {}, body);
  });
}

Work ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op, CallOptions options) {
  return dispatch(
      options, {.name = "all_reduce", .tensor = &tensor, .op = op},
      [&] {
        check_op_fits(op, tensor.dtype());
        check_op(op);
        check_tensor(tensor, "all_reduce");
      },
      [this, &tensor, op] {
        if (tensor.numel() == 0) return do_barrier();
        do_all_reduce(tensor, op);
      });
}

Work ProcessGroup::broadcast(Tensor& tensor, int src, CallOptions options) {
  return dispatch(
      options, {.name = "broadcast", .tensor = &tensor, .peer_role = "src", .peer = src},
      [&] {
        check_rank(src, size_, "src");
        check_tensor(tensor, "broadcast");
      },
      [this, &tensor, src] {
        if (tensor.numel() == 0) return do_barrier();
        do_broadcast(tensor, src);
      });
}

Work ProcessGroup::barrier(CallOptions options) {
  return dispatch(
      options, {.name = "barrier"}, [] {}, [this] { do_barrier(); });
}

Work ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                              CallOptions options) {
  return dispatch(
      options, {.name = "all_gather", .tensor = &input}, [&] { check_tensor(input, "all_gather"); },
      [this, &outputs, &input] {
        if (input.numel() > 0) return do_all_gather(outputs, input);
        outputs = empty_per_rank(input, size_);
        do_barrier();
      });
}

Work ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                  CallOptions options) {
  return dispatch(
      options, {.name = "reduce_scatter", .tensor = &output, .op = op},
      [&] {
        check_op_fits(op, output.dtype());
        check_op(op);
        check_tensor(output, "reduce_scatter");
        check_one_per_rank("reduce_scatter", &inputs, output, size_);
        for (const Tensor& in : inputs) check_tensor(in, "reduce_scatter");
      },
      [this, &output, &inputs, op] {
        if (output.numel() == 0) return do_barrier();
        do_reduce_scatter(output, inputs, op);
      });
}

// The call is described by the part one rank contributes (all_gather_into_tensor) or gets
// (reduce_scatter_tensor), as for the list forms: DIST_DEBUG=DETAIL and the flight recorder
// see the same size for the flat and the list form of a call.
Work ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input,
                                          CallOptions options) {
  return dispatch(
      options, {.name = "all_gather_into_tensor", .tensor = &input},
      [&] {
        check_tensor(input, "all_gather_into_tensor");
        check_tensor(output, "all_gather_into_tensor");
        check_flat("all_gather_into_tensor", output, "output", input, "input", size_);
      },
      [this, &output, &input] {
        if (input.numel() == 0) return do_barrier();
        do_all_gather_into_tensor(output, input);
      });
}

Work ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op,
                                         CallOptions options) {
  return dispatch(
      options, {.name = "reduce_scatter_tensor", .tensor = &output, .op = op},
      [&] {
        check_op_fits(op, output.dtype());
        check_op(op);
        check_tensor(output, "reduce_scatter_tensor");
        check_tensor(input, "reduce_scatter_tensor");
        check_flat("reduce_scatter_tensor", input, "input", output, "output", size_);
      },
      [this, &output, &input, op] {
        if (output.numel() == 0) return do_barrier();
        do_reduce_scatter_tensor(output, input, op);
      });
}

void ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  all_gather_into_tensor(output, input, CallOptions{}).wait();
}
void ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) {
  reduce_scatter_tensor(output, input, op, CallOptions{}).wait();
}

void ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  all_reduce(tensor, op, CallOptions{}).wait();
}
void ProcessGroup::broadcast(Tensor& tensor, int src) {
  broadcast(tensor, src, CallOptions{}).wait();
}
void ProcessGroup::barrier() {
  barrier(CallOptions{}).wait();
}
void ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  all_gather(outputs, input, CallOptions{}).wait();
}
void ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  reduce_scatter(output, inputs, op, CallOptions{}).wait();
}

void ProcessGroup::gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) {
  const bool root = rank_ == dst;
  run(
      {.name = "gather", .tensor = &input, .peer_role = "dst", .peer = dst},
      [&] {
        check_rank(dst, size_, "dst");
        check_tensor(input, "gather");
        DIST_CHECK(!root || outputs != nullptr,
                   "gather needs an output list on the destination rank");
      },
      [&] {
        if (input.numel() > 0) return do_gather(input, root ? outputs : nullptr, dst);
        do_barrier();
        if (root) *outputs = empty_per_rank(input, size_);
      });
}

void ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) {
  const bool root = rank_ == src;
  run(
      {.name = "scatter", .tensor = &output, .peer_role = "src", .peer = src},
      [&] {
        check_rank(src, size_, "src");
        check_tensor(output, "scatter");
        if (!root) return;
        check_one_per_rank("scatter", inputs, output, size_);
        for (const Tensor& in : *inputs) check_tensor(in, "scatter");
      },
      [&] {
        if (output.numel() == 0) return do_barrier();
        do_scatter(output, root ? inputs : nullptr, src);
      });
}

// ---- Point to point ----------------------------------------------------------------------------
// send and recv are calls like the collectives (run(): they wait for the queued asynchronous
// calls, and a failure closes the group); isend, irecv and batch_isend_irecv post their
// messages at once and return (work.cpp: post_p2p). All of them send the same messages: a
// header, then the data, which the backend's do_batch_isend_irecv() moves.

namespace {

// "12 float32 elements"
std::string p2p_count(std::int64_t numel, std::string_view dtype) {
  if (dtype.substr(0, 6) == "torch.") dtype.remove_prefix(6);
  return std::to_string(numel) + " " + std::string(dtype) + (numel == 1 ? " element" : " elements");
}

std::string sent_dtype_name(std::int32_t code) {
  for (DType d : {kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16}) {
    if (static_cast<std::int32_t>(d) == code) return std::string(dtype_name(d));
  }
  return "dtype-code-" + std::to_string(code);
}

}  // namespace

ProcessGroup::P2PHeader ProcessGroup::p2p_header(const Tensor& tensor, int tag) {
  return {.numel = tensor.numel(),
          .dtype = static_cast<std::int32_t>(tensor.dtype()),
          .tag = static_cast<std::int32_t>(tag)};
}

void ProcessGroup::check_p2p_header(const P2PHeader& sent, const Tensor& expected, int src,
                                    int tag) const {
  if (sent.numel == expected.numel() && sent.dtype == static_cast<std::int32_t>(expected.dtype()) &&
      sent.tag == tag) {
    return;
  }
  const std::string from = rank_words(src);
  std::string what = "recv from " + from + " (tag " + std::to_string(tag) + ") expected " +
                     p2p_count(expected.numel(), dtype_name(expected.dtype())) + "; " + from +
                     " sent " + p2p_count(sent.numel, sent_dtype_name(sent.dtype));
  if (sent.tag != tag) what += " with tag " + std::to_string(sent.tag);
  throw Error(what + " (on " + rank_words(rank_) +
              "). Every send must meet a recv with the same tag, size and dtype; the group is "
              "closed, so the sender fails too");
}

std::string ProcessGroup::p2p_name(const P2POp& op, bool blocking) const {
  const bool send = op.op == P2POp::Kind::kIsend;
  const char* name = blocking ? (send ? "send" : "recv") : (send ? "isend" : "irecv");
  return std::string(name) + (send ? " to " : " from ") + rank_words(op.peer) + " (tag " +
         std::to_string(op.tag) + ", " +
         p2p_count(op.tensor->numel(), dtype_name(op.tensor->dtype())) + ")";
}

Work ProcessGroup::isend(const Tensor& tensor, int dst, int tag) {
  std::vector<Work> works = batch_isend_irecv({P2POp::isend(tensor, dst, tag)});
  return std::move(works.front());
}

Work ProcessGroup::irecv(Tensor& tensor, int src, int tag) {
  std::vector<Work> works = batch_isend_irecv({P2POp::irecv(tensor, src, tag)});
  return std::move(works.front());
}

std::vector<Work> ProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  check_member({.name = ops.size() == 1
                            ? (ops.front().op == P2POp::Kind::kIsend ? "isend" : "irecv")
                            : "batch_isend_irecv",
                .collective = false});
  if (ops.empty()) {
    throw ConfigError("batch_isend_irecv needs at least one P2POp: the list is empty");
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    const bool send = op.op == P2POp::Kind::kIsend;
    if (!send && op.op != P2POp::Kind::kIrecv) {
      throw ConfigError("batch_isend_irecv op " + std::to_string(i) +
                        " is neither an isend nor an irecv: make it with P2POp::isend or "
                        "P2POp::irecv");
    }
    if (op.tensor == nullptr) {
      throw ConfigError("batch_isend_irecv op " + std::to_string(i) +
                        " has no tensor: make it with P2POp::isend(tensor, dst) or "
                        "P2POp::irecv(tensor, src)");
    }
    check_peer(op.peer, rank_, size_, send ? "dst" : "src");
    check_tensor(*op.tensor, send ? "isend" : "irecv");
  }
  return post_p2p(ops);
}

void ProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  run(
      {.name = "send", .collective = false, .tensor = &tensor, .peer_role = "to", .peer = dst},
      [&] {
        check_peer(dst, rank_, size_, "dst");
        check_tensor(tensor, "send");
      },
      [&] {
        begin_transfer();
        do_batch_isend_irecv({P2POp::isend(tensor, dst, tag)}, true).front()->wait();
      });
}

void ProcessGroup::recv(Tensor& tensor, int src, int tag) {
  run(
      {.name = "recv", .collective = false, .tensor = &tensor, .peer_role = "from", .peer = src},
      [&] {
        check_peer(src, rank_, size_, "src");
        check_tensor(tensor, "recv");
      },
      [&] {
        begin_transfer();
        do_batch_isend_irecv({P2POp::irecv(tensor, src, tag)}, true).front()->wait();
      });
}

}  // namespace dist
