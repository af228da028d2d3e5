//===- CudaKernelEmitter.h - CUDA kernels for groups of kiln ops ----------===//
//
// The CUDA twin of CpuKernelEmitter: turns a KernelGroup into the source of
// one CUDA kernel with the entry point
//
//   extern "C" __global__ void <entry>(void* const* __restrict__ buffers)
//
// where `buffers` is a device array of the call's device pointers (the
// group's inputs, then its outputs, as on the CPU), plus the fixed 1-D launch
// configuration every call of it uses (shapes are baked into the source, so
// the grid is too). Sources are compiled by NVRTC after `prelude()`, all
// kernels of an artifact in one translation unit.
//
// The groups supported are exactly the CPU emitter's: pointwise groups of any
// length (a grid-stride loop over PointwiseBody's statements), single-op
// groups of the ops with a bespoke kernel (CudaBespokeKernels.cpp,
// CudaRowKernels.cpp, CudaOptimizerKernels.cpp), a row op with its pointwise prologue and
// epilogue (kiln.fusion row), and several optimizer updates in one launch
// (kiln.fusion optimizer). Every kernel is deterministic: no
// floating-point atomics; reductions run in a fixed order.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDAKERNELEMITTER_H
#define KILN_CODEGEN_CUDAKERNELEMITTER_H

#include "codegen/CpuKernelEmitter.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// How every call of a CUDA kernel is launched (Kernel.launch in the schema).
struct CudaLaunch {
  uint32_t grid = 1;        // blocks (1-D)
  uint32_t block = 1;       // threads per block (1-D)
  uint32_t sharedBytes = 0; // dynamic shared memory per block
};

// One generated CUDA kernel.
struct CudaKernel {
  std::string entry;  // k_<op names>_<hash of the source>
  std::string source; // CUDA source (compiled after the prelude)
  std::string ops;    // the kiln ops it implements, comma separated
  CudaLaunch launch;
  std::vector<KernelScratch> scratch; // arguments after the outputs
};

class CudaKernelEmitter {
public:
  // True if `op` can appear in a group handed to `emit` (the same ops as
  // CpuKernelEmitter::supports).
  static bool supports(mlir::Operation *op);

  // Emits the kernel of `group`; on failure emits an error on the offending op.
  // `attentionSharedBudget`: the dynamic shared bytes an attention kernel's
  // tiles may use (attentionSharedBudget(archs) in CudaAttentionKernels.h);
  // -1: that of kilnc's default archs.
  static mlir::FailureOr<CudaKernel> emit(const KernelGroup &group,
                                          int64_t attentionSharedBudget = -1);

  // A kernel copying one buffer of `type` into another (buffers: src, dst).
  static mlir::FailureOr<CudaKernel> emitCopy(mlir::RankedTensorType type);

  // Device helpers shared by every kernel (Artifact.prelude of a CUDA
  // artifact): fixed-width integer types, INFINITY/NAN, kiln_gelu,
  // kiln_gelu_grad, warp/block reductions, the last-block handshake.
  static const char *prelude();
};

// The architectures `kilnc --cuda-arch` accepts ("sm_80", "sm_90a", ...).
const std::vector<std::string> &supportedCudaArchs();

} // namespace kiln

#endif // KILN_CODEGEN_CUDAKERNELEMITTER_H
