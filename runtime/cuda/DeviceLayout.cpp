//===- DeviceLayout.cpp - Offsets of every buffer in the one device arena -===//

#include "runtime/cuda/DeviceLayout.h"

#include <cstdio>

namespace kiln::rt::cuda {
namespace {

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

} // namespace

// The static memory plan's arena (Buffer.offset, Artifact.arena_bytes),
// shared with the CPU backend: the loader has already checked that no two
// live buffers overlap, so the device arena is exactly the plan.
DeviceLayout deviceLayout(const Artifact &artifact) {
  DeviceLayout layout;
  layout.offsets.resize(artifact.numBuffers());
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i)
    layout.offsets[i] = artifact.bufferInfo(i).offset;
  layout.arenaBytes = artifact.arenaBytes();
  if (const schema::MemoryPlan *plan = artifact.root().memory_plan()) {
    layout.parameterBytes = plan->parameters();
    layout.gradientBytes = plan->gradients();
    layout.optimizerBytes = plan->optimizer_state();
    layout.activationBytes = plan->activations();
    layout.otherBytes = plan->workspace() + plan->other();
  }
  return layout;
}

Status checkDeviceFits(const DeviceLayout &layout, int64_t extraBytes,
                       int64_t freeBytes, const std::string &device) {
  int64_t total = layout.arenaBytes + extraBytes;
  if (total <= freeBytes)
    return okStatus();
  return failedPrecondition(
      "the step needs ", mib(total), " of GPU memory but ", device, " has ",
      mib(freeBytes), " free (", mib(total - freeBytes), " short): parameters ",
      mib(layout.parameterBytes), ", gradients ", mib(layout.gradientBytes),
      ", optimizer state ", mib(layout.optimizerBytes), ", activations ",
      mib(layout.activationBytes), ", kernel scratch/inputs/constants/scalars ",
      mib(layout.otherBytes), ", cuBLASLt workspace and launch tables ",
      mib(extraBytes), " (a smaller batch, grad_accum or a memory budget "
      "shrinks activations",
      freeBytes - extraBytes >= (int64_t(1) << 20)
          ? detail::concat("; kilnc --largest-batch=", (freeBytes - extraBytes) >> 20,
                           "MiB compiles the model at the largest batch whose arena fits here")
          : std::string(),
      ")");
}

} // namespace kiln::rt::cuda
