// Atomic file writes (dist/files.h): a temporary file, fsync, rename.
#include "dist/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "dist/check.h"

namespace dist {
namespace {

std::string system_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // Same directory as `path`, so that rename() stays within one file system and is atomic; the
  // host and pid make the name unique even when two machines share the directory.
  const std::string temp = path + ".tmp-" + host + "-" + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(system_error("cannot create", temp) + "; does the directory exist?");
  std::size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Error error(system_error("cannot write", temp));
      ::close(fd);
      ::unlink(temp.c_str());
      throw error;
    }
    written += static_cast<std::size_t>(n);
  }
  // fsync before rename: after a crash the new name must not point at an empty file.
  const bool synced = ::fsync(fd) == 0;
  const int fsync_errno = errno;
  const bool closed = ::close(fd) == 0;  // always close, even when fsync failed
  if (!synced || !closed) {
    if (!synced) errno = fsync_errno;
    const Error error(system_error("cannot flush", temp));
    ::unlink(temp.c_str());
    throw error;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const Error error(system_error("cannot rename " + temp + " to", path));
    ::unlink(temp.c_str());
    throw error;
  }
}

}  // namespace dist
