// MeshCollectives: see gloo_mesh.h.
#include "backends/gloo_mesh.h"

#include <gloo/transport/pair.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "dist/check.h"

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
// `in` is reduce_scatter's one-chunk scratch. Each chunk sent is reported to `sent`.
template <typename Received>
void ring_step(gloo::transport::Buffer& out, std::size_t sends, gloo::transport::Buffer& in,
               std::size_t recvs, bool to_scratch, const MeshCollectives::Sent& sent,
               Received&& received) {
  const std::size_t chunk = MeshCollectives::kChunk;
  const std::size_t send_chunks = (sends + chunk - 1) / chunk;
  const std::size_t recv_chunks = (recvs + chunk - 1) / chunk;
  const auto send = [&](std::size_t k) {
    const std::size_t offset = k * chunk, length = std::min(chunk, sends - offset);
    out.send(offset, length, to_scratch ? 0 : offset);
    out.waitSend();  // synchronous: the bytes are in the socket already
    if (sent) sent(length, 0);
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

// What each rank says about its call before any data moves.
struct MeshCollectives::Header {
  std::uint64_t seq;
  std::int64_t numel;
  std::int32_t dtype, op;  // op: -1 for a collective without one

  explicit Header(const Signature& call)
      : seq(call.seq),
        numel(call.numel),
        dtype(static_cast<std::int32_t>(call.dtype)),
        op(call.op ? static_cast<std::int32_t>(*call.op) : -1) {}
  Header() = default;
  bool operator==(const Header&) const = default;
};

MeshCollectives::MeshCollectives(std::shared_ptr<gloo::Context> context, int rank, int size)
    : context_(std::move(context)),
      rank_(rank),
      size_(size),
      pieces_(kMaxPiece * static_cast<std::size_t>(size)),
      scratch_(kChunk) {
  static_assert(sizeof(Header) == kHeaderBytes);
  send_.resize(static_cast<std::size_t>(size));
  recv_.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    auto& pair = context_->getPair(r);
    pair->setSync(/*sync=*/true, /*busyPoll=*/false);
    send_[static_cast<std::size_t>(r)] = pair->createSendBuffer(kPieceSlot, piece(rank), kMaxPiece);
    recv_[static_cast<std::size_t>(r)] = pair->createRecvBuffer(kPieceSlot, piece(r), kMaxPiece);
  }
}

// Gloo sizes a socket's send buffer to the largest message sent so far. Grown call by call from
// a few bytes, it left 4 KiB pieces waiting for acknowledgements (~100 µs, not ~40).
void MeshCollectives::size_send_buffers() {
  exchange(kMaxPiece, 0);
}

void MeshCollectives::exchange(std::size_t nbytes, std::size_t header) {
  for (auto& buf : send_) {
    if (buf) buf->send(0, nbytes);
  }
  for (std::size_t r = 0; r < recv_.size(); ++r) {
    if (!recv_[r]) continue;
    recv_[r]->waitRecv();
    send_[r]->waitSend();
    if (sent_) sent_(nbytes - header, header);
  }
}

void MeshCollectives::agree(const Signature& call) {
  const Header mine(call);
  std::memcpy(piece(rank_), &mine, sizeof mine);
  exchange(sizeof mine, sizeof mine);
  check_same_call(call, mine);
}

// Every call goes through here, so the common case is a comparison only; the message naming
// each rank's call is built when the calls differ.
void MeshCollectives::check_same_call(const Signature& call, const Header& mine) {
  const auto theirs = [&](int r) {
    Header h;
    std::memcpy(&h, piece(r), sizeof h);
    return h;
  };
  bool same = true;
  for (int r = 0; r < size_ && same; ++r) same = theirs(r) == mine;
  if (same) return;
  std::string calls;
  for (int r = 0; r < size_; ++r) {
    const Header h = theirs(r);
    calls += "; rank " + std::to_string(r) + ": collective #" + std::to_string(h.seq) + ", " +
             std::to_string(h.numel) + " elements, " +
             std::string(dtype_name(static_cast<DType>(h.dtype))) +
             (h.op < 0 ? "" : ", " + std::string(reduce_op_name(static_cast<ReduceOp>(h.op))));
  }
  throw Error(std::string(call.name) + " #" + std::to_string(call.seq) + " on rank " +
              std::to_string(rank_) +
              ": the ranks called it with different tensors or reduce ops, or at different "
              "points of their programs" +
              calls +
              ". Every rank must make the same collective calls in the same order, with the "
              "same size, dtype and op.");
}

void MeshCollectives::all_reduce(void* data, const Signature& call, const Reduce& reduce) {
  const std::size_t element = element_size(call.dtype);
  const auto n = static_cast<std::size_t>(call.numel);
  const Header mine(call);
  if (sizeof mine + n * element <= kMaxPiece) {
    // Small tensors: the ring takes 2(W-1) steps of one message latency each, and for a few
    // bytes latency is all there is. One step instead: header and tensor to every rank.
    std::byte* own = piece(rank_);
    std::memcpy(own, &mine, sizeof mine);
    std::memcpy(own + sizeof mine, data, n * element);
    exchange(sizeof mine + n * element, sizeof mine);
    check_same_call(call, mine);
    std::memcpy(data, piece(0) + sizeof mine, n * element);
    for (int r = 1; r < size_; ++r) reduce(data, data, piece(r) + sizeof mine, n);
    return;
  }
  // Chapter 04's ring, in place: reduce-scatter, then all-gather.
  agree(call);
  auto* bytes_of = static_cast<std::byte*>(data);
  std::vector<std::byte*> segments;
  std::vector<std::size_t> bytes;
  for (int s = 0; s < size_; ++s) {
    const std::size_t begin = segment_begin(n, s);
    segments.push_back(bytes_of + begin * element);
    bytes.push_back((segment_begin(n, s + 1) - begin) * element);
  }
  const std::vector<const std::byte*> in(segments.begin(), segments.end());
  ring_reduce_scatter(in, segments, segments[static_cast<std::size_t>(rank_)], bytes, element,
                      reduce);
  ring_all_gather(segments, bytes);
}

void MeshCollectives::reduce_scatter(const std::vector<const void*>& inputs, void* output,
                                     const Signature& call, const Reduce& reduce) {
  agree(call);
  const std::size_t element = element_size(call.dtype);
  const std::size_t piece_bytes = static_cast<std::size_t>(call.numel) * element;
  // The inputs are only read. The ring's partial sums go to a scratch buffer, one part for each
  // segment but the last two it reduces: segment rank-1 goes out from the input at step 0, and
  // segment `rank` is summed into `output` at the last step. At 2 ranks that is every segment.
  const std::size_t parts = static_cast<std::size_t>(std::max(size_ - 2, 0));
  const std::unique_ptr<std::byte[]> scratch(new std::byte[parts * piece_bytes]);
  std::vector<const std::byte*> in;
  std::vector<std::byte*> work;
  for (int s = 0; s < size_; ++s) {
    in.push_back(static_cast<const std::byte*>(inputs[static_cast<std::size_t>(s)]));
    const std::size_t part = at(s - rank_ - 1);  // rank+1 -> 0, ..., rank-2 -> W-3
    work.push_back(part < parts ? scratch.get() + part * piece_bytes : nullptr);
  }
  ring_reduce_scatter(in, work, static_cast<std::byte*>(output),
                      std::vector<std::size_t>(inputs.size(), piece_bytes), element, reduce);
}

void MeshCollectives::all_gather(const std::vector<void*>& outputs, const Signature& call) {
  agree(call);
  std::vector<std::byte*> segments;
  for (void* out : outputs) segments.push_back(static_cast<std::byte*>(out));
  ring_all_gather(segments,
                  std::vector<std::size_t>(outputs.size(), static_cast<std::size_t>(call.numel) *
                                                               element_size(call.dtype)));
}

void MeshCollectives::ring_reduce_scatter(const std::vector<const std::byte*>& in,
                                          const std::vector<std::byte*>& work, std::byte* out,
                                          const std::vector<std::size_t>& bytes,
                                          std::size_t element, const Reduce& reduce) {
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
    ring_step(*sending, bytes[send], *scratch, bytes[recv], /*to_scratch=*/true, sent_,
              [&](std::size_t offset, std::size_t length) {
                reduce(to + offset, in[recv] + offset, scratch_.data(), length / element);
              });
  }
}

void MeshCollectives::ring_all_gather(const std::vector<std::byte*>& segments,
                                      const std::vector<std::size_t>& bytes) {
  auto& to_right = context_->getPair(right());
  auto& from_left = context_->getPair(left());
  // Step s passes on segment rank-s: this rank's own at step 0, then what came from the left.
  for (int s = 0; s < size_ - 1; ++s) {
    const std::size_t send = at(rank_ - s), recv = at(rank_ - s - 1);
    auto sending = to_right->createSendBuffer(kGatherSlot, segments[send], bytes[send]);
    auto receiving = from_left->createRecvBuffer(kGatherSlot, segments[recv], bytes[recv]);
    ring_step(*sending, bytes[send], *receiving, bytes[recv], /*to_scratch=*/false, sent_,
              [](std::size_t, std::size_t) {});
  }
}

}  // namespace dist::backends
