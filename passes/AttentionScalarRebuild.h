//===- AttentionScalarRebuild.h - Tensors rebuilt as scalars at (b,h,i,j) -===//
//
// Internal to --kiln-attention-match: a bias or a mask of the [B, H, T, S]
// scores, computed in the graph from iotas, broadcasts, transposes,
// comparisons, selects and captured small tensors, is rebuilt as a scalar
// program at the indices (b, h, i, j) inside kiln.attention's score or mask
// region, so the [T, S] tensor is never materialized:
//
//   kiln.iota [N]            -> the index itself (arith.index_cast)
//   kiln.broadcast           -> index remapping (size-1 dims read index 0)
//   kiln.transpose           -> index permutation
//   kiln.reshape of 1-dims   -> the same indices without the size-1 dims
//   splat kiln.constant      -> arith.constant
//   elementwise kiln ops     -> arith / math ops (cmp -> cmpi/cmpf, select
//                               -> arith.select, convert -> sitofp, ...)
//   anything else            -> a capture read with tensor.extract
//
// Both regions share one capture list (the op's operands after q, k, v);
// each block gets one argument per capture, in list order.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_ATTENTIONSCALARREBUILD_H
#define KILN_PASSES_ATTENTIONSCALARREBUILD_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::kiln {

// The float value of a splat float kiln.constant seen through broadcasts.
std::optional<double> splatThroughBroadcasts(Value v);

// Whether `bias` is an additive mask: through broadcasts and transposes, a
// kiln.select between splat 0 and splat -inf (either order).
bool isAdditiveMask(Value bias);

// Why `v` (a bias or a mask condition) cannot be rebuilt as a region
// program, or "" when it can. A captured i1 tensor is the one case: the
// attention op's captures hold numbers, not booleans.
std::string whyNotRebuildable(Value v);

class ScalarRebuilder {
public:
  // `numLeading`: the block's arguments before the captures (5 for the
  // score: s, b, h, i, j; 4 for the mask).
  ScalarRebuilder(OpBuilder &builder, Block &block, unsigned numLeading,
                  SmallVector<Value> &captures);

  // The element of `t` at `index` (one index value per dim of `t`).
  Value element(Value t, ArrayRef<Value> index);

  // The keep condition (i1) of an additive mask (isAdditiveMask) at index:
  // select(c, 0, -inf) keeps c, select(c, -inf, 0) keeps not c.
  Value keepOfAdditiveMask(Value bias, ArrayRef<Value> index);

  // Gives the block one argument per capture of the shared list (captures
  // found by the other region's rebuilder included).
  void addRemainingCaptureArguments();

private:
  using Key = std::pair<const void *, std::vector<const void *>>;
  Value indexConstant(int64_t value);
  Value capture(Value t, ArrayRef<Value> index);
  Value build(Value t, ArrayRef<Value> index);
  // The input and its index for a broadcast or transpose `def` of a value
  // read at `index`; false for any other op.
  bool remap(Operation *def, ArrayRef<Value> index, Value &input,
             SmallVector<Value> &inner);

  OpBuilder &b_;
  Block &block_;
  unsigned numLeading_;
  SmallVector<Value> &captures_; // shared by the score and mask rebuilders
  std::map<Key, Value> memo_;
};

} // namespace mlir::kiln

#endif // KILN_PASSES_ATTENTIONSCALARREBUILD_H
