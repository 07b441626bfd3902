// ProcessGroupGloo: the collectives of dist/process_group.h on Facebook's Gloo library (CPU, TCP).
//
// Gloo gives us the transport and the algorithms of broadcast, barrier, gather and scatter;
// all_reduce, all_gather and reduce_scatter run on the backend's synchronous mesh
// (gloo_mesh.h). This file is what sits between them and ProcessGroup: the choice of path, the
// dispatch on dtype (Gloo's algorithms and the mesh's reductions are typed), the reduce ops Gloo
// lacks (AVG, bitwise), a timeout on every call, and Gloo's exceptions turned into errors that
// say which call failed and why. The argument checks, the numbering of calls and the rule for 0
// elements are ProcessGroup's.
#include "backends/gloo.h"

#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "backends/gloo_loop.h"
#include "backends/gloo_mesh.h"
#include "dist/check.h"
#include "util/text.h"
#include "util/worker_signals.h"
#include "util/wrapping.h"

namespace dist::backends {
namespace {

using Clock = std::chrono::steady_clock;

// How long the loop keeps turning after this rank reads a peer's address (gloo_loop.h). Gloo
// connects the pair within microseconds of the read; a pair whose listening side waits for a
// slow peer stops the spin here, and then waits as Gloo alone would.
constexpr auto kConnectTurns = std::chrono::milliseconds(1);

// Gloo's view of our store: its rendezvous writes each rank's addresses under keys "0".."N-1".
// A prefix keeps the two meshes' keys apart. Gloo waits for a peer's key, reads it, and connects
// the pair at once; the read arms the waker for that connection, the next wait disarms it.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(dist::Store& store, std::string prefix, LoopWaker& waker)
      : store_(store), prefix_(std::move(prefix)), waker_(waker) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_.get(prefix_ + key);
    waker_.arm(kConnectTurns);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    waker_.disarm();
    store_.wait(prefixed(keys));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    waker_.disarm();
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
  LoopWaker& waker_;
};

// Everything a Gloo group owns. Gloo's loop belongs to the device and reads the waker's
// eventfd, so the waker is declared first and goes last, after the device; and every pair and
// the device wait for a turn of the loop as they close, so the teardown keeps it turning.
struct GlooConnections {
  std::unique_ptr<LoopWaker> waker;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;  // Gloo's own mesh, for its algorithms
  std::shared_ptr<gloo::Context> sync;     // the synchronous mesh's pairs
  std::unique_ptr<MeshCollectives> mesh;   // which runs on them (gloo_mesh.h)

  GlooConnections() = default;
  GlooConnections(const GlooConnections&) = delete;
  GlooConnections& operator=(const GlooConnections&) = delete;
  ~GlooConnections() {
    if (!waker) return;
    waker->arm();
    mesh.reset();
    sync.reset();
    context.reset();
    const std::weak_ptr<gloo::transport::Device> still = device;
    device.reset();
    if (!still.expired()) {
      // Something else still holds the device, and its loop may still read the eventfd: the
      // waker must outlive it, so it stays allocated (one eventfd, never read again).
      waker->disarm();
      static_cast<void>(waker.release());
    }
  }
};

template <typename T, typename Op>
MeshCollectives::Reduce elementwise(Op op) {
  return [op](void* c, const void* a, const void* b, std::size_t n) {
    T* out = static_cast<T*>(c);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (std::size_t i = 0; i < n; ++i) out[i] = op(x[i], y[i]);
  };
}

// The mesh's reduction for `op` on elements of type T. Integer sums and products wrap around,
// as they do in torch. float16 and bfloat16 (dist::Half, dist::BFloat16) are reduced in 16 bits:
// each step converts the partial result and the next rank's value to float, adds (multiplies)
// them there and rounds back to 16 bits (dist/half.h), so a SUM over W ranks is rounded W-1
// times, in the order the mesh combines the ranks' values: 0, 1, ..., W-1 in its one-step
// exchange, and for ring segment s from rank s+1 onward around the ring, ending with rank s
// (gloo_mesh.h). torch's ProcessGroupGloo does the same per step with Gloo's own float16 type
// (gloo/types.h: float16::operator+=), in the order of Gloo's ring; torch 1.13's refuses
// bfloat16 ("Invalid scalar type"), which this backend reduces like float16.
template <typename T>
MeshCollectives::Reduce reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:  // Gloo has no average: sum, then divide by the group size afterwards
      return elementwise<T>(util::WrappingAdd{});
    case ReduceOp::PRODUCT:
      return elementwise<T>(util::WrappingMultiply{});
    case ReduceOp::MIN:
      return elementwise<T>([](T a, T b) { return std::min(a, b); });
    case ReduceOp::MAX:
      return elementwise<T>([](T a, T b) { return std::max(a, b); });
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::BAND) return elementwise<T>(std::bit_and<>{});
        if (op == ReduceOp::BOR) return elementwise<T>(std::bit_or<>{});
        return elementwise<T>(std::bit_xor<>{});
      }
      break;
  }
  throw Error("unreachable reduce op");
}

