//===- Arena.h - Host storage for every buffer of an artifact -------------===//
//
// One zero-filled block of Artifact.arena_bytes, aligned to kArenaAlignment
// (256 bytes: a multiple of the cache line and the widest AVX-512 vector, so
// generated kernels may use aligned loads); buffer i lives at base +
// bufferInfo(i).offset, the static memory plan's offset (aliases resolve to
// their storage). The verifier has already proved that no two live buffers
// share bytes (runtime/MemoryPlanCheck.cpp).
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
  // Allocates the arena of `artifact` and copies the contents of Constant
  // buffers. Fails, before allocating anything, when the plan needs more
  // than the host's available memory (checkFits).
  static StatusOr<std::unique_ptr<Arena>> create(const Artifact &artifact);
  // Fails when the plan's arena exceeds `availableBytes`, saying how much
  // each category needs (parameters, gradients, optimizer state,
  // activations, workspace, other) and which tensors are live at the peak;
  // a negative `availableBytes` means unknown (passes).
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
  // Bytes allocated: the plan's arena, rounded up to the alignment.
  int64_t totalBytes() const { return totalBytes_; }

private:
  Arena() = default;
  void *base_ = nullptr; // the one owned allocation
  std::vector<void *> pointers_;
  int64_t totalBytes_ = 0;
};

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_ARENA_H
