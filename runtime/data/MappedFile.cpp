//===- MappedFile.cpp - A read-only memory mapping of a whole file --------===//

#include "runtime/data/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace kiln::rt::data {

namespace {

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

StatusOr<MappedFile> MappedFile::open(const std::string &path) {
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
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
      size_(std::exchange(other.size_, 0)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
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
