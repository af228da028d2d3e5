//===- FusableOps.h - What --kiln-fusion can put into one kernel ----------===//
//
// The predicates the fusion pass (Fusion.cpp) and its recompute steps
// (FusionRecompute.cpp) share: which ops are pointwise (one scalar
// expression per element), which are cheap enough to recompute in every
// reader, and which are row ops (and over how many elements a row).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_FUSABLEOPS_H
#define KILN_PASSES_FUSABLEOPS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>

namespace mlir::kiln::fusion {

/// The elements of a ranked tensor value.
int64_t elementsOf(Value v);

/// A kiln.constant whose elements are all one value.
bool isSplatConstant(Operation *op);

/// Ops codegen can emit as one scalar expression of a flat loop.
bool isPointwise(Operation *op);

/// Producers cheaper to recompute in each reader's loop than to store: splat
/// constants, iota, broadcasts, and widening converts (bf16 -> f32: each
/// reader then loads the bf16 activation itself, instead of an fp32 copy
/// kept alive until the backward).
bool isCheap(Operation *op);

/// The elements of a row op's row tensor (operand 0) that one iteration of
/// its row loop covers; nullopt for ops that are not row ops (reduce_sum is
/// one only over trailing dims with more than one output).
std::optional<int64_t> rowLength(Operation *op);

} // namespace mlir::kiln::fusion

#endif // KILN_PASSES_FUSABLEOPS_H
