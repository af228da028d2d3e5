//===- PointwiseStatements.h - One element of a pointwise op chain --------===//
//
// The one place that turns a chain of pointwise kiln ops (elementwise ops,
// splat constants, iota, causal_mask, broadcasts of kernel inputs) into the
// C statements computing one element of each result. Loop nests are the
// caller's: the CPU emitter wraps the statements in a flat loop (pointwise
// kernels) or in a per-row loop (prologues and epilogues of row kernels); a
// CUDA emitter can wrap the same statements in a grid-stride loop. The text
// uses only C types (float, int32_t, ...) and ScalarExprEmitter expressions,
// valid C++ and CUDA alike. bf16 values are computed in float: loads of bf16
// buffers widen, bf16 results are rounded (the caller's stores round again
// through storeElement, exactly).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_POINTWISESTATEMENTS_H
#define KILN_CODEGEN_POINTWISESTATEMENTS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>
#include <vector>

namespace kiln {

// Statements computing one element, and the variable holding each value.
struct PointwiseStatements {
  std::vector<std::string> lines;                // "const float v0 = ...; // kiln.add"
  llvm::DenseMap<mlir::Value, std::string> vars; // value -> its variable
  // The operands read at the element's own index (`in0[i]`, not through a
  // broadcast), in the order of their first read.
  llvm::SmallVector<mlir::Value> plainReads;
  // Whether a statement computes with the index itself (a broadcast's
  // coordinates, iota, causal_mask) rather than only reading plainly.
  bool usesIndex = false;
};

// Appends one statement per op of `ops` (pointwise, in order, all with the
// same element count) computing the element at flat index `index` (a C
// expression) of its result. Operands computed by earlier statements are
// read from their variables; any other operand `v` is read from the array
// `pointer(v)` at `index` (at the broadcast index for kiln.broadcast), or,
// when `plainElement` is given, a plain read is the element text it returns
// for `v` (a CUDA kernel's register copy of the thread's elements).
// Emits an error on the offending op and fails for ops it cannot express
// (a non-pointwise op, a broadcast of a value computed in the chain).
mlir::LogicalResult
emitPointwiseStatements(llvm::ArrayRef<mlir::Operation *> ops,
                        llvm::StringRef index,
                        llvm::function_ref<std::string(mlir::Value)> pointer,
                        PointwiseStatements &out,
                        llvm::function_ref<std::string(mlir::Value)>
                            plainElement = nullptr);

} // namespace kiln

#endif // KILN_CODEGEN_POINTWISESTATEMENTS_H
