//===- FusableOps.h - What --kiln-fusion can put into one kernel ----------===//
//
// The predicates of ops the fusion pass (Fusion.cpp) and its recompute
// steps (FusionRecompute.cpp) ask: which ops are pointwise (one scalar
// expression per element), which are cheap enough to recompute in every
// reader, which are row ops (over how many elements a row, with which
// epilogues), which are optimizer updates or whole-tensor sums, and which
// never join a kernel (and why).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_FUSABLEOPS_H
#define KILN_PASSES_FUSABLEOPS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>
#include <string>

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

/// Row ops whose result 0 is row-shaped, so pointwise ops on it can run in
/// the same row loop.
bool hasRowEpilogue(Operation *op);
/// Row ops whose element results can take pointwise ops in the same loop.
bool hasElementEpilogue(Operation *op);

/// kiln.adam, kiln.sgd, kiln.sgd_momentum.
bool isOptimizerUpdate(Operation *op);

/// Why an op never joins a group (a GEMM call, an index gather, a data
/// movement), or "" for ops that are simply not fusable.
std::string whyStandalone(Operation *op);

/// A kiln.convert rounding a function argument of `block` to bf16 (fusion
/// step 1c's argument copies).
bool isArgumentCopy(Operation *op, Block &block);

/// A kiln.reduce_sum of a whole f32 tensor to one value (the global norm's
/// sum of squares of each gradient).
bool isTotalSum(Operation *op);

} // namespace mlir::kiln::fusion

#endif // KILN_PASSES_FUSABLEOPS_H
