//===- FusionRecompute.h - What --kiln-fusion recomputes in a reader ------===//
//
// Steps 1 and 1d of --kiln-fusion (Fusion.cpp), which run before any group
// is formed: values recomputed inside the kernels that read them instead of
// stored and read back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_FUSIONRECOMPUTE_H
#define KILN_PASSES_FUSIONRECOMPUTE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::kiln::fusion {

/// Step 1: one clone of a shared cheap producer (FusableOps.h isCheap) per
/// fusable reader of `block`.
void cloneCheapProducers(Block &block);

/// Step 1d, on @step only: a backward fusable op recomputes a forward bf16
/// value made by pointwise ops from that chain's inputs, when they stay live
/// until the op anyway and are no more bytes than the value.
void recomputeInBackward(func::FuncOp func);

} // namespace mlir::kiln::fusion

#endif // KILN_PASSES_FUSIONRECOMPUTE_H
