// Frame encoding and bounds-checked decoding for the TCP store (see wire.h).
#include "store/wire.h"

#include <cstring>

namespace dist::wire {
namespace {

void put_u32(char* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}

}  // namespace

std::uint32_t read_length(const char* prefix) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  return v;
}

Writer& Writer::field(std::string_view f) {
  char len[4];
  put_u32(len, static_cast<std::uint32_t>(f.size()));
  bytes_.append(len, 4);
  bytes_.append(f);
  return *this;
}

std::string Writer::finish() {
  put_u32(bytes_.data(), static_cast<std::uint32_t>(bytes_.size() - 4));
  return std::move(bytes_);
}

std::optional<Message> parse_payload(std::string_view payload) {
  if (payload.empty()) return std::nullopt;
  Message m;
  m.head = static_cast<std::uint8_t>(payload[0]);
  std::size_t pos = 1;
  while (pos < payload.size()) {
    if (payload.size() - pos < 4 || m.fields.size() >= kMaxFieldsPerFrame) return std::nullopt;
    const std::uint32_t len = read_length(payload.data() + pos);
    pos += 4;
    if (len > payload.size() - pos) return std::nullopt;
    m.fields.emplace_back(payload.substr(pos, len));
    pos += len;
  }
  return m;
}

std::string encode_u64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xffu);
  return s;
}

}  // namespace dist::wire
