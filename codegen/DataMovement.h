//===- DataMovement.h - Kernels that only move elements ---------*- C++ -*-===//
//
// Internal to codegen/: kiln.transpose, kiln.slice, kiln.pad and
// kiln.concat compute nothing; output element i is one input element (or a
// zero of pad). Both targets write them as one loop `out[i] = <element>`
// over the output, the element's index arithmetic built here once, with
// static shapes baked in. Elements are copied as stored (bf16 as its bits),
// so no conversion is involved.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_DATAMOVEMENT_H
#define KILN_CODEGEN_DATAMOVEMENT_H

#include "codegen/KernelSourceWriter.h"

namespace kiln {

// True for the ops above.
bool isDataMovement(mlir::Operation *op);

// The C expression of flat output element `index` of a data-movement op,
// in its storage type; a comment line describing the op goes to `w`.
std::string movedElement(mlir::Operation *op, KernelSourceWriter &w,
                         llvm::StringRef index);

} // namespace kiln

#endif // KILN_CODEGEN_DATAMOVEMENT_H
