//===- Codegen.cpp - Entry points of Kiln's code generator ----------------===//

#include "codegen/Codegen.h"

#include "codegen/StepLowering.h"
#include "codegen/CpuKernelEmitter.h"
#include "codegen/CudaKernelEmitter.h"

#include "llvm/ADT/STLExtras.h"

namespace kiln {

std::string checkCodegenOptions(const CodegenOptions &options) {
  if (options.target == "cpu")
    return "";
  if (options.target != "cuda")
    return "unknown target '" + options.target + "' (supported: cpu, cuda)";
  if (options.cudaArchs.empty())
    return "the cuda target needs at least one architecture (--cuda-arch)";
  for (const std::string &arch : options.cudaArchs)
    if (!llvm::is_contained(supportedCudaArchs(), arch)) {
      std::string known;
      for (const std::string &name : supportedCudaArchs())
        known += (known.empty() ? "" : ", ") + name;
      return "unknown CUDA architecture '" + arch + "' (supported: " + known +
             ")";
    }
  return "";
}

mlir::FailureOr<StepProgram> lowerToStepProgram(mlir::ModuleOp module,
                                                const CodegenOptions &options) {
  return StepLowering(module, options).lower();
}

mlir::FailureOr<CompiledArtifact> compileArtifact(mlir::ModuleOp module,
                                                  const CodegenOptions &options) {
  mlir::FailureOr<StepProgram> program = lowerToStepProgram(module, options);
  if (mlir::failed(program))
    return mlir::failure();
  mlir::FailureOr<ArtifactHeader> header = readArtifactHeader(module, options);
  if (mlir::failed(header))
    return mlir::failure();
  return CompiledArtifact{serializeArtifact(*program, *header),
                          formatMemorySummary(*program),
                          formatMemoryPlan(*program),
                          std::move(program->kernels)};
}

mlir::FailureOr<std::string> emitArtifact(mlir::ModuleOp module,
                                          const CodegenOptions &options) {
  mlir::FailureOr<CompiledArtifact> artifact = compileArtifact(module, options);
  if (mlir::failed(artifact))
    return mlir::failure();
  return std::move(artifact->bytes);
}

mlir::FailureOr<std::vector<EmittedKernel>>
emitKernels(mlir::ModuleOp module, const CodegenOptions &options) {
  mlir::FailureOr<StepProgram> program = lowerToStepProgram(module, options);
  if (mlir::failed(program))
    return mlir::failure();
  return std::move(program->kernels);
}

const char *kernelPrelude(const std::string &target) {
  return target == "cuda" ? CudaKernelEmitter::prelude()
                          : CpuKernelEmitter::prelude();
}

} // namespace kiln
