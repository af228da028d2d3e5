//===- Arena.h - Host storage for every buffer of an artifact -------------===//
//
// One 64-byte-aligned, zero-filled block per buffer that owns storage;
// aliases (reshape views, in-place optimizer outputs) get the pointer of the
// buffer they alias. 64 bytes is a cache line and the widest AVX-512 vector,
// so generated kernels may use aligned loads. The static memory plan (one
// block with offsets) replaces this in a later issue; the interface —
// `data(i)` and the pointer table — stays.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ARENA_H
#define KILN_RUNTIME_CPU_ARENA_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::rt::cpu {

class Arena {
public:
  // Allocates storage for every buffer of `artifact` and copies the contents
  // of Constant buffers. Fails, before allocating anything, when the step
  // needs more than the host's available memory (checkFits).
  static StatusOr<std::unique_ptr<Arena>> create(const Artifact &artifact);
  // Fails with the step's storage broken down by role (parameters,
  // gradients, optimizer state, activations) when it exceeds
  // `availableBytes`; a negative `availableBytes` means unknown (passes).
  static Status checkFits(const Artifact &artifact, int64_t availableBytes);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  void *data(uint32_t buffer) const { return pointers_[buffer]; }
  template <typename T> T *as(uint32_t buffer) const {
    return static_cast<T *>(pointers_[buffer]);
  }
  // Pointer of every buffer, indexed by buffer index.
  const std::vector<void *> &pointers() const { return pointers_; }
  // Bytes allocated (aliases counted once).
  int64_t totalBytes() const { return totalBytes_; }

private:
  Arena() = default;
  std::vector<void *> blocks_; // owned allocations
  std::vector<void *> pointers_;
  int64_t totalBytes_ = 0;
};

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_ARENA_H