MeshCollectives::Reduce reducer(DType dtype, ReduceOp op) {
  return visit_dtype(dtype,
                     [&]<typename T>(std::type_identity<T>) { return reduce_function<T>(op); });
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

// Gloo moves host memory. A GPU tensor goes through a host copy, as in torch's gloo backend:
// correct everywhere, but NCCL is the backend that keeps GPU data on the GPU.
template <typename Fn>
void through_host(Tensor& tensor, Fn&& fn) {
  Tensor host = tensor.cpu();
  fn(host);
  tensor.copy_(host);
}

std::vector<Tensor> on_host(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> host;
  for (const Tensor& t : tensors) host.push_back(t.cpu());
  return host;
}

bool any_cuda(const std::vector<Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.is_cuda(); });
}

class ProcessGroupGloo : public ProcessGroup {
 public:
  ProcessGroupGloo(int rank, int size, std::unique_ptr<GlooConnections> connections,
                   std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size, "gloo", timeout),
        connections_(std::move(connections)),
        context_(connections_->context),
        mesh_(*connections_->mesh) {
    mesh_.on_sent([this](std::size_t payload, std::size_t header) {
      count_sent(static_cast<std::int64_t>(payload), static_cast<std::int64_t>(header));
    });
  }
  ~ProcessGroupGloo() override {
    stop_async();
    mesh_.on_sent(nullptr);
  }

 protected:
  // ---- On the synchronous mesh ----

  void do_all_reduce(Tensor& tensor, ReduceOp op) override {
    if (tensor.is_cuda()) return through_host(tensor, [&](Tensor& t) { do_all_reduce(t, op); });
    gloo_call([&] {
      mesh_.all_reduce(tensor.data(), signature(tensor, op), reducer(tensor.dtype(), op));
    });
    if (op == ReduceOp::AVG) tensor /= static_cast<std::int64_t>(size());
  }

  // outputs[r] that already have the input's size and dtype on the CPU are filled in place, as
  // torch's all_gather fills the list it is given: no new memory, no copy out of a staging area.
  void do_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    if (input.is_cuda()) {
      const Device device = input.device();  // `input` may be one of `outputs`, replaced below
      do_all_gather(outputs, input.cpu());
      for (Tensor& t : outputs) t = t.to(device);
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
    std::vector<void*> segments;
    for (Tensor& t : outputs) segments.push_back(t.data());
    gloo_call([&] { mesh_.all_gather(segments, signature(input, std::nullopt)); });
  }

