// ProcessGroupNCCL: the collectives of dist/process_group.h on NVIDIA's NCCL (GPU tensors).
//
// The shape is torch's ProcessGroupNCCL, cut down to what a reader can follow:
//   1. the GPU is LOCAL_RANK (one rank, one GPU: NCCL refuses to share one between ranks), and
//      becomes the current CUDA device of the thread that initialises the group;
//   2. rank 0 creates the communicator's unique id and the others read it from the store;
//   3. the communicator is created non-blocking (NCCL connects in the background) and we poll
//      it against the group's timeout, so a rank that never arrives ends in an error, not a hang;
//   4. every operation runs on the group's own CUDA stream, after whatever the program queued on
//      the default stream (its kernels that produced the data), and the call returns when the
//      operation has finished;
//   5. while it waits, the calling thread is the watchdog: it polls the operation, NCCL's
//      asynchronous error state and the deadline. When the deadline passes or a peer fails, it
//      aborts the communicator (ncclCommAbort stops the kernels still waiting for peers) and
//      throws an error that names the call. An aborted group refuses every later call.
// The argument checks, the numbering of calls and the rule for 0 elements are ProcessGroup's; this
// file adds NCCL's own (tensors on this rank's GPU, no bitwise reductions).
// async_op=True works as on every backend: ProcessGroup runs the call on the group's
// communication thread (work.cpp), which makes this GPU current for the call as any thread does.
// What it leaves out: communicator splitting for subgroups, and NCCL's zero-copy buffer
// registration.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "backends/nccl.h"
#include "backends/unique_id.h"
#include "dist/check.h"
#include "gpu/cuda_check.h"
#include "gpu/device_guard.h"
#include "util/text.h"
#include "util/worker_signals.h"

namespace dist::backends {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

static_assert(kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kInt32:
      return ncclInt32;
    case kInt64:
      return ncclInt64;
    case kFloat16:
      return ncclFloat16;
    case kBFloat16:
      return ncclBfloat16;  // NCCL 2.10 and later
  }
  detail::throw_invalid_dtype(dtype, "NCCL: ");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return ncclSum;
    case ReduceOp::PRODUCT:
      return ncclProd;
    case ReduceOp::MIN:
      return ncclMin;
    case ReduceOp::MAX:
      return ncclMax;
    case ReduceOp::AVG:
      // NCCL averages on the GPU. For floats it scales each input by 1/world_size before it
      // sums, so with 3 or more ranks the last bit may differ from Gloo's sum-then-divide.
      return ncclAvg;
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      break;
  }
  throw ConfigError(std::string("ReduceOp::") + reduce_op_name(op) +
                    " is not available with NCCL, which has no bitwise reductions (torch refuses "
                    "it too): use the gloo backend for it, or MIN/MAX on 0/1 values for AND/OR");
}

// What NCCL says about a failure, in words: the code's name and, when NCCL has one, the last
// error message it logged.
std::string nccl_text(ncclResult_t rc) {
  std::string text = ncclGetErrorString(rc);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    text += ": " + std::string(last);
  }
  return text;
}

std::string nccl_hint(ncclResult_t rc) {
  switch (rc) {
    case ncclRemoteError:
      return "a peer failed or exited (look for its error above)";
    case ncclSystemError:
      return "a system call failed (network or shared memory); run with NCCL_DEBUG=WARN to see "
             "which, and check NCCL_SOCKET_IFNAME";
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return "the call's arguments are wrong, or the ranks called it differently (every rank "
             "must make the same calls with the same sizes and dtypes)";
    case ncclUnhandledCudaError:
      return "CUDA failed underneath NCCL; check `nvidia-smi` and that each rank has its own GPU";
    default:
      return "run with NCCL_DEBUG=WARN for NCCL's own account";
  }
}

// Polling with a little patience: spin first (collectives on one machine finish in
// microseconds), then sleep in growing steps up to 1 ms, so a long wait costs no CPU.
class Backoff {
 public:
  void pause() {
    if (++spins_ < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
    }
  }

 private:
  int spins_ = 0;
  std::chrono::microseconds sleep_{20};
};

using gpu::check_cuda;

class ProcessGroupNCCL : public ProcessGroup {
 public:
  ProcessGroupNCCL(int rank, int size, const NcclOptions& options)
      : ProcessGroup(rank, size, "nccl", options.timeout), device_(options.device) {}

