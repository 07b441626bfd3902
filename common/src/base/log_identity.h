// Who this process is, for the "[rank R/W] " prefix of dist/log.h (internal).
//
// The log keeps the identity it prints itself, so that it needs nothing from init: init sets it
// once it has resolved this rank's place in the job, and clears it when the group is destroyed
// (or init fails). Without one, the prefix uses the launcher's RANK/WORLD_SIZE, or "[rank 0/1]".
// Reading it takes no lock, so a terminate handler can print it at any moment.
#pragma once

namespace dist {

void set_log_identity(int rank, int world_size);
void clear_log_identity();

}  // namespace dist
