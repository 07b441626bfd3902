// SyncMesh: the Gloo backend's second set of connections, read by the calling thread (internal).
//
// Gloo's pairs normally hand every received byte to a background thread, which then wakes the
// caller: two thread switches per message, which cost more than a small message itself, and on
// a machine with few cores the background threads compete with the ranks for them. A Gloo pair
// in synchronous mode is read by the thread that waits (a blocking recv, bounded by the socket's
// timeout). Such pairs only take buffers registered up front ("bound" buffers), not the
// per-call buffers Gloo's collectives use, so the backend keeps two meshes: Gloo's own, for its
// algorithms, and this one, on which it runs:
//   - exchange(): every rank's piece (at most kMaxPiece bytes) to every other rank, one step:
//     the small all_reduce;
//   - reduce_scatter() and all_gather(): the two halves of the ring all-reduce of chapter 04,
//     each in W-1 steps of one segment, every segment cut into chunks that fit the sockets'
//     buffers, sent one chunk ahead of the one being received.
// Every rank sends before it receives, so the sends must never all wait at once:
//   - exchange() leaves at most one piece unread on a connection, and a socket's send buffer
//     holds more. Gloo asks for the largest message's size (a piece, sent once at start-up) and
//     Linux doubles it: about 256 KiB while net.core.wmem_max is at least 128 KiB (the default
//     is 208 KiB), plus the receiving socket's buffer.
//   - in the ring a rank sends at most two chunks ahead of what it has received, so the ring
//     holds about 3W unread chunks at most, fewer than the W connections' buffers hold (four
//     chunks or more each). A send that does wait waits for a peer with data to read.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace dist::backends {

class SyncMesh {
 public:
  static constexpr std::size_t kMaxPiece = 128 * 1024 + 64;  // a small tensor and its header
  static constexpr std::size_t kChunk = 64 * 1024;           // the ring's unit of transfer

  // out[i] = op(a[i], b[i]) for `count` elements; out may be a.
  using Reduce = std::function<void(void* out, const void* a, const void* b, std::size_t count)>;

  // Switches every pair of `context` (a full mesh, connected) to synchronous mode, registers
  // the fixed buffers and makes one exchange of full-size pieces, so that the sockets' send
  // buffers are sized for the largest message from the first call on.
  SyncMesh(std::shared_ptr<gloo::Context> context, int rank, int size);

  // This rank's piece (to fill before exchange()) and, after it, every rank's.
  std::byte* piece(int r) { return pieces_.data() + kMaxPiece * static_cast<std::size_t>(r); }
  const std::byte* piece(int r) const {
    return pieces_.data() + kMaxPiece * static_cast<std::size_t>(r);
  }
  // Sends the first `nbytes` of this rank's piece to every peer; receives each peer's.
  void exchange(std::size_t nbytes);
  // Closes every connection: peers waiting on this rank fail at once.
  void close() { context_->closeConnections(); }

  // The ring's W segments of a tensor of `count` elements: segment s starts at element
  // segment_begin(count, s), and segment_begin(count, W) == count.
  std::size_t segment_begin(std::size_t count, int s) const {
    return count * static_cast<std::size_t>(s) / static_cast<std::size_t>(size_);
  }

  // The first half of the ring. in[s] is this rank's contribution to segment s (bytes[s] bytes,
  // the same sizes on every rank); afterwards `out` holds the reduction over all ranks of segment
  // `rank`. Partial results of the other segments go to work[s], which may be in[s] (in place);
  // at 2 ranks no work segment is used.
  void reduce_scatter(const std::vector<const std::byte*>& in, const std::vector<std::byte*>& work,
                      std::byte* out, const std::vector<std::size_t>& bytes, std::size_t element,
                      const Reduce& op);
  // The second half: segments[rank] holds this rank's part; afterwards segments[r] holds rank
  // r's, on every rank.
  void all_gather(const std::vector<std::byte*>& segments, const std::vector<std::size_t>& bytes);

 private:
  int right() const { return (rank_ + 1) % size_; }
  int left() const { return (rank_ + size_ - 1) % size_; }
  int segment(int s) const { return ((s % size_) + size_) % size_; }

  std::shared_ptr<gloo::Context> context_;  // owns the pairs the buffers belong to
  int rank_, size_;
  std::vector<std::byte> pieces_, scratch_;
  std::vector<std::unique_ptr<gloo::transport::Buffer>> send_, recv_;  // the pieces, per peer
};

}  // namespace dist::backends
