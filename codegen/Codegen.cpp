//===- Codegen.cpp - Entry points of Kiln's code generator ----------------===//

#include "codegen/Codegen.h"

#include "codegen/ArtifactWriter.h"
#include "codegen/CpuKernelEmitter.h"

namespace kiln {

mlir::FailureOr<std::string> emitArtifact(mlir::ModuleOp module) {
  ArtifactWriter writer(module);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  return writer.serialize();
}

mlir::FailureOr<CompiledArtifact> compileArtifact(mlir::ModuleOp module) {
  ArtifactWriter writer(module);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  mlir::FailureOr<std::string> bytes = writer.serialize();
  if (mlir::failed(bytes))
    return mlir::failure();
  return CompiledArtifact{std::move(*bytes), writer.memorySummary(),
                          writer.memoryPlanText()};
}

mlir::FailureOr<std::vector<EmittedKernel>> emitKernels(mlir::ModuleOp module) {
  ArtifactWriter writer(module);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  return writer.kernels();
}

const char *kernelPrelude() { return CpuKernelEmitter::prelude(); }

} // namespace kiln
