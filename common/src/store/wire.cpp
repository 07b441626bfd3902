// Frame encoding and bounds-checked decoding for the TCP store (see wire.h).
#include "store/wire.h"

#include <charconv>

namespace dist::wire {

void append_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

std::uint32_t read_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

bool parse_i64(const std::string& text, std::int64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

Writer& Writer::field(std::string_view f) {
  append_u32(bytes_, static_cast<std::uint32_t>(f.size()));
  bytes_.append(f);
  return *this;
}

std::string Writer::finish() {
  std::string length;
  append_u32(length, static_cast<std::uint32_t>(bytes_.size() - 4));
  bytes_.replace(0, 4, length);
  return std::move(bytes_);
}

std::optional<Message> parse_payload(std::string_view payload) {
  if (payload.empty()) return std::nullopt;
  Message m;
  m.head = static_cast<std::uint8_t>(payload[0]);
  std::size_t pos = 1;
  while (pos < payload.size()) {
    if (payload.size() - pos < 4 || m.fields.size() >= kMaxFieldsPerFrame) return std::nullopt;
    const std::uint32_t len = read_u32(payload.data() + pos);
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
