// The TCP store's wire format, shared by its server and client (internal header).
//
// A frame is a 4-byte little-endian payload length, then the payload: one opcode byte followed by
// fields, each a 4-byte little-endian length and that many bytes. Replies use the same framing
// with a status byte in place of the opcode. Lengths are checked against hard bounds before any
// allocation, so a malformed or hostile frame costs the server one closed connection, no more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dist/store.h"

namespace dist::wire {

enum class Op : std::uint8_t {
  kHello = 1,
  kSet,
  kGet,
  kAdd,
  kCompareSet,
  kWait,
  kCheck,
  kDelete,
  kNumKeys,
};
// kTimeout: a get/wait whose server-side deadline passed; the connection stays usable.
// kWrongToken: the hello's token is not the server's (DIST_STORE_TOKEN); the connection closes.
enum class Status : std::uint8_t {
  kOk = 0,
  kError = 1,
  kWrongSession = 2,
  kTimeout = 3,
  kWrongToken = 4
};

inline constexpr std::string_view kMagic = "dist-store-v1";
// Largest payload either side accepts: one value, a few keys, and the field headers.
inline constexpr std::uint32_t kMaxFrameBytes =
    static_cast<std::uint32_t>(kMaxStoreValueBytes + 4 * kMaxStoreKeyBytes + 64);
inline constexpr std::size_t kMaxFieldsPerFrame = 4096;
// Largest hello frame, and reply to one: the server reads no more from a connection that has not
// passed the handshake, and the client takes a longer answer for a stranger's.
inline constexpr std::uint32_t kMaxHelloBytes = 4096;

// Builds one frame: the length prefix is filled in by finish().
class Writer {
 public:
  explicit Writer(std::uint8_t head) : bytes_(4, '\0') {
    bytes_.push_back(static_cast<char>(head));
  }
  Writer& field(std::string_view f);
  std::string finish();

 private:
  std::string bytes_;
};

// A parsed payload: the head byte and the fields. nullopt if the payload is malformed.
struct Message {
  std::uint8_t head = 0;
  std::vector<std::string> fields;
};
std::optional<Message> parse_payload(std::string_view payload);

// Little-endian integers: the one encoding of lengths on the wire and in the file store's log.
void append_u32(std::string& out, std::uint32_t v);
std::uint32_t read_u32(const char* p);  // e.g. the payload length a frame's prefix announces
std::string encode_u64(std::uint64_t v);

// `text` as a whole decimal integer; false if it is not one (or has anything after it).
bool parse_i64(const std::string& text, std::int64_t& out);

}  // namespace dist::wire
