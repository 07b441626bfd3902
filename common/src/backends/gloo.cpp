// ProcessGroupGloo: the collectives of dist/process_group.h on Facebook's Gloo library (CPU, TCP).
//
// Gloo gives us the transport and most algorithms (broadcast, barrier, gather, scatter); this
// file adds what a teaching library needs on top: dtype dispatch, the reduce ops Gloo lacks
// (AVG, bitwise), a timeout on every call, and errors that say which call failed and why.
// all_reduce, all_gather and reduce_scatter run on a second mesh of Gloo pairs read by the
// calling thread (gloo_sync_mesh.h): one exchange for small tensors, chapter 04's ring for
// large ones, and every call first checks that the ranks made the same call.
#include "backends/gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/gather.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "backends/common.h"
#include "backends/gloo_sync_mesh.h"
#include "dist/check.h"

namespace dist::backends {
namespace {

// Gloo's view of our store: its rendezvous writes each rank's addresses under keys "0".."N-1".
// A prefix keeps the two meshes' keys apart.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(dist::Store& store, std::string prefix)
      : store_(store), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_.get(prefix_ + key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_.wait(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_.wait(prefixed(keys), timeout);
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const std::string& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  dist::Store& store_;
  std::string prefix_;
};

using ReduceFn = std::function<void(void*, const void*, const void*, std::size_t)>;

template <typename T, typename Op>
ReduceFn elementwise(Op op) {
  return [op](void* c, const void* a, const void* b, std::size_t n) {
    T* out = static_cast<T*>(c);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (std::size_t i = 0; i < n; ++i) out[i] = op(x[i], y[i]);
  };
}

// Integer sums and products wrap around, as they do in torch; unsigned arithmetic keeps that
// defined behaviour in C++.
template <typename T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
ReduceFn reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:  // Gloo has no average: sum, then divide by the group size afterwards
      return elementwise<T>([](T a, T b) { return wrapping_add(a, b); });
    case ReduceOp::PRODUCT:
      return elementwise<T>([](T a, T b) { return wrapping_mul(a, b); });
    case ReduceOp::MIN:
      return elementwise<T>([](T a, T b) { return std::min(a, b); });
    case ReduceOp::MAX:
      return elementwise<T>([](T a, T b) { return std::max(a, b); });
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::BAND) return elementwise<T>([](T a, T b) { return a & b; });
        if (op == ReduceOp::BOR) return elementwise<T>([](T a, T b) { return a | b; });
        return elementwise<T>([](T a, T b) { return a ^ b; });
      }
      break;
  }
  throw Error("unreachable reduce op");
}

// Runs fn(); if Gloo throws, calls fail(Gloo's message), which must throw. Gloo has two
// unrelated exception types: gloo::Exception for I/O and timeouts, and gloo::EnforceNotMet (not
// a std::runtime_error) for its internal checks.
template <typename Fn, typename Fail>
void with_gloo_errors(Fn&& fn, Fail&& fail) {
  try {
    fn();
  } catch (const gloo::Exception& e) {
    fail(std::string(e.what()));
  } catch (const gloo::EnforceNotMet& e) {
    fail(std::string(e.what()));
  }
}

class ProcessGroupGloo : public ProcessGroup {
 public:
  ProcessGroupGloo(int rank, int size, std::shared_ptr<gloo::Context> context,
                   std::unique_ptr<SyncMesh> mesh, std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size),
        context_(std::move(context)),
        mesh_(std::move(mesh)),
        timeout_(timeout) {}

