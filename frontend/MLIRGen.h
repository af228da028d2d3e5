//===- MLIRGen.h - TensorGraph to the kiln dialect --------------*- C++ -*-===//
//
// Lowers a checked TensorGraph to one `func.func @step` following the
// function conventions of the contract (argument roles/names/initializers,
// the loss result, module attributes kiln.train and kiln.model).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_MLIRGEN_H
#define KILN_FRONTEND_MLIRGEN_H

#include "frontend/TensorGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace kiln {

/// Builds and verifies the module; a verifier failure is an internal error
/// (Sema should have caught the mistake) and yields a null module.
mlir::OwningOpRef<mlir::ModuleOp> emitKilnModule(mlir::MLIRContext &ctx,
                                                 const TensorGraph &graph,
                                                 const std::string &path,
                                                 llvm::raw_ostream &errs);

} // namespace kiln

#endif // KILN_FRONTEND_MLIRGEN_H
