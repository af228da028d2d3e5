//===- Codegen.cpp - Entry points of Kiln's code generator ----------------===//

#include "codegen/Codegen.h"

#include "codegen/ArtifactWriter.h"
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

mlir::FailureOr<std::string> emitArtifact(mlir::ModuleOp module,
                                          const CodegenOptions &options) {
  ArtifactWriter writer(module, options);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  return writer.serialize();
}

mlir::FailureOr<CompiledArtifact> compileArtifact(mlir::ModuleOp module,
                                                  const CodegenOptions &options) {
  ArtifactWriter writer(module, options);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  mlir::FailureOr<std::string> bytes = writer.serialize();
  if (mlir::failed(bytes))
    return mlir::failure();
  return CompiledArtifact{std::move(*bytes), writer.memorySummary(),
                          writer.memoryPlanText()};
}

mlir::FailureOr<PlannedMemory> planMemory(mlir::ModuleOp module,
                                          const CodegenOptions &options) {
  ArtifactWriter writer(module, options);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  return PlannedMemory{writer.arenaBytes(), writer.memorySummary()};
}

mlir::FailureOr<std::vector<EmittedKernel>>
emitKernels(mlir::ModuleOp module, const CodegenOptions &options) {
  ArtifactWriter writer(module, options);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  return writer.kernels();
}

const char *kernelPrelude(const std::string &target) {
  return target == "cuda" ? CudaKernelEmitter::prelude()
                          : CpuKernelEmitter::prelude();
}

} // namespace kiln
