// FNV-1a, 64 bits (internal): a tiny, well-known hash for values that every rank computes on its
// own and compares, never for security. One place for its two constants, so no copy can get one
// wrong. Reference values: "" hashes to 0xcbf29ce484222325, "a" to 0xaf63dc4c8601ec8c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dist::util {

class Fnv1a {
 public:
  static constexpr std::uint64_t kOffsetBasis = 14695981039346656037ULL;
  static constexpr std::uint64_t kPrime = 1099511628211ULL;

  constexpr Fnv1a& add(std::string_view bytes) {
    for (const char c : bytes) mix(static_cast<unsigned char>(c));
    return *this;
  }
  Fnv1a& add(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) mix(p[i]);
    return *this;
  }
  constexpr std::uint64_t value() const { return hash_; }

 private:
  constexpr void mix(unsigned char byte) { hash_ = (hash_ ^ byte) * kPrime; }

  std::uint64_t hash_ = kOffsetBasis;
};

}  // namespace dist::util