  // Makes the CUDA resources and connects the communicator: a step apart from the constructor,
  // so that the destructor cleans up whatever was made before a failure.
  void connect(Store& store, const NcclOptions& options) {
    // This rank's GPU becomes the thread's current device, as torch.cuda.set_device(local_rank)
    // makes it in a PyTorch program: the program's own kernels then run where NCCL reads.
    check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
    {
      const gpu::DeviceGuard guard(device_);
      // Our own stream, which does not wait for the default stream by itself: run() orders it
      // after the default stream explicitly, with an event, for every operation.
      check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      check_cuda(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming),
                 "cudaEventCreate");
      check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
      check_cuda(cudaMalloc(&barrier_word_, sizeof(float)), "allocating the barrier's buffer");
    }
    const NcclUniqueId id = share_unique_id(store, rank(), [] {
      ncclUniqueId made;
      const ncclResult_t rc = ncclGetUniqueId(&made);
      if (rc != ncclSuccess) {
        throw Error("ncclGetUniqueId failed on rank 0: " + nccl_text(rc) + "; " + nccl_hint(rc));
      }
      NcclUniqueId bytes;
      std::memcpy(bytes.data(), made.internal, bytes.size());
      return bytes;
    });
    ncclUniqueId nccl_id;
    std::memcpy(nccl_id.internal, id.data(), id.size());

