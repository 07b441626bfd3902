// SyncMesh: see gloo_sync_mesh.h. Gloo's exceptions pass through; the backend turns them into
// errors that name the call.
#include "backends/gloo_sync_mesh.h"

#include <gloo/transport/pair.h>

#include <algorithm>

namespace dist::backends {
namespace {

// Bound buffers are matched by slot: a message sent from a buffer with slot S lands in the
// receiver's buffer with slot S, at the offset the sender names. A buffer of either kind, when
// destroyed, unregisters its pair's slot, so a slot's send and receive buffers live and die
// together: the pieces' for the mesh's life, the ring's for one call.
constexpr int kPieceSlot = 1, kScratchSlot = 2, kGatherSlot = 3;

// One ring step: the chunks of send [sb, se) go to the right while those of recv [rb, re) come
// from the left, one chunk sent ahead of the one received; received(offset, length) runs once
// each received chunk is in. Offsets are in bytes.
template <typename Received>
void ring_step(gloo::transport::Buffer& out, std::size_t sb, std::size_t se,
               gloo::transport::Buffer& in, std::size_t rb, std::size_t re, bool to_scratch,
               Received&& received) {
  const std::size_t chunk = SyncMesh::kChunk;
  const std::size_t sends = (se - sb + chunk - 1) / chunk, recvs = (re - rb + chunk - 1) / chunk;
  const auto send = [&](std::size_t k) {
    const std::size_t offset = sb + k * chunk, length = std::min(chunk, se - offset);
    out.send(offset, length, to_scratch ? 0 : offset);
    out.waitSend();  // synchronous: the bytes are in the socket already
  };
  if (sends > 0) send(0);
  for (std::size_t k = 0; k < std::max(sends, recvs); ++k) {
    if (k + 1 < sends) send(k + 1);
    if (k < recvs) {
      in.waitRecv();
      const std::size_t offset = rb + k * chunk;
      received(offset, std::min(chunk, re - offset));
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

void SyncMesh::reduce_scatter(std::byte* data, std::size_t count, std::size_t element,
                              const Reduce& op) {
  if (size_ == 1) return;
  auto out = context_->getPair(right())->createSendBuffer(kScratchSlot, data, count * element);
  auto in = context_->getPair(left())->createRecvBuffer(kScratchSlot, scratch_.data(), kChunk);
  const auto bytes = [&](int s) { return segment_begin(count, segment(s)) * element; };
  const auto end = [&](int s) { return segment_begin(count, segment(s) + 1) * element; };
  // Step s sends segment rank-s-1 (reduced at step s-1) and reduces segment rank-s-2 into this
  // rank's copy; after W-1 steps the last one reduced is segment `rank`, complete.
  for (int s = 0; s < size_ - 1; ++s) {
    const int send = rank_ - s - 1, recv = rank_ - s - 2;
    ring_step(*out, bytes(send), end(send), *in, bytes(recv), end(recv),
              /*to_scratch=*/true, [&](std::size_t offset, std::size_t length) {
                op(data + offset, data + offset, scratch_.data(), length / element);
              });
  }
}

void SyncMesh::all_gather(std::byte* data, std::size_t count, std::size_t element) {
  if (size_ == 1) return;
  auto out = context_->getPair(right())->createSendBuffer(kGatherSlot, data, count * element);
  auto in = context_->getPair(left())->createRecvBuffer(kGatherSlot, data, count * element);
  const auto bytes = [&](int s) { return segment_begin(count, segment(s)) * element; };
  const auto end = [&](int s) { return segment_begin(count, segment(s) + 1) * element; };
  // Step s passes on segment rank-s (this rank's own at step 0, then what came from the left).
  for (int s = 0; s < size_ - 1; ++s) {
    const int send = rank_ - s, recv = rank_ - s - 1;
    ring_step(*out, bytes(send), end(send), *in, bytes(recv), end(recv), /*to_scratch=*/false,
              [](std::size_t, std::size_t) {});
  }
}

}  // namespace dist::backends