  void do_reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    if (output.is_cuda() || any_cuda(inputs)) {
      const std::vector<Tensor> host = on_host(inputs);
      return through_host(output, [&](Tensor& t) { do_reduce_scatter(t, host, op); });
    }
    std::vector<const void*> in;
    for (const Tensor& t : inputs) in.push_back(t.data());
    gloo_call([&] {
      mesh_.reduce_scatter(in, output.data(), signature(output, op), reducer(output.dtype(), op));
    });
    if (op == ReduceOp::AVG) output /= static_cast<std::int64_t>(size());
  }

  // The flat forms: the ring's parts are pointers into one buffer (gloo_mesh.h).
  void do_all_gather_into_tensor(Tensor& output, const Tensor& input) override {
    if (output.is_cuda()) {
      const Tensor host_input = input.cpu();
      return through_host(output, [&](Tensor& t) { do_all_gather_into_tensor(t, host_input); });
    }
    const std::size_t part = input.nbytes();
    auto* base = static_cast<std::byte*>(output.data());
    std::vector<void*> segments;
    for (int r = 0; r < size(); ++r) segments.push_back(base + part * static_cast<std::size_t>(r));
    void* own = segments[static_cast<std::size_t>(rank())];
    if (own != input.data()) std::memcpy(own, input.data(), part);
    gloo_call([&] { mesh_.all_gather(segments, signature(input, std::nullopt)); });
  }

  void do_reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) override {
    if (output.is_cuda()) {
      const Tensor host_input = input.cpu();
      return through_host(output, [&](Tensor& t) { do_reduce_scatter_tensor(t, host_input, op); });
    }
    const std::size_t part = output.nbytes();
    const auto* base = static_cast<const std::byte*>(input.data());
    std::vector<const void*> in;
    for (int r = 0; r < size(); ++r) in.push_back(base + part * static_cast<std::size_t>(r));
    gloo_call([&] {
      mesh_.reduce_scatter(in, output.data(), signature(output, op), reducer(output.dtype(), op));
    });
    if (op == ReduceOp::AVG) output /= static_cast<std::int64_t>(size());
  }

  // ---- On Gloo's own algorithms ----
  // What they send is counted by their algorithms' formulas, once the call has succeeded.

  void do_broadcast(Tensor& tensor, int src) override {
    if (tensor.is_cuda()) return through_host(tensor, [&](Tensor& t) { do_broadcast(t, src); });
    visit_dtype(tensor.dtype(), [&]<typename T>(std::type_identity<T>) {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(tensor.data_ptr<T>(), static_cast<std::size_t>(tensor.numel()));
      opts.setRoot(src);
      gloo_call([&] { gloo::broadcast(with_tag_and_timeout(opts)); });
    });
    count_sent(static_cast<std::int64_t>(tensor.nbytes()) * binomial_children(src));
  }

  void do_barrier() override {
    gloo::BarrierOptions opts(context_);
    gloo_call([&] { gloo::barrier(with_tag_and_timeout(opts)); });
  }

  void do_gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) override {
    if (input.is_cuda()) {
      const Device device = input.device();  // `input` may be one of `*outputs`, replaced below
      do_gather(input.cpu(), outputs, dst);
      if (outputs != nullptr) {
        for (Tensor& t : *outputs) t = t.to(device);
      }
      return;
    }
    const bool root = outputs != nullptr;
    Tensor flat(root ? input.numel() * size() : 0, input.dtype());
    visit_dtype(input.dtype(), [&]<typename T>(std::type_identity<T>) {
      gloo::GatherOptions opts(context_);
      opts.setInput(const_cast<T*>(input.data_ptr<T>()), static_cast<std::size_t>(input.numel()));
      if (root) opts.setOutput(flat.data_ptr<T>(), static_cast<std::size_t>(flat.numel()));
      opts.setRoot(dst);
      gloo_call([&] { gloo::gather(with_tag_and_timeout(opts)); });
    });
    if (!root) count_sent(static_cast<std::int64_t>(input.nbytes()));
    if (root) *outputs = split(flat, input.numel());
  }

  void do_scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) override {
    if (output.is_cuda()) {
      return through_host(output, [&](Tensor& t) { do_scatter(t, inputs, src); });
    }
    if (inputs != nullptr && any_cuda(*inputs)) {
      const std::vector<Tensor> host = on_host(*inputs);
      return do_scatter(output, &host, src);
    }
    visit_dtype(output.dtype(), [&]<typename T>(std::type_identity<T>) {
      gloo::ScatterOptions opts(context_);
      std::vector<T*> ptrs;
      if (inputs != nullptr) {
        for (const Tensor& t : *inputs) ptrs.push_back(const_cast<T*>(t.data_ptr<T>()));
        opts.setInputs(ptrs, static_cast<std::size_t>(output.numel()));
      }
      opts.setOutput(output.data_ptr<T>(), static_cast<std::size_t>(output.numel()));
      opts.setRoot(src);
      gloo_call([&] { gloo::scatter(with_tag_and_timeout(opts)); });
    });
    if (inputs != nullptr) count_sent(static_cast<std::int64_t>(output.nbytes()) * (size() - 1));
  }

  // ---- Point to point ----
  // Each message is two of Gloo's unbound-buffer transfers, each on a slot of its own
  // (p2p_slot): the header, then the data, as torch's ProcessGroupGloo posts one (SendWork,
  // RecvWork). A send posts both at once; a recv posts the header's buffer at once and the
  // data's once the header has arrived and matches (check_p2p_header): a buffer of the wrong
  // size is never posted, so Gloo never sees a message larger than its buffer. The n-th message
  // between two ranks with one tag takes number n in both slots, on both sides: messages match
  // in the order they were posted, whichever thread posts the data's buffer first.
  std::vector<std::unique_ptr<Transfer>> do_batch_isend_irecv(const std::vector<P2POp>& ops,
                                                              bool blocking) override {
    std::vector<std::unique_ptr<Transfer>> out;
    for (const P2POp& op : ops) {
      out.push_back(op.op == P2POp::Kind::kIsend ? post_send(op, blocking)
                                                 : post_recv(op, blocking));
    }
    return out;
  }

  // After the first error the streams may be half-way through a message: drop both meshes.
  // Closing can itself fail (Gloo's own checks throw); the first error is the one to report.
  void close() noexcept override {
    try {
      context_->closeConnections();
      mesh_.close();
    } catch (...) {
    }
  }

 private:
  MeshCollectives::Signature signature(const Tensor& t, std::optional<ReduceOp> op) const {
    return {
        .name = call().name, .seq = call().seq, .numel = t.numel(), .dtype = t.dtype(), .op = op};
  }

  // How many ranks this rank sends the tensor to in gloo::broadcast's binomial tree
  // (gloo/broadcast.cc): ranks are renumbered so that the source is 0, and at step i (i = 0, 1,
  // ... while 2^i < W) every v < 2^i sends to v + 2^i, if there is such a rank. The source sends
  // ceil(log2 W) times, the ranks of the last steps none; in all, W-1 sends.
  std::int64_t binomial_children(int src) const {
    const int v = (rank() - src + size()) % size();
    std::int64_t children = 0;
    for (int step = 1; step < size(); step *= 2) {
      if (v < step && v + step < size()) ++children;
    }
    return children;
  }

  // Every rank tags call N the same way, so a stray message from an earlier, failed call can
  // never be taken for this one.
  template <typename Options>
  Options& with_tag_and_timeout(Options& opts) const {
    opts.setTag(static_cast<std::uint32_t>(call().seq));
    opts.setTimeout(timeout());
    return opts;
  }

  // Point-to-point messages live in their own slot range, apart from Gloo's collectives: the
  // top byte 0xd1, then 1 bit for header (0) or data (1), 23 bits of the message's number
  // (modulo 2^23), and the tag's 32 bits.
  static std::uint64_t p2p_slot(bool data, std::uint32_t number, int tag) {
    return (std::uint64_t{0xd1} << 56) | (std::uint64_t{data} << 55) |
           (std::uint64_t{number & 0x7fffffu} << 32) | static_cast<std::uint32_t>(tag);
  }

  // The number of the next message to or from `peer` with `tag`: 0, 1, 2, ...
  std::uint32_t next_number(std::map<std::pair<int, int>, std::uint32_t>& counts, int peer,
                            int tag) {
    std::lock_guard lock(numbers_mu_);
    return counts[{peer, tag}]++;
  }

  class GlooTransfer : public Transfer {
   public:
    explicit GlooTransfer(std::function<void()> wait) : wait_(std::move(wait)) {}
    void wait() override { wait_(); }

   private:
    std::function<void()> wait_;
  };

  // What is left of the group's timeout until `deadline`, at least 1 ms (Gloo reads a negative
  // timeout as "the context's default").
  static std::chrono::milliseconds left(Clock::time_point deadline) {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  }

  std::unique_ptr<Transfer> post_send(const P2POp& op, bool blocking) {
    struct Message {
      P2PHeader header;
      Tensor host;  // a GPU tensor's copy
      std::unique_ptr<gloo::transport::UnboundBuffer> header_buf, data_buf;
    };
    auto m = std::make_shared<Message>();
    const Tensor& t = *op.tensor;
    m->header = p2p_header(t, op.tag);
    if (t.is_cuda()) m->host = t.cpu();
    const void* data = t.is_cuda() ? m->host.data() : t.data();
    const std::string what = p2p_name(op, blocking);
    const std::uint32_t number = next_number(sent_, op.peer, op.tag);
    p2p_errors(what, op.peer, [&] {
      m->header_buf = context_->createUnboundBuffer(&m->header, sizeof m->header);
      m->header_buf->send(op.peer, p2p_slot(false, number, op.tag));
      if (t.numel() == 0) return;
      m->data_buf = context_->createUnboundBuffer(const_cast<void*>(data), t.nbytes());
      m->data_buf->send(op.peer, p2p_slot(true, number, op.tag));
    });
    const auto payload = static_cast<std::int64_t>(t.nbytes());
    return std::make_unique<GlooTransfer>([this, m, what, payload, peer = op.peer] {
      const auto deadline = Clock::now() + timeout();
      p2p_errors(what, peer, [&] {
        done_or_aborted(m->header_buf->waitSend(left(deadline)));
        if (m->data_buf) done_or_aborted(m->data_buf->waitSend(left(deadline)));
      });
      count_sent(payload, kP2PHeaderBytes);
    });
  }

  std::unique_ptr<Transfer> post_recv(const P2POp& op, bool blocking) {
    struct Message {
      P2PHeader header;
      std::unique_ptr<gloo::transport::UnboundBuffer> header_buf;
    };
    auto m = std::make_shared<Message>();
    const std::string what = p2p_name(op, blocking);
    const std::uint32_t number = next_number(received_, op.peer, op.tag);
    p2p_errors(what, op.peer, [&] {
      m->header_buf = context_->createUnboundBuffer(&m->header, sizeof m->header);
      m->header_buf->recv(op.peer, p2p_slot(false, number, op.tag));
    });
    return std::make_unique<GlooTransfer>(
        [this, m, what, number, tensor = op.tensor, src = op.peer, tag = op.tag] {
          // One deadline for the header and the data: the message takes the group's timeout at
          // most.
          const Clock::time_point deadline = Clock::now() + timeout();
          p2p_errors(what, src, [&] { done_or_aborted(m->header_buf->waitRecv(left(deadline))); });
          check_p2p_header(m->header, *tensor, src, tag);
          if (tensor->numel() == 0) return;
          Tensor host = tensor->is_cuda() ? Tensor(tensor->numel(), tensor->dtype()) : Tensor();
          void* data = tensor->is_cuda() ? host.data() : tensor->data();
          p2p_errors(what, src, [&] {
            auto buf = context_->createUnboundBuffer(data, tensor->nbytes());
            buf->recv(src, p2p_slot(true, number, tag));
            done_or_aborted(buf->waitRecv(left(deadline)));
          });
          if (tensor->is_cuda()) tensor->copy_(host);
        });
  }

  static void done_or_aborted(bool done) {
    if (!done) throw gloo::IoException("the transfer was aborted");
  }

  // Runs fn() and turns Gloo's exceptions into errors that name the message (`what`), this rank
  // and the peer. Once this rank's group is closed (another message failed), that is the cause.
  template <typename Fn>
  void p2p_errors(const std::string& what, int peer, Fn&& fn) {
    with_gloo_errors(fn, [&](const std::string& detail) {
      const std::string here = " on " + rank_words(rank());
      if (const std::string closed = closed_reason(); !closed.empty()) {
        throw Error(what + " failed" + here + ": this process group was closed after an error (" +
                    closed + "). [gloo: " + detail + "]");
      }
      if (detail.find("Timed out") != std::string::npos ||
          detail.find(" timeout") != std::string::npos) {
        throw TimeoutError(what + " timed out after " + util::seconds(timeout()) + here + ": " +
                           rank_words(peer) + " did not post the matching " +
                           (what.find("send") != std::string::npos ? "recv" : "send") +
                           " (with the same tag) in time. [gloo: " + detail + "]");
      }
      throw Error(what + " failed" + here + ": " + rank_words(peer) +
                  " closed its connection (it refused the message, exited or crashed; look for "
                  "its error above). [gloo: " +
                  detail + "]");
    });
  }

  // Runs fn() and turns Gloo's exceptions into errors that say which call failed, where, and
  // what to check.
  template <typename Fn>
  void gloo_call(Fn&& fn) {
    begin_transfer();
    with_gloo_errors(fn, [&](const std::string& detail) {
      // Gloo says "Timed out" for its background thread, "Read timeout" or "Write timeout" for
      // a synchronous pair's socket.
      if (detail.find("Timed out") != std::string::npos ||
          detail.find(" timeout") != std::string::npos) {
        throw TimeoutError(call().str() + " timed out after " + util::seconds(timeout()) +
                           " on rank " + std::to_string(rank()) + ": " +
                           util::kNotEveryRankReached + ". [gloo: " + detail + "]");
      }
      throw Error(call().str() + " failed on rank " + std::to_string(rank()) +
                  ": a peer closed its connection (it exited or crashed; look for its error "
                  "above). [gloo: " +
                  detail + "]");
    });
  }

  std::unique_ptr<GlooConnections> connections_;  // declared first: destroyed last
  const std::shared_ptr<gloo::Context> context_;
  MeshCollectives& mesh_;
  std::mutex numbers_mu_;  // guards sent_ and received_: messages are posted from any thread
  std::map<std::pair<int, int>, std::uint32_t> sent_, received_;  // (peer, tag) -> next number
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
  auto connections = std::make_unique<GlooConnections>();  // on an error, torn down like a group
  GlooConnections& c = *connections;
  with_gloo_errors(
      [&] {
        {
          const util::WorkerSignals quiet;  // Gloo's loop thread leaves SIGTERM and SIGUSR1 alone
          c.device = gloo::transport::tcp::CreateDevice(attr);
        }
        c.waker =
            std::make_unique<LoopWaker>(dynamic_cast<gloo::transport::tcp::Device&>(*c.device));
        auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
        c.context = context;
        context->setTimeout(options.connect_timeout);
        StoreAdapter adapter(store, "", *c.waker);
        context->connectFullMesh(adapter, c.device);
        // The synchronous mesh (see gloo_mesh.h). Its pairs take their sockets' timeout from the
        // context: the collectives' timeout. Every peer is connected to this rank already, so
        // connecting it cannot wait for a missing one.
        auto sync = std::make_shared<gloo::rendezvous::Context>(rank, size);
        c.sync = sync;
        sync->setTimeout(options.timeout);
        StoreAdapter sync_adapter(store, "sync/", *c.waker);
        sync->connectFullMesh(sync_adapter, c.device);
        c.waker->disarm();
        // Like torch, finish with a barrier: once this returns every rank is connected, so a
        // rank that exits right after init cannot break a peer that is still connecting. It
        // uses a tag of its own and is not counted among the user's collectives.
        gloo::BarrierOptions barrier(c.context);
        barrier.setTag(0xfffffff0u);
        barrier.setTimeout(options.connect_timeout);
        gloo::barrier(barrier);
        c.waker->arm();  // each pair's switch to synchronous mode waits for a turn of the loop
        c.mesh = std::make_unique<MeshCollectives>(sync, rank, size);
        c.waker->disarm();
        c.mesh->size_send_buffers();
        context->setTimeout(options.timeout);
      },
      [&](const std::string& detail) {
        throw Error("gloo could not connect rank " + std::to_string(rank) +
                    " to its peers (address " +
                    (options.iface.empty() ? options.hostname : "interface " + options.iface) +
                    "): " + detail +
                    ". Check that every rank can reach every other on that address (firewall, "
                    "DIST_IFNAME).");
      });
  return std::make_unique<ProcessGroupGloo>(rank, size, std::move(connections), options.timeout);
}

}  // namespace dist::backends
