// dist/files.h — writing a file that no reader ever sees half-written.
//
//   dist::write_file_atomically("checkpoint.bin", bytes);   // readers see the old file or the new
//
// A program that writes a file in place and dies halfway (a crash, a kill, a full disk) leaves a
// truncated file behind, and a rank that reads it meanwhile parses half a record. Writing to a
// temporary file next to it, flushing it to disk and renaming it over the old name avoids both:
// rename() replaces the name in one step within one file system.
//
// Taught in: chapter 05 (rank 0 prepares a data set while the others wait); used again for
// chapter 09's checkpoints and its trace.
// Built in: common/src/base/files.cpp.
#pragma once

#include <string>

namespace dist {

// Writes `contents` to `path` so that no reader ever sees a partial file: a temporary file next to
// it (named after the host and the process), flushed to disk, then renamed over `path` (rename is
// atomic within one file system). The directory must exist. Throws dist::Error naming the path
// and the system's reason on failure, and leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace dist
