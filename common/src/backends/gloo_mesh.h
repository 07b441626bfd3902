// MeshCollectives: the Gloo backend's all_reduce, reduce_scatter and all_gather, on a second set
// of connections read by the calling thread (internal).
//
// Gloo's pairs normally hand every received byte to a background thread, which then wakes the
// caller: two thread switches per message, which cost more than a small message itself, and on
// a machine with few cores the background threads compete with the ranks for them. A Gloo pair
// in synchronous mode is read by the thread that waits (a blocking recv, bounded by the socket's
// timeout). Such pairs only take buffers registered up front ("bound" buffers), not the
// per-call buffers Gloo's collectives use, so the backend keeps two meshes: Gloo's own, for its
// algorithms (broadcast, barrier, gather, scatter, send/recv), and this one, on which it runs:
//   - all_reduce of up to kMaxPiece bytes: every rank's tensor to every other rank in one step,
//     then each rank reduces the W pieces itself, in rank order, so every rank gets the same bits;
//   - all_reduce of more: chapter 04's ring, in place: reduce_scatter, then all_gather;
//   - reduce_scatter and all_gather: the ring's two halves, each in W-1 steps of one segment,
//     every segment cut into chunks that fit the sockets' buffers, sent one chunk ahead of the
//     one being received. Their parts are pointers, so the flat forms (all_gather_into_tensor,
//     reduce_scatter_tensor) pass pointers into one buffer and nothing is copied.
// Every call starts with each rank's header: its call's number, element count, dtype and op.
// Ranks that called differently all stop, with an error naming each rank's call, before any data
// moves (and none reads a message of another size).
//
// Every rank sends before it receives, so the sends must never all wait at once:
//   - the one-step exchange leaves at most one piece unread on a connection, and a socket's send
//     buffer holds more. Gloo asks for the largest message's size (a piece, sent once at
//     start-up) and Linux doubles it: about 256 KiB while net.core.wmem_max is at least 128 KiB
//     (the default is 208 KiB), plus the receiving socket's buffer.
//   - in the ring a rank sends at most two chunks ahead of what it has received, so the ring
//     holds about 3W unread chunks at most, fewer than the W connections' buffers hold (four
//     chunks or more each). A send that does wait waits for a peer with data to read.
// Gloo's exceptions pass through; the backend (gloo.cpp) turns them into errors naming the call.
// Every send is reported to on_sent() as it completes, tensor data and headers apart
// (ProcessGroup::bytes_sent and header_bytes_sent):
//   - header: kHeaderBytes (24: call number, count, dtype, op) to each peer, once per call;
//   - all_reduce of n elements of e bytes: while e*n <= kMaxPiece - kHeaderBytes = 128 KiB + 40
//     bytes (32,778 float32 values), the one exchange, every rank's tensor to every other,
//     e*n*(W-1); above that the ring, e*(2n - |segment rank| - |segment rank+1|) where segment s
//     is elements [n*s/W, n*(s+1)/W) rounded down (2*e*n*(W-1)/W on average over the ranks);
//   - reduce_scatter and all_gather of n elements per rank (flat or not): e*n*(W-1).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "dist/process_group.h"
#include "dist/tensor.h"
#include "util/zero_pages.h"

namespace dist::backends {

class MeshCollectives {
 public:
  static constexpr std::size_t kMaxPiece = 128 * 1024 + 64;  // a small tensor and its header
  static constexpr std::size_t kChunk = 64 * 1024;           // the ring's unit of transfer
  static constexpr std::size_t kHeaderBytes = 24;            // sizeof(Header), on the wire

  // out[i] = op(a[i], b[i]) for `count` elements; out may be a.
  using Reduce = std::function<void(void* out, const void* a, const void* b, std::size_t count)>;
  // Told the bytes of each message sent to one peer: tensor data, and header.
  using Sent = std::function<void(std::size_t payload, std::size_t header)>;

