//===- MappedFile.h - A read-only memory mapping of a whole file ----------===//
//
// Token files are mapped, not read: a multi-GB glob of shards then costs
// address space but no RAM, pages are faulted in as windows are read, and the
// kernel drops them again under memory pressure. The mapping is private and
// read-only, so the runtime can never write to a user's data.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_MAPPEDFILE_H
#define KILN_RUNTIME_DATA_MAPPEDFILE_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::rt::data {

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

private:
  void unmap();

  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_MAPPEDFILE_H
