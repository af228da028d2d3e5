//===- Backend.cpp - Choosing the backend by the artifact's target --------===//

#include "runtime/Backend.h"

#include "runtime/metrics/Trace.h"

#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"

#include <cstring>

namespace kiln::rt {

Status Backend::runTrainingStep(const TrainingStepPlan &plan) {
  TraceRecorder *traced = trace_ && trace_->active() ? trace_ : nullptr;
  auto write = [&](const std::vector<BufferWrite> &writes) -> Status {
    for (const BufferWrite &w : writes) {
      double start = traced ? traced->now() : 0;
      std::memcpy(hostData(w.buffer), w.data, w.bytes);
      KILN_RETURN_IF_ERROR(upload(w.buffer));
      if (traced)
        traced->copy(w.buffer, static_cast<int64_t>(w.bytes), start, traced->now());
    }
    return okStatus();
  };
  for (uint32_t buffer : plan.zeroed)
    KILN_RETURN_IF_ERROR(zero(buffer));
  for (const std::vector<BufferWrite> &batch : plan.microBatches) {
    KILN_RETURN_IF_ERROR(write(batch));
    KILN_RETURN_IF_ERROR(run(ProgramKind::kStep));
  }
  KILN_RETURN_IF_ERROR(write(plan.updateWrites));
  return run(ProgramKind::kUpdate);
}

void printKernelLoad(const KernelLoad &load, FILE *out) {
  std::fprintf(out, "kernels: %zu %s in %.2f s (%s, %s%s%s)\n", load.kernels,
               load.cacheHit ? "loaded from cache" : "compiled", load.seconds,
               load.cacheHit ? "warm" : "cold", load.path.c_str(),
               load.detail.empty() ? "" : ", ", load.detail.c_str());
}

StatusOr<std::unique_ptr<Backend>> createBackend(const Artifact &artifact,
                                                 const BackendOptions &options) {
  // The verifier accepted only these two targets.
  if (artifact.root().target()->str() == "cuda") {
    StatusOr<std::unique_ptr<cuda::CudaBackend>> backend =
        cuda::CudaBackend::create(artifact, options);
    if (!backend.ok() && options.attention == AttentionDispatch::kCudnn &&
        backend.status().message().find("--attention") == std::string::npos)
      return backend.status().withPrefix(
          artifact.name() + ": --attention=cudnn needs a usable GPU: ");
    if (!backend.ok())
      return backend.status().withPrefix(artifact.name() + ": ");
    return std::unique_ptr<Backend>(std::move(*backend));
  }
  if (options.attention == AttentionDispatch::kCudnn)
    return invalidArgument(artifact.name(), ": --attention=cudnn needs a CUDA "
                           "artifact (this one is for the CPU; compile with "
                           "kilnc --target=cuda)");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuBackend> backend,
                        cpu::CpuBackend::create(artifact, options.mesh,
                                                options.commOverlap));
  return std::unique_ptr<Backend>(std::move(backend));
}

} // namespace kiln::rt
