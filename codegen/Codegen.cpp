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

mlir::FailureOr<std::vector<EmittedKernel>> emitKernels(mlir::ModuleOp module) {
  ArtifactWriter writer(module);
  if (mlir::failed(writer.plan()))
    return mlir::failure();
  return writer.kernels();
}

const char *kernelPrelude() { return CpuKernelEmitter::prelude(); }

} // namespace kiln
