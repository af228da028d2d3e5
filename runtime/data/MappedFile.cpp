//===- MappedFile.cpp - A read-only memory mapping of a whole file --------===//

#include "runtime/data/MappedFile.h"

#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace kiln::rt::data {

namespace {

// The jump target of this thread's readMappedSafely, null outside one.
thread_local sigjmp_buf *busErrorJump = nullptr;
struct sigaction previousBusAction;

void onBusError(int signal, siginfo_t *info, void *) {
  // A fault (si_code > 0) in a guarded read: the mapped file is shorter.
  sigjmp_buf *jump = busErrorJump;
  if (jump && info && info->si_code > 0)
    siglongjmp(*jump, 1);
  // Anything else does what SIGBUS did before (by default, end the
  // process): a fault when its access runs again, a kill -BUS at once.
  ::sigaction(signal, &previousBusAction, nullptr);
  if (!info || info->si_code <= 0)
    ::raise(signal);
}

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

bool readMappedSafely(void (*fn)(void *), void *context) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = onBusError;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previousBusAction);
  });
  // No signal mask to save (savesigs 0: no system call per read): the
  // handler runs with SA_NODEFER and an empty sa_mask, so it leaves the mask
  // as it found it.
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) {
    busErrorJump = nullptr;
    return false;
  }
  busErrorJump = &jump;
  fn(context);
  busErrorJump = nullptr;
  return true;
}

StatusOr<MappedFile> MappedFile::open(const std::string &path) {
  // O_NONBLOCK: a named pipe opens at once (and fails the regular-file
  // check below) instead of waiting for a writer; regular files ignore it.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) {
    int error = errno;
    if (error == ENOENT)
      return notFound("data file ", path, ": no such file");
    return invalidArgument("data file ", path,
                           ": cannot open: ", std::strerror(error));
  }
  struct stat info;
  if (::fstat(file.fd, &info) != 0)
    return internalError("data file ", path,
                         ": cannot stat: ", std::strerror(errno));
  if (S_ISDIR(info.st_mode))
    return invalidArgument("data file ", path,
                           ": is a directory, not a token file");
  if (!S_ISREG(info.st_mode))
    return invalidArgument("data file ", path,
                           ": is not a regular file (token files are mapped)");

  MappedFile mapped;
  mapped.size_ = static_cast<size_t>(info.st_size);
  mapped.device_ = static_cast<uint64_t>(info.st_dev);
  mapped.inode_ = static_cast<uint64_t>(info.st_ino);
  if (mapped.size_ == 0)
    return mapped; // mmap rejects length 0; an empty file has no bytes
  void *address =
      ::mmap(nullptr, mapped.size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (address == MAP_FAILED)
    return internalError("data file ", path, ": cannot map ", mapped.size_,
                         " bytes: ", std::strerror(errno));
  mapped.data_ = static_cast<const uint8_t *>(address);
  return mapped;
}

MappedFile::MappedFile(MappedFile &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, 0)),
      inode_(std::exchange(other.inode_, 0)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, 0);
    inode_ = std::exchange(other.inode_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { unmap(); }

void MappedFile::unmap() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace kiln::rt::data
