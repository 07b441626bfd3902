// SyncMesh: see gloo_sync_mesh.h. Gloo's exceptions pass through; the backend turns them into
// errors that name the call.
#include "backends/gloo_sync_mesh.h"

#include <gloo/transport/pair.h>

#include <algorithm>
#include <cstring>

namespace dist::backends {
namespace {

// Bound buffers are matched by slot: a message sent from a buffer with slot S lands in the
// receiver's buffer with slot S, at the offset the sender names. A buffer of either kind, when
// destroyed, unregisters its pair's slot, so a slot's send and receive buffers live and die
// together: the pieces' for the mesh's life, the ring's for one call.
constexpr int kPieceSlot = 1, kScratchSlot = 2, kGatherSlot = 3;

// One ring step: the `sends` bytes of `out` go to the right while `recvs` bytes come from the
// left into `in`, in chunks, one chunk sent ahead of the one received; received(offset, length)
// runs once each received chunk is in. A chunk lands in `in` at its own offset, or at 0 when
// `in` is reduce_scatter's one-chunk scratch.
template <typename Received>
void ring_step(gloo::transport::Buffer& out, std::size_t sends, gloo::transport::Buffer& in,
               std::size_t recvs, bool to_scratch, Received&& received) {
  const std::size_t chunk = SyncMesh::kChunk;
  const std::size_t send_chunks = (sends + chunk - 1) / chunk;
  const std::size_t recv_chunks = (recvs + chunk - 1) / chunk;
  const auto send = [&](std::size_t k) {
    const std::size_t offset = k * chunk, length = std::min(chunk, sends - offset);
    out.send(offset, length, to_scratch ? 0 : offset);
    out.waitSend();  // synchronous: the bytes are in the socket already
  };
  if (send_chunks > 0) send(0);
  for (std::size_t k = 0; k < std::max(send_chunks, recv_chunks); ++k) {
    if (k + 1 < send_chunks) send(k + 1);
    if (k < recv_chunks) {
      in.waitRecv();
      received(k * chunk, std::min(chunk, recvs - k * chunk));
    }
  }
}

}  // namespace

SyncMesh::SyncMesh(std::shared_ptr<gloo::Context> context, int rank, int size)
    : context_(std::move(context)),
      rank_(rank),
      size_(size),
      pieces_(kMaxPiece * static_cast<std::size_t>(size)),
      scratch_(kChunk) {
  send_.resize(static_cast<std::size_t>(size));
  recv_.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    auto& pair = context_->getPair(r);
    pair->setSync(/*sync=*/true, /*busyPoll=*/false);
    send_[static_cast<std::size_t>(r)] = pair->createSendBuffer(kPieceSlot, piece(rank), kMaxPiece);
    recv_[static_cast<std::size_t>(r)] = pair->createRecvBuffer(kPieceSlot, piece(r), kMaxPiece);
  }
  // Gloo sizes a socket's send buffer to the largest message sent so far. Grown call by call
  // from a few bytes, it left 4 KiB pieces waiting for acknowledgements (~100 µs, not ~40).
  exchange(kMaxPiece);
}

void SyncMesh::exchange(std::size_t nbytes) {
  for (auto& buf : send_) {
    if (buf) buf->send(0, nbytes);
  }
  for (std::size_t r = 0; r < recv_.size(); ++r) {
    if (!recv_[r]) continue;
    recv_[r]->waitRecv();
    send_[r]->waitSend();
  }
}

void SyncMesh::reduce_scatter(const std::vector<const std::byte*>& in,
                              const std::vector<std::byte*>& work, std::byte* out,
                              const std::vector<std::size_t>& bytes, std::size_t element,
                              const Reduce& op) {
  const auto at = [&](int s) { return static_cast<std::size_t>(segment(s)); };
  if (size_ == 1) {
    std::memmove(out, in[0], bytes[0]);
    return;
  }
  auto& to_right = context_->getPair(right());
  auto scratch = context_->getPair(left())->createRecvBuffer(kScratchSlot, scratch_.data(), kChunk);
  // Step s sends segment rank-s-1 (this rank's own input at step 0, then the partial sum made at
  // step s-1) and adds the left's partial sum of segment rank-s-2 to this rank's input for it.
  // After W-1 steps the last segment summed is `rank`'s, complete: it goes to `out`.
  for (int s = 0; s < size_ - 1; ++s) {
    const std::size_t send = at(rank_ - s - 1), recv = at(rank_ - s - 2);
    std::byte* from = s == 0 ? const_cast<std::byte*>(in[send]) : work[send];  // Gloo only reads
    std::byte* to = s == size_ - 2 ? out : work[recv];
    auto sending = to_right->createSendBuffer(kScratchSlot, from, bytes[send]);
    ring_step(*sending, bytes[send], *scratch, bytes[recv], /*to_scratch=*/true,
              [&](std::size_t offset, std::size_t length) {
                op(to + offset, in[recv] + offset, scratch_.data(), length / element);
              });
  }
}

void SyncMesh::all_gather(const std::vector<std::byte*>& segments,
                          const std::vector<std::size_t>& bytes) {
  const auto at = [&](int s) { return static_cast<std::size_t>(segment(s)); };
  auto& to_right = context_->getPair(right());
  auto& from_left = context_->getPair(left());
  // Step s passes on segment rank-s: this rank's own at step 0, then what came from the left.
  for (int s = 0; s < size_ - 1; ++s) {
    const std::size_t send = at(rank_ - s), recv = at(rank_ - s - 1);
    auto sending = to_right->createSendBuffer(kGatherSlot, segments[send], bytes[send]);
    auto receiving = from_left->createRecvBuffer(kGatherSlot, segments[recv], bytes[recv]);
    ring_step(*sending, bytes[send], *receiving, bytes[recv], /*to_scratch=*/false,
              [](std::size_t, std::size_t) {});
  }
}

}  // namespace dist::backends