  // What every rank must agree on before data moves; `name` and `seq` also name the call in
  // errors. `numel` counts the elements of one rank's tensor (of each output, for reduce_scatter
  // and all_gather).
  struct Signature {
    const char* name;
    std::uint64_t seq;
    std::int64_t numel;
    DType dtype;
    std::optional<ReduceOp> op;
  };

  // Switches every pair of `context` (a full mesh, connected) to synchronous mode and registers
  // the fixed buffers. Each switch waits for a turn of Gloo's event loop (gloo_loop.h).
  MeshCollectives(std::shared_ptr<gloo::Context> context, int rank, int size);

  // Makes one exchange of full-size pieces with every peer, so that the sockets' send buffers
  // are sized for the largest message from the first call on. Call it once, on every rank,
  // before the first collective.
  void size_send_buffers();

  // From now on every message sent is reported to `sent` (size_send_buffers' is not).
  void on_sent(Sent sent) { sent_ = std::move(sent); }

  // `data` holds numel elements; afterwards their reduction over every rank.
  void all_reduce(void* data, const Signature& call, const Reduce& reduce);
  // inputs[s] is this rank's contribution to rank s's output (numel elements each; only read);
  // afterwards `output` holds the reduction over every rank of their inputs[rank]. From 3 ranks
  // on, the partial sums go to a scratch buffer of W-2 parts that lives for the call.
  void reduce_scatter(const std::vector<const void*>& inputs, void* output, const Signature& call,
                      const Reduce& reduce);
  // outputs[rank] holds this rank's numel elements; afterwards outputs[r] holds rank r's.
  void all_gather(const std::vector<void*>& outputs, const Signature& call);

  // Closes every connection: peers waiting on this rank fail at once.
  void close() { context_->closeConnections(); }

 private:
  struct Header;

  std::byte* piece(int r) { return pieces_.data() + kMaxPiece * static_cast<std::size_t>(r); }
  // Sends the first `nbytes` of this rank's piece to every peer, of which the first `header`
  // bytes are the call's header; receives each peer's.
  void exchange(std::size_t nbytes, std::size_t header);
  // Exchanges headers only, and compares them (before a ring).
  void agree(const Signature& call);
  void check_same_call(const Signature& call, const Header& mine);

  // The ring's W segments of `count` elements: segment s starts at element
  // segment_begin(count, s), and segment_begin(count, W) == count.
  std::size_t segment_begin(std::size_t count, int s) const {
    return count * static_cast<std::size_t>(s) / static_cast<std::size_t>(size_);
  }
  int right() const { return (rank_ + 1) % size_; }
  int left() const { return (rank_ + size_ - 1) % size_; }
  std::size_t at(int s) const { return static_cast<std::size_t>(((s % size_) + size_) % size_); }
  // The ring's halves, on W segments of bytes[s] bytes each (the same sizes on every rank).
  // ring_reduce_scatter: in[s] is this rank's contribution to segment s; afterwards `out` holds
  // the reduction of segment `rank`. Partial results of the other segments go to work[s], which
  // may be in[s] (in place); at 2 ranks no work segment is used.
  void ring_reduce_scatter(const std::vector<const std::byte*>& in,
                           const std::vector<std::byte*>& work, std::byte* out,
                           const std::vector<std::size_t>& bytes, std::size_t element,
                           const Reduce& reduce);
  // ring_all_gather: segments[rank] holds this rank's part; afterwards segments[r] holds rank
  // r's, on every rank.
  void ring_all_gather(const std::vector<std::byte*>& segments,
                       const std::vector<std::size_t>& bytes);

  std::shared_ptr<gloo::Context> context_;  // owns the pairs the buffers belong to
  int rank_, size_;
  util::ZeroPages pieces_, scratch_;  // touched only as far as messages reach
  Sent sent_;                         // on_sent()'s; none until then
  std::vector<std::unique_ptr<gloo::transport::Buffer>> send_, recv_;  // the pieces, per peer
};

}  // namespace dist::backends