  std::string backend() const override { return "gloo"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  // Gloo moves host memory. A GPU tensor goes through a host copy, as in torch's gloo backend:
  // correct everywhere, but NCCL is the backend that keeps GPU data on the GPU.
  void all_reduce(Tensor& tensor, ReduceOp op) override {
    if (tensor.is_cuda()) return through_host(tensor, [&](Tensor& t) { all_reduce(t, op); });
    check_op_fits(op, tensor.dtype());
    run("all_reduce", describe(tensor, op), [&](std::uint32_t tag) {
      if (tensor.numel() == 0) return plain_barrier(tag);
      visit_dtype(tensor.dtype(), [&]<typename T>(std::type_identity<T>) {
        const Header mine = header(tensor, op);
        if (sizeof mine + tensor.nbytes() <= SyncMesh::kMaxPiece) {
          return small_all_reduce<T>(tensor, op, mine);
        }
        // Chapter 04's ring, in place: reduce-scatter, then all-gather, on the synchronous mesh.
        agree("all_reduce", mine);
        auto* data = static_cast<std::byte*>(tensor.data());
        const auto n = static_cast<std::size_t>(tensor.numel());
        std::vector<std::byte*> segments;
        std::vector<std::size_t> bytes;
        for (int s = 0; s < size(); ++s) {
          const std::size_t begin = mesh_->segment_begin(n, s);
          segments.push_back(data + begin * sizeof(T));
          bytes.push_back((mesh_->segment_begin(n, s + 1) - begin) * sizeof(T));
        }
        const std::vector<const std::byte*> in(segments.begin(), segments.end());
        mesh_->reduce_scatter(in, segments, segments[static_cast<std::size_t>(rank())], bytes,
                              sizeof(T), reduce_function<T>(op));
        mesh_->all_gather(segments, bytes);
      });
    });
    if (op == ReduceOp::AVG) tensor /= static_cast<std::int64_t>(size());
  }

  void broadcast(Tensor& tensor, int src) override {
    if (tensor.is_cuda()) return through_host(tensor, [&](Tensor& t) { broadcast(t, src); });
    check_rank(src, "src");
    run("broadcast", describe(tensor) + ", src " + std::to_string(src), [&](std::uint32_t tag) {
      if (tensor.numel() == 0) return plain_barrier(tag);
      visit_dtype(tensor.dtype(), [&]<typename T>(std::type_identity<T>) {
        gloo::BroadcastOptions opts(context_);
        opts.setOutput(tensor.data_ptr<T>(), static_cast<std::size_t>(tensor.numel()));
        opts.setRoot(src);
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        gloo::broadcast(opts);
      });
    });
  }

  void barrier() override {
    run("barrier", "", [&](std::uint32_t tag) { plain_barrier(tag); });
  }

  // outputs[r] that already have the input's size and dtype on the CPU are filled in place, as
  // torch's all_gather fills the list it is given: no new memory, no copy out of a staging area.
  void all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    if (input.is_cuda()) {
      all_gather(outputs, input.cpu());
      for (Tensor& t : outputs) t = t.to(input.device());
      return;
    }
    outputs.resize(static_cast<std::size_t>(size()));
    for (Tensor& t : outputs) {
      if (t.numel() != input.numel() || t.dtype() != input.dtype() || t.is_cuda()) {
        t = Tensor(input.numel(), input.dtype());
      }
    }
    Tensor& own = outputs[static_cast<std::size_t>(rank())];
    if (own.data() != input.data()) own.copy_(input);
    run("all_gather", describe(input), [&](std::uint32_t tag) {
      if (input.numel() == 0) return plain_barrier(tag);
      agree("all_gather", header(input, std::nullopt));
      std::vector<std::byte*> segments;
      for (Tensor& t : outputs) segments.push_back(static_cast<std::byte*>(t.data()));
      mesh_->all_gather(segments, std::vector<std::size_t>(outputs.size(), input.nbytes()));
    });
  }

