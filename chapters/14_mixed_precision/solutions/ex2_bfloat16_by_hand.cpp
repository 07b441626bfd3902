// Chapter 14, exercise 2 — float32 to bfloat16 by hand, from the bits.
//
// A bfloat16 is the top 16 bits of a float32: the sign, the same 8 exponent bits, 7 of the 23
// mantissa bits. Converting drops the low 16 bits, rounding to nearest: add one to the kept bits
// when the dropped ones are more than half (above 0x8000), and, when they are exactly half (a
// tie), only if the kept last bit is odd, so that ties go to the even neighbour (torch's rule, and
// IEEE's). A carry may run into the exponent: that is the right answer (up to inf). A NaN must stay
// a NaN: torch writes 0x7fc0 for every one. The values are shared out over the ranks, each rank
// rounding every W-th one.
// Grade it: ./tutorial check 14-ex2        Run it: ./tutorial run 14-ex2 --solution
#include <dist/dist.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

// float32 bits -> bfloat16 bits, rounded to nearest even.
std::uint16_t to_bfloat16_bits(std::uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // any NaN: torch's NaN
  const std::uint32_t kept_last_bit = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + kept_last_bit) >> 16);
}

// The values to round: edge cases, ties both ways, then bit patterns from a fixed generator.
std::vector<std::uint32_t> values() {
  std::vector<std::uint32_t> v = {
      0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x3dcccccd,  // 0, -0, 1, -1, 0.1
      0x477fe000, 0x477ff000, 0x7f7fffff, 0x7f800000, 0xff800000,  // 65504, 65520, max, +-inf
      0x7f800001, 0xffc00000, 0x7fa00000,                          // NaNs
      0x3f808000, 0x3f818000, 0xbf808000, 0x00008000, 0x00018000,  // ties: even, odd, -, tiny
      0x3f807fff, 0x3f808001, 0x7f7f8000, 0x7f7f7fff};             // either side; a carry to inf
  std::uint64_t state = 14;
  for (int i = 0; i < 600; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::uint32_t bits = static_cast<std::uint32_t>(state >> 32);
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // a tie every fourth
    v.push_back(bits);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli(
        "ch14_mixed_precision_ex2",
        "float32 to bfloat16 by hand: each rank rounds its share of the values from their "
        "bits and prints them beside dist's cast.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::vector<std::uint32_t> all = values();
    dist::out0() << "values: " << all.size();
    int differ = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (static_cast<int>(i % static_cast<std::size_t>(world)) != rank) continue;
      const std::uint16_t mine = to_bfloat16_bits(all[i]);
      char line[64];
      std::snprintf(line, sizeof line, "round %zu: %08x -> %04x", i, all[i], mine);
      dist::out() << line;
      differ += mine != dist::BFloat16(std::bit_cast<float>(all[i])).bits;
    }
    dist::out() << differ << " of this rank's values differ from dist::BFloat16's cast";
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
