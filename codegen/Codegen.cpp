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

namespace {

// The module's step program and the artifact bytes it serializes to.
mlir::FailureOr<std::pair<StepProgram, std::string>>
lowerAndSerialize(mlir::ModuleOp module, const CodegenOptions &options) {
  mlir::FailureOr<StepProgram> program = lowerToStepProgram(module, options);
  if (mlir::failed(program))
    return mlir::failure();
  mlir::FailureOr<ArtifactHeader> header = readArtifactHeader(module, options);
  if (mlir::failed(header))
    return mlir::failure();
  std::string bytes = serializeArtifact(*program, *header);
  return std::make_pair(std::move(*program), std::move(bytes));
}

} // namespace

mlir::FailureOr<CompiledArtifact> compileArtifact(mlir::ModuleOp module,
                                                  const CodegenOptions &options) {
  auto lowered = lowerAndSerialize(module, options);
  if (mlir::failed(lowered))
    return mlir::failure();
  auto &[program, bytes] = *lowered;
  return CompiledArtifact{std::move(bytes), formatMemorySummary(program),
                          program.memory.breakdown.peak, formatMemoryPlan(program),
                          std::move(program.kernels)};
}

mlir::FailureOr<std::string> emitArtifact(mlir::ModuleOp module,
                                          const CodegenOptions &options) {
  auto lowered = lowerAndSerialize(module, options);
  if (mlir::failed(lowered))
    return mlir::failure();
  return std::move(lowered->second);
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
