// Post B's data and each rank's initial weights (post_b_data.h).
#include "post_b_data.h"

#include <cstdint>

namespace ch08 {

Dataset make_dataset(int n, int seed) {
  constexpr std::int64_t kSteps = 1 << 24;  // 24 bits: k / 2^24 is exact in float32
  dist::Generator g(static_cast<std::uint64_t>(seed));
  const std::vector<std::int64_t> kx = dist::randint(0, kSteps, n, g).to_vector<std::int64_t>();
  const std::vector<std::int64_t> kn = dist::randint(0, kSteps, n, g).to_vector<std::int64_t>();
  Dataset d;
  for (int i = 0; i < n; ++i) {
    const auto x = static_cast<float>(4.0 * static_cast<double>(kx[i]) / kSteps - 2.0);
    const double noise = (static_cast<double>(kn[i]) / kSteps - 0.5) * 0.2;
    d.x.push_back(x);
    d.y.push_back(static_cast<float>(3.0 * x + 2.0 + noise));
  }
  return d;
}

dist::LinearInit initial_weights(int seed, int rank) {
  dist::Generator g(static_cast<std::uint64_t>(seed) + 1 + static_cast<std::uint64_t>(rank));
  const std::vector<std::int64_t> k = dist::randint(0, 1 << 24, 2, g).to_vector<std::int64_t>();
  const auto uniform = [](std::int64_t v) { return static_cast<float>(v / double{1 << 23} - 1.0); };
  return {{uniform(k[0])}, {uniform(k[1])}};
}

}  // namespace ch08
