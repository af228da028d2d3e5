//===- Arena.cpp - Host storage for every buffer of an artifact -----------===//

#include "runtime/cpu/Arena.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace kiln::rt::cpu {

namespace {
constexpr size_t kAlignment = 64;

size_t roundedBytes(int64_t bytes) {
  size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment *
                   kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

// MemAvailable of /proc/meminfo in bytes, or -1 where it cannot be read.
int64_t availableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return -1;
}

// sum += bytes, clamped at INT64_MAX: a crafted artifact with millions of
// huge buffers is reported as too big, never wrapped around to fit.
void addSaturating(int64_t &sum, int64_t bytes) {
  sum = bytes > INT64_MAX - sum ? INT64_MAX : sum + bytes;
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}
} // namespace

Status Arena::checkFits(const Artifact &artifact, int64_t availableBytes) {
  // The step's storage by what it holds, so the message says what to shrink.
  int64_t parameters = 0, gradients = 0, optimizer = 0, other = 0;
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i) {
    const BufferInfo &info = artifact.bufferInfo(i);
    if (info.storage != i)
      continue;
    int64_t bytes = static_cast<int64_t>(roundedBytes(info.bytes));
    switch (artifact.buffer(i).role()) {
    case schema::BufferRole_Parameter:
      addSaturating(parameters, bytes);
      break;
    case schema::BufferRole_Gradient:
      addSaturating(gradients, bytes);
      break;
    case schema::BufferRole_AdamM:
    case schema::BufferRole_AdamV:
      addSaturating(optimizer, bytes);
      break;
    default:
      addSaturating(other, bytes);
    }
  }
  int64_t total = 0;
  for (int64_t part : {parameters, gradients, optimizer, other})
    addSaturating(total, part);
  if (availableBytes < 0 || total <= availableBytes)
    return okStatus();
  return failedPrecondition(
      "the step needs ", gib(total), " of host memory (parameters ",
      gib(parameters), ", gradients ", gib(gradients), ", optimizer state ",
      gib(optimizer), ", activations and inputs ", gib(other), ") but only ",
      gib(availableBytes),
      " is available; compile with a smaller batch or sequence "
      "(kilnc -D batch=N -D seq=T)");
}

StatusOr<std::unique_ptr<Arena>> Arena::create(const Artifact &artifact) {
  // Say what does not fit before touching memory, rather than being killed by
  // the OOM killer halfway through allocating or initialising.
  KILN_RETURN_IF_ERROR(checkFits(artifact, availableHostBytes()));
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
    size_t rounded = roundedBytes(info.bytes);
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
