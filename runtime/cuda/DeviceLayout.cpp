//===- DeviceLayout.cpp - Offsets of every buffer in the one device arena -===//

#include "runtime/cuda/DeviceLayout.h"

#include <cstdio>

namespace kiln::rt::cuda {
namespace {

int64_t alignUp(int64_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

} // namespace

DeviceLayout deviceLayout(const Artifact &artifact) {
  DeviceLayout layout;
  layout.offsets.assign(artifact.numBuffers(), 0);
  // Storage owners first (an alias may only point at an earlier buffer, but
  // resolving through BufferInfo::storage needs no ordering at all).
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i) {
    const BufferInfo &info = artifact.bufferInfo(i);
    if (info.storage != i)
      continue;
    layout.offsets[i] = layout.arenaBytes;
    // At least one alignment unit: distinct buffers get distinct addresses.
    int64_t bytes = alignUp(info.bytes > 0 ? info.bytes : 1);
    layout.arenaBytes += bytes;
    switch (artifact.buffer(i).role()) {
    case schema::BufferRole_Parameter:
      layout.parameterBytes += bytes;
      break;
    case schema::BufferRole_Gradient:
      layout.gradientBytes += bytes;
      break;
    case schema::BufferRole_AdamM:
    case schema::BufferRole_AdamV:
    case schema::BufferRole_Momentum:
      layout.optimizerBytes += bytes;
      break;
    case schema::BufferRole_Activation:
      layout.activationBytes += bytes;
      break;
    default:
      layout.otherBytes += bytes;
    }
  }
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i)
    layout.offsets[i] = layout.offsets[artifact.bufferInfo(i).storage];
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
      mib(layout.activationBytes), ", inputs/constants/scalars ",
      mib(layout.otherBytes), ", cuBLASLt workspace and launch tables ",
      mib(extraBytes), " (a smaller batch, grad_accum or a memory budget "
      "shrinks activations)");
}

} // namespace kiln::rt::cuda
