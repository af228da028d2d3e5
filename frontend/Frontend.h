//===- Frontend.h - Model file to kiln dialect ------------------*- C++ -*-===//
//
// The frontend's one entry point, called by kilnc: parse (Parser), check and
// flatten (Sema), lower (MLIRGen). `checkModelFile` stops after Sema and needs
// no MLIR, for tools and tests that only want the diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_FRONTEND_H
#define KILN_FRONTEND_FRONTEND_H

#include "frontend/TensorGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <string>

namespace kiln {

struct FrontendOptions {
  std::string path;                             // the .kiln model file
  std::map<std::string, std::string> overrides; // -D name=value
};

/// Parses, checks and lowers a model file. Diagnostics go to `errs`
/// (file:line:col: error: ..., the source line, a caret). Returns a null
/// module after any error.
mlir::OwningOpRef<mlir::ModuleOp> compileModelFile(mlir::MLIRContext &ctx,
                                                   const FrontendOptions &opts,
                                                   llvm::raw_ostream &errs);

/// Parses and checks only; the flattened, shape-checked model on success.
std::optional<TensorGraph> checkModelFile(const FrontendOptions &opts,
                                          llvm::raw_ostream &errs);

} // namespace kiln

#endif // KILN_FRONTEND_FRONTEND_H
