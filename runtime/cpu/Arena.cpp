//===- Arena.cpp - Host storage for every buffer of an artifact -----------===//

#include "runtime/cpu/Arena.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace kiln::rt::cpu {

namespace {
constexpr size_t kAlignment = static_cast<size_t>(schema::kArenaAlignment);

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

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// "kiln.softmax" for an activation kilnc named "kiln.softmax@<location>"
// (the location is printed beside it anyway).
std::string withoutLocation(std::string name, const std::string &location) {
  std::string suffix = "@" + location;
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  else if (name.size() > 1 && name.back() == '@')
    name.pop_back();
  return name;
}

// The tensors live at the plan's peak, largest first (as kilnc listed them).
std::string largestLiveTensors(const Artifact &artifact, size_t count) {
  const schema::MemoryPlan *plan = artifact.root().memory_plan();
  if (!plan->peak_tensors() || plan->peak_tensors()->size() == 0)
    return "";
  std::string text = "; largest tensors live at the peak (in '" +
                     (plan->peak_program() ? plan->peak_program()->str()
                                           : std::string()) +
                     "'):";
  size_t shown = 0;
  for (const schema::PeakTensor *tensor : *plan->peak_tensors()) {
    if (shown++ == count)
      break;
    uint32_t b = tensor->buffer();
    std::string location = tensor->location() ? tensor->location()->str() : "";
    text += detail::concat(shown == 1 ? " " : ", ",
                           mib(artifact.bufferInfo(b).bytes), " ",
                           withoutLocation(bufferName(artifact.buffer(b)),
                                           location));
    if (!location.empty())
      text += " (" + location + ")";
  }
  return text;
}
} // namespace

Status Arena::checkFits(const Artifact &artifact, int64_t availableBytes) {
  // The verifier proved the categories add up to arena_bytes.
  const schema::MemoryPlan &plan = *artifact.root().memory_plan();
  int64_t total = artifact.arenaBytes();
  if (availableBytes < 0 || total <= availableBytes)
    return okStatus();
  return failedPrecondition(
      "the step needs ", gib(total), " of host memory (parameters ",
      gib(plan.parameters()), ", gradients ", gib(plan.gradients()),
      ", optimizer state ", gib(plan.optimizer_state()), ", activations ",
      gib(plan.activations()), ", workspace ", gib(plan.workspace()),
      ", other ", gib(plan.other()), ") but only ", gib(availableBytes),
      " is available", largestLiveTensors(artifact, 5),
      "; compile with a smaller batch or sequence (kilnc -D batch=N -D seq=T)");
}

StatusOr<std::unique_ptr<Arena>> Arena::create(const Artifact &artifact) {
  // Say what does not fit before touching memory, rather than being killed by
  // the OOM killer halfway through allocating or initialising.
  KILN_RETURN_IF_ERROR(checkFits(artifact, availableHostBytes()));
  std::unique_ptr<Arena> arena(new Arena());
  // aligned_alloc needs a size that is a multiple of the alignment; an empty
  // plan still gets a block so every pointer is valid.
  size_t bytes = static_cast<size_t>(artifact.arenaBytes());
  size_t rounded = std::max<size_t>(
      kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  arena->base_ = std::aligned_alloc(kAlignment, rounded);
  if (!arena->base_)
    return internalError("out of host memory allocating the arena of ",
                         rounded, " bytes");
  std::memset(arena->base_, 0, rounded);
  arena->totalBytes_ = static_cast<int64_t>(rounded);

  uint32_t count = artifact.numBuffers();
  arena->pointers_.assign(count, nullptr);
  char *base = static_cast<char *>(arena->base_);
  for (uint32_t i = 0; i < count; ++i) {
    // The verifier resolved aliases and checked every offset + bytes against
    // arena_bytes.
    const BufferInfo &info = artifact.bufferInfo(i);
    arena->pointers_[i] = base + info.offset;
    const schema::Buffer &buffer = artifact.buffer(i);
    if (info.storage == i && buffer.role() == schema::BufferRole_Constant &&
        info.bytes > 0)
      std::memcpy(arena->pointers_[i], buffer.constant_data()->data(),
                  static_cast<size_t>(info.bytes));
  }
  return arena;
}

Arena::~Arena() { std::free(base_); }

} // namespace kiln::rt::cpu
