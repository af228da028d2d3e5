//===- Arena.cpp - Host storage for every buffer of an artifact -----------===//

#include "runtime/cpu/Arena.h"

#include <cstdlib>
#include <cstring>

namespace kiln::rt::cpu {

namespace {
constexpr size_t kAlignment = 64;
} // namespace

StatusOr<std::unique_ptr<Arena>> Arena::create(const Artifact &artifact) {
  std::unique_ptr<Arena> arena(new Arena());
  uint32_t count = artifact.numBuffers();
  arena->pointers_.assign(count, nullptr);
  for (uint32_t i = 0; i < count; ++i) {
    const BufferInfo &info = artifact.bufferInfo(i);
    if (info.storage != i) {
      // The verifier guarantees aliases point to an earlier buffer, whose
      // pointer is therefore already set.
      arena->pointers_[i] = arena->pointers_[info.storage];
      continue;
    }
    // aligned_alloc needs a size that is a multiple of the alignment; empty
    // buffers still get a block so every pointer is valid and distinct.
    size_t bytes = static_cast<size_t>(info.bytes);
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded == 0)
      rounded = kAlignment;
    void *block = std::aligned_alloc(kAlignment, rounded);
    if (!block)
      return internalError("out of host memory allocating ", rounded,
                           " bytes for ", artifact.describeBuffer(i),
                           " (", arena->totalBytes_, " bytes allocated so far)");
    std::memset(block, 0, rounded);
    arena->blocks_.push_back(block);
    arena->pointers_[i] = block;
    arena->totalBytes_ += static_cast<int64_t>(rounded);

    const schema::Buffer &buffer = artifact.buffer(i);
    if (buffer.role() == schema::BufferRole_Constant && bytes > 0)
      std::memcpy(block, buffer.constant_data()->data(), bytes);
  }
  return arena;
}

Arena::~Arena() {
  for (void *block : blocks_)
    std::free(block);
}

} // namespace kiln::rt::cpu
