// Sharing an NCCL unique id through the store (see unique_id.h).
#include "backends/unique_id.h"

#include <algorithm>

#include "dist/check.h"
#include "util/text.h"

namespace dist::backends {

NcclUniqueId share_unique_id(Store& store, int rank, const std::function<NcclUniqueId()>& make) {
  const std::string key = kUniqueIdKey;
  if (rank == 0) {
    const NcclUniqueId id = make();
    store.set(key, std::string(id.begin(), id.end()));
    return id;
  }
  std::string value;
  try {
    value = store.get(key);
  } catch (const TimeoutError&) {
    throw TimeoutError("rank " + std::to_string(rank) + " waited " +
                       util::seconds(store.timeout()) +
                       " for rank 0 to publish the NCCL unique id (store key \"" + key +
                       "\") and it never did: rank 0 failed or is stuck before creating its "
                       "NCCL communicator; look for its error above");
  }
  if (value.size() != kNcclUniqueIdBytes) {
    throw Error("the NCCL unique id under store key \"" + key + "\" has " +
                std::to_string(value.size()) + " bytes instead of " +
                std::to_string(kNcclUniqueIdBytes) +
                ": another program wrote that key; use a rendezvous address of your own");
  }
  NcclUniqueId id{};
  std::copy(value.begin(), value.end(), id.begin());
  return id;
}

}  // namespace dist::backends
