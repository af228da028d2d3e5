//===- FileIO.cpp - Whole-file reads and crash-safe writes ----------------===//
//
// POSIX calls rather than iostreams so that every failure has an errno to
// report and fsync is available (std::filesystem only for rm -rf).
//
//===----------------------------------------------------------------------===//

#include "runtime/FileIO.h"

#include "runtime/Hash.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::rt {

namespace {

std::string errnoText() { return std::strerror(errno); }

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

// write(2) may write fewer bytes than asked (signals, pipes); loop until done.
bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

} // namespace

StatusOr<std::vector<uint8_t>> readFileBytes(const std::string &path) {
  // O_NONBLOCK: a named pipe opens at once (and fails the regular-file
  // check below) instead of waiting for a writer; regular files ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      return notFound(path, ": no such file");
    return invalidArgument(path, ": cannot open (", errnoText(), ")");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalidArgument(path, ": not a regular file");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      return dataLoss(path, ": read failed after ", done, " of ",
                      bytes.size(), " bytes (",
                      n == 0 ? "unexpected end of file" : errnoText(), ")");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

StatusOr<std::string> fileContentHash(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return invalidArgument(path, ": cannot open (", errnoText(), ")");
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalidArgument(path, ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  uint64_t hash = contentHash64(nullptr, 0);
  if (size > 0) {
    void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      std::string why = errnoText();
      ::close(fd);
      return internalError(path, ": cannot map ", size, " bytes (", why, ")");
    }
    ::madvise(mapped, size, MADV_SEQUENTIAL);
    hash = contentHash64(mapped, size);
    ::munmap(mapped, size);
  }
  ::close(fd);
  char text[32];
  std::snprintf(text, sizeof(text), "ch64:%016llx", static_cast<unsigned long long>(hash));
  return std::string(text);
}

namespace {

// Writes `chunks` into `path` as it is: a device, pipe or terminal.
Status writeInPlace(const std::string &path, const std::vector<std::string_view> &chunks) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0)
    return invalidArgument(path, ": cannot open for writing (", errnoText(), ")");
  for (std::string_view chunk : chunks)
    if (!writeAll(fd, chunk.data(), chunk.size())) {
      std::string reason = errnoText();
      ::close(fd);
      return invalidArgument(path, ": write failed (", reason, ")");
    }
  if (::close(fd) != 0)
    return invalidArgument(path, ": write failed (", errnoText(), ")");
  return okStatus();
}

} // namespace

Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &chunks) {
  // What is replaced: a regular file (or nothing) by renaming a temp file
  // over it. Anything else is written in place: renaming over /dev/null
  // would replace the device with a regular file (as root, for everyone),
  // and /dev/stdout, /proc/self/fd/N name an open file, not a place. A
  // symlink stays: the file it names is replaced.
  struct stat st;
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return invalidArgument(path, ": is a directory");
  if ((exists && !S_ISREG(st.st_mode)) || path.rfind("/dev/", 0) == 0 ||
      path.rfind("/proc/", 0) == 0)
    return writeInPlace(path, chunks);
  std::string target = path;
  struct stat link;
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    char *resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved) // a dangling link: create its target through it
      return writeInPlace(path, chunks);
    target = resolved;
    std::free(resolved);
  }
  // The temp name carries the pid so concurrent writers (two kiln-run
  // processes filling the same kernel cache) never share a temp file.
  std::string tmp = target + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return invalidArgument(path, ": cannot create (", errnoText(), ")");
  for (std::string_view chunk : chunks) {
    if (!writeAll(fd, chunk.data(), chunk.size())) {
      std::string reason = errnoText();
      ::close(fd);
      ::unlink(tmp.c_str());
      return invalidArgument(path, ": write failed (", reason, ")");
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string reason = errnoText();
    ::unlink(tmp.c_str());
    return invalidArgument(path, ": fsync failed (", reason, ")");
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string reason = errnoText();
    ::unlink(tmp.c_str());
    return invalidArgument(path, ": rename failed (", reason, ")");
  }
  // Persist the directory entry too, or a crash can lose the rename.
  return syncDirectory(parentDirectory(target));
}

Status createDirectories(const std::string &dir) {
  if (dir.empty())
    return okStatus();
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    prefix = dir.substr(0, pos);
    if (prefix.empty())
      continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return invalidArgument(prefix, ": cannot create directory (",
                             errnoText(), ")");
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return invalidArgument(dir, ": not a directory");
  return okStatus();
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return invalidArgument(dir, ": cannot open directory to fsync it (",
                           errnoText(), ")");
  // Some file systems (FUSE, some network mounts) cannot fsync a directory
  // and say so with EINVAL/ENOTSUP: nothing more can be done there, and
  // refusing to write at all would be worse.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP &&
      errno != EOPNOTSUPP) {
    std::string reason = errnoText();
    ::close(fd);
    return invalidArgument(dir, ": fsync of the directory failed (", reason,
                           ")");
  }
  ::close(fd);
  return okStatus();
}

Status renamePath(const std::string &from, const std::string &to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    return invalidArgument(from, ": cannot rename to ", to, " (", errnoText(),
                           ")");
  return okStatus();
}

Status removeRecursively(const std::string &path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error)
    return invalidArgument(path, ": cannot remove (", error.message(), ")");
  return okStatus();
}

StatusOr<std::vector<std::string>> listDirectory(const std::string &dir) {
  DIR *handle = ::opendir(dir.c_str());
  if (!handle) {
    if (errno == ENOENT)
      return notFound(dir, ": no such directory");
    return invalidArgument(dir, ": cannot list (", errnoText(), ")");
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent *entry = ::readdir(handle)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(std::move(name));
    errno = 0;
  }
  int readErrno = errno;
  ::closedir(handle);
  if (readErrno != 0)
    return invalidArgument(dir, ": listing failed (", std::strerror(readErrno),
                           ")");
  return names;
}

} // namespace kiln::rt
