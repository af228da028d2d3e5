//===- CudaSharedMemory.h - Shared memory a CUDA block may use, per arch --===//
//
// Shared by codegen (the attention kernels' tile plans are sized for the
// smallest limit among Artifact.archs) and the runtime (kiln-run
// --compile-only checks every kernel's static + dynamic shared memory
// against the arch it compiles for; a GPU run checks against the device's
// cudaDevAttrMaxSharedMemoryPerBlockOptin). A header of its own next to
// artifact.fbs, like ArtifactVersion.h, so codegen includes it without the
// runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_CUDASHAREDMEMORY_H
#define KILN_RUNTIME_SCHEMA_CUDASHAREDMEMORY_H

#include <cstdint>
#include <string_view>

namespace kiln::schema {

// Shared memory per block every kernel may use without opting in.
constexpr int64_t kCudaDefaultSharedBytes = 48 * 1024;

// The opt-in maximum of shared memory per block (static + dynamic) of
// "sm_XY[a|f]" (CUDA Programming Guide, "Features and Technical
// Specifications"): A100/A30 (sm_80) and Orin (sm_87) 163 KiB, H100/H200
// (sm_90) and B200 (sm_100) 227 KiB; the consumer/workstation parts sm_86
// (RTX 30xx, A6000, A10), sm_89 (RTX 40xx, L4, L40) and sm_120 (RTX 50xx)
// 99 KiB. Any other arch: the 48 KiB every arch allows.
constexpr int64_t cudaMaxSharedBytesPerBlock(std::string_view arch) {
  if (arch.size() >= 5 && arch.substr(0, 3) == "sm_") {
    std::string_view number = arch.substr(3, 2);
    if (arch.size() > 5 && arch[5] >= '0' && arch[5] <= '9')
      number = arch.substr(3, 3);
    if (number == "80" || number == "87")
      return 163 * 1024;
    if (number == "90" || number == "100")
      return 227 * 1024;
    if (number == "86" || number == "89" || number == "120")
      return 99 * 1024;
  }
  return kCudaDefaultSharedBytes;
}

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_CUDASHAREDMEMORY_H
