//===- MappedFile.h - A read-only memory mapping of a whole file ----------===//
//
// Token files are mapped, not read: a multi-GB glob of shards then costs
// address space but no RAM, pages are faulted in as windows are read, and the
// kernel drops them again under memory pressure. The mapping is private and
// read-only, so the runtime can never write to a user's data. A file cut
// short under its mapping is an error, not a crash (readMappedSafely).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_MAPPEDFILE_H
#define KILN_RUNTIME_DATA_MAPPEDFILE_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::rt::data {

// Runs fn(context), which reads mapped files on this thread, and returns
// false, with fn cut short, when a read touched a page past the end of its
// file: the file shrank after it was mapped (a shard rewritten in place while
// training), which the kernel reports as SIGBUS. fn must not own anything
// with a destructor (it is left by siglongjmp). A SIGBUS outside such a call
// keeps its default action. A file cut inside a page still reads zeros up to
// that page's end (the kernel maps whole pages): only reads beyond it fault,
// so a reader also checks the file's size after reading (TokenWindows).
bool readMappedSafely(void (*fn)(void *), void *context);

class MappedFile {
public:
  // Maps all of `path`. Errors name the file: missing, a directory, or the
  // OS reason open/fstat/mmap failed. An empty file maps to size() == 0.
  static StatusOr<MappedFile> open(const std::string &path);

  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  // The mapped file's identity (st_dev, st_ino when it was opened): the
  // mapping keeps reading that file even once its path names another.
  uint64_t device() const { return device_; }
  uint64_t inode() const { return inode_; }

private:
  void unmap();

  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  uint64_t device_ = 0, inode_ = 0;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_MAPPEDFILE_H
