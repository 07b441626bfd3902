// Shared message pieces (see text.h).
#include "util/text.h"

#include <sstream>

namespace dist::util {

std::string seconds(std::chrono::milliseconds ms) {
  std::ostringstream s;
  s << static_cast<double>(ms.count()) / 1000.0 << " s";
  return s.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

}  // namespace dist::util
