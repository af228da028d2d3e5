//===- CpuBackend.cpp - The Backend over the host arena and executor ------===//

#include "runtime/cpu/CpuBackend.h"

#include <cstring>

namespace kiln::rt::cpu {

StatusOr<std::unique_ptr<CpuBackend>>
CpuBackend::create(const Artifact &artifact, const MeshCommunicators *mesh,
                   bool commOverlap) {
  std::unique_ptr<CpuBackend> backend(new CpuBackend(artifact));
  KernelCompiler compiler(KernelCompilerOptions::fromEnvironment());
  // Memory first: a step that cannot fit fails before the kernel compile.
  KILN_ASSIGN_OR_RETURN(backend->arena_, Arena::create(artifact));
  KILN_ASSIGN_OR_RETURN(backend->kernels_, compiler.load(artifact));
  KILN_ASSIGN_OR_RETURN(backend->executor_,
                        Executor::create(artifact, *backend->kernels_,
                                         *backend->arena_, mesh, commOverlap));
  const KernelLibrary &kernels = *backend->kernels_;
  backend->load_ = KernelLoad{kernels.numKernels(), kernels.cacheHit(),
                              kernels.loadSeconds(), kernels.libraryPath(), ""};
  return backend;
}

Status CpuBackend::zero(uint32_t buffer) {
  std::memset(arena_->data(buffer), 0, artifact_.bufferInfo(buffer).bytes);
  return okStatus();
}

} // namespace kiln::rt::cpu