    if (const char* blocking = std::getenv("NCCL_COMM_BLOCKING");
        blocking != nullptr && std::string(blocking) == "1") {
      throw ConfigError(
          "NCCL_COMM_BLOCKING=1 is set: it makes NCCL block in ways no deadline can end, and this "
          "library bounds every wait by the group's timeout; unset NCCL_COMM_BLOCKING");
    }
    const gpu::DeviceGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // return at once; we poll, so that the wait has a deadline
    const auto deadline = Clock::now() + options.connect_timeout;
    const std::string call = "creating the NCCL communicator on cuda:" + std::to_string(device_);
    ncclResult_t rc = ncclSuccess;
    {
      // NCCL's threads (its init thread, then the proxy threads) leave SIGTERM and SIGUSR1 to
      // the program, as the library's own do (util/worker_signals.h).
      const util::WorkerSignals quiet;
      rc = ncclCommInitRankConfig(&comm_, size(), nccl_id, rank(), &config);
      rc = settle(rc, deadline);
    }
    if (rc == ncclInProgress) {
      abort_communicator();
      throw TimeoutError(call + " on rank " + std::to_string(rank()) + " did not finish within " +
                         util::seconds(options.connect_timeout) +
                         ": some rank never joined NCCL's bootstrap (it failed before, or cannot "
                         "reach rank 0's machine). Check NCCL_SOCKET_IFNAME and firewalls; "
                         "NCCL_DEBUG=INFO shows NCCL's view");
    }
    if (rc != ncclSuccess) {
      abort_communicator();
      throw Error(call + " failed on rank " + std::to_string(rank()) + ": " + nccl_text(rc) + "; " +
                  nccl_hint(rc));
    }
    // NCCL connects its rings lazily; one barrier now makes "init returned" mean "every rank can
    // talk", as with Gloo. It is not counted among the program's collectives.
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    enqueue_and_wait(
        "NCCL's first all_reduce after creating the communicator", std::max(left, 1ms),
        "some rank did not finish initialising, or the ranks cannot reach each other over NCCL's "
        "transport (NCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO)",
        [&] {
          return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_,
                               stream_);
        });
  }

  ~ProcessGroupNCCL() override {
    stop_async();  // the communication thread's calls, if any, finish first
    const bool clean = cudaPeekAtLastError() == cudaSuccess;  // see the end
    // connect() made device_ current for this thread, and the program's kernels run there: stay.
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      // Finalize waits for the other ranks to be done with us, so it too gets a deadline; past
      // it, abort frees everything locally.
      ncclResult_t rc = settle(ncclCommFinalize(comm_), Clock::now() + timeout());
      if (rc == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    if (barrier_word_ != nullptr) cudaFree(barrier_word_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (inputs_ready_ != nullptr) cudaEventDestroy(inputs_ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    // Forget errors of our own teardown, but not one the program left pending before it.
    if (clean) cudaGetLastError();
  }

 protected:
  // ---- The checks NCCL adds to ProcessGroup's ----

  void check_tensor(const Tensor& t, const char* call) const override {
    if (t.device() == Device::cuda(device_)) return;
    throw ConfigError(std::string(call) + " with backend nccl needs tensors on this rank's GPU, " +
                      Device::cuda(device_).str() + ", but this one is on " + t.device().str() +
                      ": create it there (dist::arange(n, dtype, dist::Device::cuda(local_rank))) "
                      "or move it with .to(dist::Device::cuda(local_rank))");
  }

  void check_op(ReduceOp op) const override { nccl_op(op); }

  // ---- The calls ----

  void do_all_reduce(Tensor& tensor, ReduceOp op) override {
    run([&] {
      return ncclAllReduce(tensor.data(), tensor.data(), count(tensor), nccl_type(tensor.dtype()),
                           nccl_op(op), comm_, stream_);
    });
    count_sent(2 * (size() - 1) * bytes(tensor) / size());
  }

  void do_broadcast(Tensor& tensor, int src) override {
    run([&] {
      return ncclBroadcast(tensor.data(), tensor.data(), count(tensor), nccl_type(tensor.dtype()),
                           src, comm_, stream_);
    });
    // A chain from the source along the ring: every rank but the last passes the tensor on.
    if (rank() != (src + size() - 1) % size()) count_sent(bytes(tensor));
  }

  // NCCL has no barrier: like torch, all-reduce one number and wait for it.
  void do_barrier() override {
    run([&] {
      return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

  void do_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    Tensor flat(input.numel() * size(), input.dtype(), input.device());
    run([&] {
      return ncclAllGather(input.data(), flat.data(), count(input), nccl_type(input.dtype()), comm_,
                           stream_);
    });
    outputs = split(flat, input.numel());
    count_sent((size() - 1) * bytes(input));
  }

  void do_reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    const Tensor flat = cat(inputs, output.device());
    run([&] {
      return ncclReduceScatter(flat.data(), output.data(), count(output), nccl_type(output.dtype()),
                               nccl_op(op), comm_, stream_);
    });
    count_sent((size() - 1) * bytes(output));
  }

  // The flat forms are NCCL's own calls: no staging buffer, no copy.
  void do_all_gather_into_tensor(Tensor& output, const Tensor& input) override {
    run([&] {
      return ncclAllGather(input.data(), output.data(), count(input), nccl_type(input.dtype()),
                           comm_, stream_);
    });
    count_sent((size() - 1) * bytes(input));
  }

  void do_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) override {
    run([&] {
      return ncclReduceScatter(input.data(), output.data(), count(output),
                               nccl_type(output.dtype()), nccl_op(op), comm_, stream_);
    });
    count_sent((size() - 1) * bytes(output));
  }

  // NCCL has no gather or scatter: like torch, we build them from sends and receives in one
  // group call, which NCCL runs as a single operation.
  void do_gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) override {
    const bool root = outputs != nullptr;
    Tensor flat(root ? input.numel() * size() : 0, input.dtype(), input.device());
    run([&] {
      return grouped([&]() -> ncclResult_t {
        if (!root) {
          return ncclSend(input.data(), count(input), nccl_type(input.dtype()), dst, comm_,
                          stream_);
        }
        for (int r = 0; r < size(); ++r) {
          if (r == rank()) continue;
          const ncclResult_t rc = ncclRecv(slot(flat, r, input.numel()), count(input),
                                           nccl_type(input.dtype()), r, comm_, stream_);
          if (rc != ncclSuccess) return rc;
        }
        return ncclSuccess;
      });
    });
    if (!root) {
      count_sent(bytes(input));
      return;
    }
    flat.assign_slice(rank() * input.numel(), input);
    *outputs = split(flat, input.numel());
  }

  void do_scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) override {
    const bool root = inputs != nullptr;
    run([&] {
      return grouped([&]() -> ncclResult_t {
        if (!root) {
          return ncclRecv(output.data(), count(output), nccl_type(output.dtype()), src, comm_,
                          stream_);
        }
        for (int r = 0; r < size(); ++r) {
          if (r == rank()) continue;
          const Tensor& in = (*inputs)[static_cast<std::size_t>(r)];
          const ncclResult_t rc =
              ncclSend(in.data(), count(in), nccl_type(in.dtype()), r, comm_, stream_);
          if (rc != ncclSuccess) return rc;
        }
        return ncclSuccess;
      });
    });
    if (root) {
      output.copy_((*inputs)[static_cast<std::size_t>(rank())]);
      count_sent((size() - 1) * bytes(output));
    }
  }

  // ---- Point to point ----
  // Every message is a header, then its data (dist/process_group.h). NCCL matches a send with a
  // receive by order between two ranks and has no tags (torch's NCCL backend ignores the tag the
  // same way; the header still carries it, and the receiver checks it). A batch runs as two of
  // NCCL's group calls: every op's header first, then, once every header received has been
  // checked, every op's data. The group call (ncclGroupStart/ncclGroupEnd around the ops) is what
  // torch's batch_isend_irecv does on NCCL: without it, two ranks that each send to the other
  // first would each wait in its send. Everything finishes within the call, on the calling
  // thread (NCCL takes one thread at a time): the Works that isend and irecv return have
  // finished already, so two ranks that send to each other need batch_isend_irecv here, as they
  // do in torch for messages beyond NCCL's buffers. After a header that does not match, the
  // receiver aborts its communicator; its sender fails when NCCL reports that, or at its timeout.
  std::vector<std::unique_ptr<Transfer>> do_batch_isend_irecv(const std::vector<P2POp>& ops,
                                                              bool blocking) override {
    wait_for_async();
    const std::string what = ops.size() == 1
                                 ? p2p_name(ops.front(), blocking)
                                 : "batch_isend_irecv of " + std::to_string(ops.size()) +
                                       " ops (the first " + p2p_name(ops.front(), blocking) + ")";
    constexpr auto kHeader = static_cast<std::size_t>(kP2PHeaderBytes);
    static_assert(sizeof(P2PHeader) == kHeader);
    const auto n = static_cast<std::int64_t>(ops.size());
    Tensor host(n * kP2PHeaderBytes / 4, kInt32);  // one header per op
    auto* headers = static_cast<P2PHeader*>(host.data());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].op == P2POp::Kind::kIsend) headers[i] = p2p_header(*ops[i].tensor, ops[i].tag);
    }
    Tensor on_gpu = host.to(Device::cuda(device_));
    enqueue_and_wait(what, timeout(), util::kNotEveryRankReached, [&] {
      return grouped([&]() -> ncclResult_t {
        for (std::size_t i = 0; i < ops.size(); ++i) {
          void* header = static_cast<std::byte*>(on_gpu.data()) + i * kHeader;
          const ncclResult_t rc =
              ops[i].op == P2POp::Kind::kIsend
                  ? ncclSend(header, kHeader, ncclInt8, ops[i].peer, comm_, stream_)
                  : ncclRecv(header, kHeader, ncclInt8, ops[i].peer, comm_, stream_);
          if (rc != ncclSuccess) return rc;
        }
        return ncclSuccess;
      });
    });
    host = on_gpu.cpu();
    headers = static_cast<P2PHeader*>(host.data());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].op == P2POp::Kind::kIsend) continue;
      try {
        check_p2p_header(headers[i], *ops[i].tensor, ops[i].peer, ops[i].tag);
      } catch (...) {
        abort_communicator();
        throw;
      }
    }
    const bool any_data =
        std::any_of(ops.begin(), ops.end(), [](const P2POp& op) { return op.tensor->numel() > 0; });
    if (any_data) {
      enqueue_and_wait(what, timeout(), util::kNotEveryRankReached, [&] {
        return grouped([&]() -> ncclResult_t {
          for (const P2POp& op : ops) {
            Tensor& t = *op.tensor;
            if (t.numel() == 0) continue;
            const ncclResult_t rc =
                op.op == P2POp::Kind::kIsend
                    ? ncclSend(t.data(), count(t), nccl_type(t.dtype()), op.peer, comm_, stream_)
                    : ncclRecv(t.data(), count(t), nccl_type(t.dtype()), op.peer, comm_, stream_);
            if (rc != ncclSuccess) return rc;
          }
          return ncclSuccess;
        });
      });
    }
    std::vector<std::unique_ptr<Transfer>> done;
    for (const P2POp& op : ops) {
      if (op.op == P2POp::Kind::kIsend) count_sent(bytes(*op.tensor), kP2PHeaderBytes);
      done.push_back(std::make_unique<Finished>());
    }
    return done;
  }

  // After the first failure (the watchdog has usually aborted already): no NCCL call may run on
  // this communicator again.
  void close() noexcept override { abort_communicator(); }

 private:
  // Runs the call being made (ProcessGroup::call()) against the group's timeout.
  template <typename Enqueue>
  void run(Enqueue&& enqueue) {
    enqueue_and_wait(call().str(), timeout(), util::kNotEveryRankReached,
                     std::forward<Enqueue>(enqueue));
  }

  // A message that finished within do_batch_isend_irecv.
  class Finished : public Transfer {
   public:
    void wait() override {}
    bool in_flight() const override { return false; }
  };

  static std::size_t count(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }
  // bytes_sent() is counted nominally (dist/process_group.h): NCCL does not say what it moved.
  static std::int64_t bytes(const Tensor& t) { return static_cast<std::int64_t>(t.nbytes()); }
  static void* slot(Tensor& flat, int r, std::int64_t n) {
    return static_cast<std::byte*>(flat.data()) +
           r * n * static_cast<std::int64_t>(flat.element_size());
  }

  // NCCL's group call: the calls inside are launched together at ncclGroupEnd, which is what
  // lets a rank send and receive at once without deadlocking. The group is always closed.
  template <typename Calls>
  static ncclResult_t grouped(Calls&& calls) {
    ncclResult_t rc = ncclGroupStart();
    if (rc != ncclSuccess) return rc;
    rc = calls();
    const ncclResult_t end = ncclGroupEnd();
    return rc != ncclSuccess ? rc : end;
  }

  // In non-blocking mode NCCL may answer ncclInProgress: the call goes on in the background and
  // the communicator's state says when it is done. Waits for that, up to the deadline; returns
  // the final result, or ncclInProgress if the deadline came first.
  ncclResult_t settle(ncclResult_t rc, Clock::time_point deadline) const {
    for (Backoff backoff; rc == ncclInProgress; backoff.pause()) {
      if (Clock::now() >= deadline) return ncclInProgress;
      if (const ncclResult_t query = ncclCommGetAsyncError(comm_, &rc); query != ncclSuccess) {
        return query;
      }
    }
    return rc;
  }

  // Enqueues one operation and waits for it, at most `limit`; `hint` says what a timeout means.
  template <typename Enqueue>
  void enqueue_and_wait(const std::string& call, std::chrono::milliseconds limit,
                        const std::string& hint, Enqueue&& enqueue) {
    const auto deadline = Clock::now() + limit;
    DIST_CHECK(comm_ != nullptr, "ProcessGroup refuses every call once the group has failed");
    const gpu::DeviceGuard guard(device_);
    // The data may still be in the making on the default stream (the program's kernels): our
    // stream waits for that work first.
    check_cuda(cudaEventRecord(inputs_ready_, cudaStreamLegacy), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, inputs_ready_, 0), "cudaStreamWaitEvent");
    begin_transfer();
    const ncclResult_t rc = settle(enqueue(), deadline);
    if (rc == ncclSuccess) {
      check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
      return watch(call, deadline, limit, hint);
    }
    if (rc == ncclInProgress) timed_out(call, limit, hint);
    fail(call, rc);
  }

  // The watchdog: polls the operation until it has finished, a peer or NCCL reports an error,
  // or the deadline passes.
  void watch(const std::string& call, Clock::time_point deadline, std::chrono::milliseconds limit,
             const std::string& hint) {
    for (Backoff backoff;; backoff.pause()) {
      const cudaError_t state = cudaEventQuery(done_);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) {
        cudaGetLastError();
        abort_communicator();
        throw Error(call + " failed on rank " + std::to_string(rank()) + " (" +
                    Device::cuda(device_).str() + "): " + cudaGetErrorString(state) +
                    ". Check `nvidia-smi`; a kernel of the program may have failed before it");
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) fail(call, async);
      if (Clock::now() >= deadline) timed_out(call, limit, hint);
    }
  }

  // If an operation queued before ours never ends (a kernel of the program that hangs),
  // ncclCommAbort waits for it too: NCCL frees memory only once the GPU is done with it. Nothing
  // inside the process can help then; kill it (ddprun does, once another rank has failed).
  [[noreturn]] void timed_out(const std::string& call, std::chrono::milliseconds limit,
                              const std::string& hint) {
    abort_communicator();
    throw TimeoutError(call + " timed out after " + util::seconds(limit) + " on rank " +
                       std::to_string(rank()) + ": " + hint +
                       ". The NCCL communicator was aborted");
  }

  [[noreturn]] void fail(const std::string& call, ncclResult_t rc) {
    const std::string text = nccl_text(rc);
    abort_communicator();
    throw Error(call + " failed on rank " + std::to_string(rank()) + ": " + text + "; " +
                nccl_hint(rc) + ". The NCCL communicator was aborted");
  }

  // ncclCommAbort makes NCCL's kernels that wait for peers give up, and frees the communicator.
  void abort_communicator() noexcept {
    if (comm_ == nullptr) return;
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t inputs_ready_ = nullptr;
  cudaEvent_t done_ = nullptr;
  float* barrier_word_ = nullptr;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(int rank, int size, Store& store,
                                              const NcclOptions& options) {
  auto group = std::make_unique<ProcessGroupNCCL>(rank, size, options);
  group->connect(store, options);
  return group;
}

}  // namespace dist::backends
