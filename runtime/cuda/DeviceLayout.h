//===- DeviceLayout.h - Offsets of every buffer in the one device arena ---===//
//
// The CUDA backend makes ONE cuMemAlloc for all buffers and hands out
// offsets: deviceLayout() reads them from the static memory plan
// (Buffer.offset, Artifact.arena_bytes; 256-byte aligned, cudaMalloc's
// alignment, which vectorised loads and cuBLASLt's fast paths assume), the
// same plan the CPU arena uses.
//
// Before allocating, checkDeviceFits() compares the arena (plus cuBLASLt's
// workspace and the launch tables) with the device's free bytes and, when it
// does not fit, says how much each role needs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_DEVICELAYOUT_H
#define KILN_RUNTIME_CUDA_DEVICELAYOUT_H

#include "runtime/Artifact.h"
#include "runtime/Status.h"

#include <cstdint>
#include <vector>

namespace kiln::rt::cuda {

constexpr int64_t kDeviceAlignment = schema::kArenaAlignment;

struct DeviceLayout {
  std::vector<int64_t> offsets; // byte offset of every buffer (aliases share)
  int64_t arenaBytes = 0;       // end of the last storage owner, aligned
  // arenaBytes by what the buffers hold, so an error says what to shrink.
  int64_t parameterBytes = 0, gradientBytes = 0, optimizerBytes = 0,
          activationBytes = 0, otherBytes = 0; // other: kernel scratch live at the
                                               // peak, inputs, constants, scalars
};

DeviceLayout deviceLayout(const Artifact &artifact);

// OK when arenaBytes + extraBytes <= freeBytes; otherwise a
// FailedPrecondition naming the device, the total and the bytes by role
// (`extraBytes`: cuBLASLt workspace and launch tables, named as such).
Status checkDeviceFits(const DeviceLayout &layout, int64_t extraBytes,
                       int64_t freeBytes, const std::string &device);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_DEVICELAYOUT_H