  void reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    check_op_fits(op, output.dtype());
    check_one_per_rank("reduce_scatter", &inputs, output, size());
    const bool any_cuda =
        output.is_cuda() ||
        std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.is_cuda(); });
    if (any_cuda) {
      std::vector<Tensor> host;
      for (const Tensor& t : inputs) host.push_back(t.cpu());
      return through_host(output, [&](Tensor& t) { reduce_scatter(t, host, op); });
    }
    run("reduce_scatter", describe(output, op), [&](std::uint32_t tag) {
      if (output.numel() == 0) return plain_barrier(tag);
      visit_dtype(output.dtype(), [&]<typename T>(std::type_identity<T>) {
        agree("reduce_scatter", header(output, op));
        // The inputs are only read; partial sums (from 3 ranks on) go to a workspace.
        const std::size_t piece = output.nbytes();
        if (size() > 2) workspace_.resize(piece * static_cast<std::size_t>(size()));
        std::vector<const std::byte*> in;
        std::vector<std::byte*> work;
        for (int s = 0; s < size(); ++s) {
          in.push_back(static_cast<const std::byte*>(inputs[static_cast<std::size_t>(s)].data()));
          work.push_back(size() > 2 ? workspace_.data() + piece * static_cast<std::size_t>(s)
                                    : nullptr);
        }
        mesh_->reduce_scatter(in, work, static_cast<std::byte*>(output.data()),
                              std::vector<std::size_t>(inputs.size(), piece), sizeof(T),
                              reduce_function<T>(op));
      });
    });
    if (op == ReduceOp::AVG) output /= static_cast<std::int64_t>(size());
  }

  void gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) override {
    if (input.is_cuda()) {
      gather(input.cpu(), outputs, dst);
      if (rank() == dst && outputs != nullptr) {
        for (Tensor& t : *outputs) t = t.to(input.device());
      }
      return;
    }
    check_rank(dst, "dst");
    const bool root = rank() == dst;
    DIST_CHECK(!root || outputs != nullptr, "gather needs an output list on the destination rank");
    Tensor flat(root ? input.numel() * size() : 0, input.dtype());
    run("gather", describe(input) + ", dst " + std::to_string(dst), [&](std::uint32_t tag) {
      if (input.numel() == 0) return plain_barrier(tag);
      visit_dtype(input.dtype(), [&]<typename T>(std::type_identity<T>) {
        gloo::GatherOptions opts(context_);
        opts.setInput(const_cast<T*>(input.data_ptr<T>()), static_cast<std::size_t>(input.numel()));
        if (root) opts.setOutput(flat.data_ptr<T>(), static_cast<std::size_t>(flat.numel()));
        opts.setRoot(dst);
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        gloo::gather(opts);
      });
    });
    if (root) split(flat, input.numel(), *outputs);
  }

  void scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) override {
    if (output.is_cuda()) {
      return through_host(output, [&](Tensor& t) { scatter(t, inputs, src); });
    }
    if (inputs != nullptr && rank() == src &&
        std::any_of(inputs->begin(), inputs->end(), [](const Tensor& t) { return t.is_cuda(); })) {
      std::vector<Tensor> host;
      for (const Tensor& t : *inputs) host.push_back(t.cpu());
      return scatter(output, &host, src);
    }
    check_rank(src, "src");
    const bool root = rank() == src;
    if (root) check_one_per_rank("scatter", inputs, output, size());
    run("scatter", describe(output) + ", src " + std::to_string(src), [&](std::uint32_t tag) {
      if (output.numel() == 0) return plain_barrier(tag);
      visit_dtype(output.dtype(), [&]<typename T>(std::type_identity<T>) {
        gloo::ScatterOptions opts(context_);
        std::vector<T*> ptrs;
        if (root) {
          for (const Tensor& t : *inputs) ptrs.push_back(const_cast<T*>(t.data_ptr<T>()));
          opts.setInputs(ptrs, static_cast<std::size_t>(output.numel()));
        }
        opts.setOutput(output.data_ptr<T>(), static_cast<std::size_t>(output.numel()));
        opts.setRoot(src);
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        gloo::scatter(opts);
      });
    });
  }

  void send(const Tensor& tensor, int dst, int tag) override {
    if (tensor.is_cuda()) return send(tensor.cpu(), dst, tag);
    check_peer(dst, "dst");
    run(
        "send", describe(tensor) + " to rank " + std::to_string(dst),
        [&](std::uint32_t) {
          if (tensor.numel() == 0) return;
          auto buf =
              context_->createUnboundBuffer(const_cast<void*>(tensor.data()), tensor.nbytes());
          buf->send(dst, p2p_slot(tag));
          buf->waitSend(timeout_);
        },
        /*collective=*/false);
  }

  void recv(Tensor& tensor, int src, int tag) override {
    if (tensor.is_cuda()) return through_host(tensor, [&](Tensor& t) { recv(t, src, tag); });
    check_peer(src, "src");
    run(
        "recv", describe(tensor) + " from rank " + std::to_string(src),
        [&](std::uint32_t) {
          if (tensor.numel() == 0) return;
          auto buf = context_->createUnboundBuffer(tensor.data(), tensor.nbytes());
          buf->recv(src, p2p_slot(tag));
          buf->waitRecv(timeout_);
        },
        /*collective=*/false);
  }

 private:
  // Every collective on the synchronous mesh starts with each rank's header: its call's number,
  // element count, dtype and op. Ranks that called differently all stop, with an error naming
  // each rank's call, before any data moves (and none reads a message of another size).
  struct Header {
    std::uint64_t seq;
    std::int64_t numel;
    std::int32_t dtype, op;  // op: -1 for a collective without one
  };
  static_assert(sizeof(Header) == 24);

  Header header(const Tensor& t, std::optional<ReduceOp> op) const {
    return {sequence_, t.numel(), static_cast<std::int32_t>(t.dtype()),
            op ? static_cast<std::int32_t>(*op) : -1};
  }

  // Small tensors: the ring takes 2(W-1) steps of one message latency each, and for a few
  // bytes latency is all there is. Instead every rank sends its header and tensor to every other
  // rank (one step), and each reduces the W pieces locally in rank order, so every rank gets the
  // same bits.
  template <typename T>
  void small_all_reduce(Tensor& tensor, ReduceOp op, const Header& mine) {
    const auto n = static_cast<std::size_t>(tensor.numel());
    std::byte* own = mesh_->piece(rank());
    std::memcpy(own, &mine, sizeof mine);
    std::memcpy(own + sizeof mine, tensor.data(), tensor.nbytes());
    mesh_->exchange(sizeof mine + tensor.nbytes());
    check_same_call("all_reduce", mine);
    const ReduceFn reduce = reduce_function<T>(op);
    T* out = tensor.data_ptr<T>();
    const auto at = [&](int r) {
      return reinterpret_cast<const T*>(mesh_->piece(r) + sizeof(Header));
    };
    std::copy(at(0), at(0) + n, out);
    for (int r = 1; r < size(); ++r) reduce(out, out, at(r), n);
  }

  // The header alone, before a ring.
  void agree(const char* name, const Header& mine) {
    std::memcpy(mesh_->piece(rank()), &mine, sizeof mine);
    mesh_->exchange(sizeof mine);
    check_same_call(name, mine);
  }

  // Every call goes through here, so the common case is a comparison only; the message naming
  // each rank's call is built when the calls differ.
  void check_same_call(const char* name, const Header& mine) const {
    const auto theirs = [&](int r) {
      Header h{};
      std::memcpy(&h, mesh_->piece(r), sizeof h);
      return h;
    };
    bool same = true;
    for (int r = 0; r < size() && same; ++r) {
      const Header h = theirs(r);
      same = h.seq == mine.seq && h.numel == mine.numel && h.dtype == mine.dtype && h.op == mine.op;
    }
    if (same) return;
    std::string calls;
    for (int r = 0; r < size(); ++r) {
      const Header h = theirs(r);
      calls += "; rank " + std::to_string(r) + ": collective #" + std::to_string(h.seq) + ", " +
               std::to_string(h.numel) + " elements, " +
               std::string(dtype_name(static_cast<DType>(h.dtype))) +
               (h.op < 0 ? "" : ", " + std::string(reduce_op_name(static_cast<ReduceOp>(h.op))));
    }
    throw Error(std::string(name) + " #" + std::to_string(sequence_) + " on rank " +
                std::to_string(rank()) +
                ": the ranks called it with different tensors or reduce ops, or at different "
                "points of their programs" +
                calls +
                ". Every rank must make the same collective calls in the same order, with the "
                "same size, dtype and op.");
  }

  // Point-to-point messages live in their own slot range, apart from Gloo's collectives.
  static std::uint64_t p2p_slot(int tag) {
    return (std::uint64_t{0xd1} << 56) | static_cast<std::uint32_t>(tag);
  }

  template <typename Fn>
  static void through_host(Tensor& tensor, Fn&& fn) {
    Tensor host = tensor.cpu();
    fn(host);
    tensor.copy_(host);
  }

  void plain_barrier(std::uint32_t tag) {
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  }

  // Runs one call, numbering collectives so every rank tags call N the same way (a stray message
  // from an earlier, failed call can never be taken for this one), and turns Gloo's exceptions
  // into errors that say which call failed, where, and what to check.
  template <typename Fn>
  void run(const char* name, const std::string& what, Fn&& fn, bool collective = true) {
    const std::uint64_t seq = collective ? ++sequence_ : sequence_;
    if (!closed_.empty()) {
      throw Error(std::string(name) + " on rank " + std::to_string(rank()) +
                  ": this process group was closed after an earlier error (" + closed_ +
                  "); start again with destroy_process_group() and init_process_group()");
    }
    try {
      run_checked(name, what, fn, collective, seq);
    } catch (const Error& e) {
      close(e.what());
      throw;
    }
  }

  // Closes every connection after the first error, so that peers waiting on this rank fail at
  // once instead of at their timeout, even when the program catches the error and goes on. The
  // streams may be half-way through a message by now: the group cannot be used again.
  void close(const std::string& reason) {
    closed_ = reason.substr(0, reason.find(". "));
    context_->closeConnections();
    mesh_->close();
  }

  template <typename Fn>
  void run_checked(const char* name, const std::string& what, Fn& fn, bool collective,
                   std::uint64_t seq) {
    with_gloo_errors(
        [&] { fn(static_cast<std::uint32_t>(seq)); },
        [&](const std::string& detail) {
          const std::string call = std::string(name) +
                                   (collective ? " #" + std::to_string(seq) : "") +
                                   (what.empty() ? "" : " (" + what + ")");
          // Gloo says "Timed out" for its background thread, "Read timeout" or "Write timeout"
          // for a synchronous pair's socket.
          if (detail.find("Timed out") != std::string::npos ||
              detail.find(" timeout") != std::string::npos) {
            throw TimeoutError(call + " timed out after " + seconds(timeout_) + " on rank " +
                               std::to_string(rank()) +
                               ": not every rank reached this call. Every rank must make the same "
                               "collective calls in the same order; check for a rank that skipped "
                               "it, exited, or is stuck. [gloo: " +
                               detail + "]");
          }
          throw Error(call + " failed on rank " + std::to_string(rank()) +
                      ": a peer closed its connection (it exited or crashed; look for its error "
                      "above). [gloo: " +
                      detail + "]");
        });
  }

  void split(const Tensor& flat, std::int64_t n, std::vector<Tensor>& outputs) const {
    outputs.resize(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) outputs[static_cast<std::size_t>(r)] = flat.slice(r * n, n);
  }

  void check_rank(int r, const char* what) const { backends::check_rank(r, size(), what); }
  void check_peer(int r, const char* what) const { backends::check_peer(r, rank(), size(), what); }

  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<SyncMesh> mesh_;    // the synchronous mesh: small all_reduces and the ring
  std::vector<std::byte> workspace_;  // reduce_scatter's partial sums, from 3 ranks on
  std::chrono::milliseconds timeout_;
  std::uint64_t sequence_ = 0;
  std::string closed_;  // why the group was closed; empty while it is usable
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(int rank, int size, Store& store,
                                              const GlooOptions& options) {
  gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else {
    attr.hostname = options.hostname;
  }
  std::shared_ptr<gloo::rendezvous::Context> context, sync;
  std::unique_ptr<SyncMesh> mesh;
  with_gloo_errors(
      [&] {
        auto device = gloo::transport::tcp::CreateDevice(attr);
        context = std::make_shared<gloo::rendezvous::Context>(rank, size);
        context->setTimeout(options.connect_timeout);
        StoreAdapter adapter(store, "");
        context->connectFullMesh(adapter, device);
        // The synchronous mesh (see gloo_sync_mesh.h). Its pairs take their sockets' timeout
        // from the context: the collectives' timeout. Every peer is connected to this rank
        // already, so connecting it cannot wait for a missing one.
        sync = std::make_shared<gloo::rendezvous::Context>(rank, size);
        sync->setTimeout(options.timeout);
        StoreAdapter sync_adapter(store, "sync/");
        sync->connectFullMesh(sync_adapter, device);
        // Like torch, finish with a barrier: once this returns every rank is connected, so a
        // rank that exits right after init cannot break a peer that is still connecting. It
        // uses a tag of its own and is not counted among the user's collectives.
        gloo::BarrierOptions barrier(context);
        barrier.setTag(0xfffffff0u);
        barrier.setTimeout(options.connect_timeout);
        gloo::barrier(barrier);
        mesh = std::make_unique<SyncMesh>(sync, rank, size);
      },
      [&](const std::string& detail) {
        throw Error("gloo could not connect rank " + std::to_string(rank) +
                    " to its peers (address " +
                    (options.iface.empty() ? options.hostname : "interface " + options.iface) +
                    "): " + detail +
                    ". Check that every rank can reach every other on that address (firewall, "
                    "DIST_IFNAME).");
      });
  context->setTimeout(options.timeout);
  return std::make_unique<ProcessGroupGloo>(rank, size, std::move(context), std::move(mesh),
                                            options.timeout);
}

}  // namespace dist::backends
