// first_disagreement: does every rank hold rank 0's numbers? (internal)
//
// DistributedDataParallel checks that every rank wraps the same model, and ShardedDataParallel
// that every rank shards it the same way, before their first collective on the model: a mismatch
// is then an error on every rank, instead of collectives of different sizes that hang or mix
// unrelated values. Each rank contributes a few numbers (counts, sizes, a hash of the sizes);
// they are all_gathered and compared with rank 0's, as torch's
// _verify_param_shape_across_processes does.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist::detail {

struct Disagreement {
  int rank;                          // the first rank whose numbers differ from rank 0's
  std::vector<std::int64_t> theirs;  // its numbers
  std::vector<std::int64_t> rank0s;  // rank 0's
};

// A collective over `group`: every rank calls it with as many numbers.
inline std::optional<Disagreement> first_disagreement(ProcessGroup& group,
                                                      const std::vector<std::int64_t>& mine,
                                                      Device device) {
  std::vector<Tensor> everyone;
  group.all_gather(everyone, Tensor::from<std::int64_t>(mine, device));
  std::vector<std::int64_t> first = everyone[0].to_vector<std::int64_t>();
  for (std::size_t r = 1; r < everyone.size(); ++r) {
    std::vector<std::int64_t> other = everyone[r].to_vector<std::int64_t>();
    if (other != first)
      return Disagreement{static_cast<int>(r), std::move(other), std::move(first)};
  }
  return std::nullopt;
}

}  // namespace dist::detail
