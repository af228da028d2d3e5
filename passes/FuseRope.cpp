//===- FuseRope.cpp - RoPE in one pass where q and k are produced ---------===//
//
// --kiln-fuse-rope: in a Llama step, q leaves its GEMM as f32 [B, T, H, D],
// is transposed to [B, H, T, D], rotated, and rounded to bf16 for attention:
// three passes over q (and k), each reading and writing the whole tensor;
// the backward runs the same chain the other way (widen dq, rotate back,
// round, transpose). This pass folds the transposes and casts next to a
// kiln.rope into the rope itself (its input_permutation,
// result_permutation and element types), so that one kernel reads the
// GEMM's output and writes what attention reads, and one reads attention's
// gradient and writes what the GEMMs read.
//
// Algorithm, for each of @step, @update and @eval (single-block bodies),
// each kiln.rope until nothing changes:
//  1. Its input is a widening kiln.convert (bf16 -> f32, exact): the rope
//     reads the convert's input (loaded and widened in the kernel). Or a
//     kiln.reshape of one (q's GEMM output [B, T, H*D] viewed as heads):
//     the rope reads that reshape of the bf16 value (convert and reshape
//     commute), so the GEMM's bf16 output is never widened into an fp32
//     copy by a kernel of its own.
//  2. Its input is a kiln.transpose that keeps the last dim in place, the
//     rope has no input_permutation yet, and the transpose has no other
//     reader: the rope reads the transpose's input with input_permutation.
//  3. Its only reader is a narrowing kiln.convert (f32 -> bf16): the rope
//     writes the convert's type (rounded once, as the convert did).
//  4. Its only reader is a kiln.transpose that keeps the last dim in place
//     and the rope has no result_permutation yet: the rope writes the
//     transpose's layout with result_permutation.
// Every rewrite gives the same bits: widening is exact, and the rotation
// is computed in float and rounded once either way. A transpose or convert
// that others still read stays; a folded one with no reader left is erased.
// Runs in the fusion phase (kilnc --no-fusion skips it), after autodiff and
// mixed precision have placed the converts.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNFUSEROPE
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

// A permutation that leaves the last dim (the feature pairs) in place.
bool keepsLastDim(ArrayRef<int64_t> permutation) {
  return !permutation.empty() &&
         permutation.back() == static_cast<int64_t>(permutation.size()) - 1;
}

// bf16 -> f32: exact, so reading the bf16 value and widening it in the
// kernel gives the same numbers.
bool isWidening(ConvertOp convert) {
  return getElementTypeOrSelf(convert.getInput()).isBF16() &&
         getElementTypeOrSelf(convert.getResult()).isF32();
}

// The rope with `input`, `resultType` and the permutations given, in place of
// `rope` (whose readers now read the new rope).
RopeOp rebuild(RopeOp rope, Value input, Type resultType,
               DenseI64ArrayAttr inputPermutation,
               DenseI64ArrayAttr resultPermutation) {
  OpBuilder b(rope);
  auto fused = b.create<RopeOp>(rope.getLoc(), resultType, input,
                                rope.getInvFreqAttr(), rope.getInverseAttr(),
                                inputPermutation, resultPermutation);
  return fused;
}

// One fold of steps 1-4 on `rope`; the rope that replaces it, or null.
RopeOp foldOnce(RopeOp rope) {
  Value input = rope.getInput();
  Type resultType = rope.getType();
  DenseI64ArrayAttr inPerm = rope.getInputPermutationAttr(),
                    outPerm = rope.getResultPermutationAttr();
  if (auto reshape = input.getDefiningOp<ReshapeOp>()) {
    auto convert = reshape.getInput().getDefiningOp<ConvertOp>();
    if (convert && isWidening(convert)) {
      OpBuilder b(reshape);
      auto type = RankedTensorType::get(
          reshape.getType().getShape(),
          getElementTypeOrSelf(convert.getInput()));
      Value view = b.create<ReshapeOp>(reshape.getLoc(), type, convert.getInput());
      RopeOp fused = rebuild(rope, view, resultType, inPerm, outPerm);
      rope.replaceAllUsesWith(fused.getResult());
      rope.erase();
      if (reshape->use_empty())
        reshape.erase();
      if (convert->use_empty())
        convert.erase();
      return fused;
    }
  }
  if (auto convert = input.getDefiningOp<ConvertOp>()) {
    if (isWidening(convert)) {
      RopeOp fused =
          rebuild(rope, convert.getInput(), resultType, inPerm, outPerm);
      rope.replaceAllUsesWith(fused.getResult());
      rope.erase();
      if (convert->use_empty())
        convert.erase();
      return fused;
    }
  }
  if (auto transpose = input.getDefiningOp<TransposeOp>()) {
    if (!inPerm && keepsLastDim(transpose.getPermutation()) &&
        transpose->hasOneUse()) {
      RopeOp fused = rebuild(rope, transpose.getInput(), resultType,
                             transpose.getPermutationAttr(), outPerm);
      rope.replaceAllUsesWith(fused.getResult());
      rope.erase();
      transpose.erase();
      return fused;
    }
  }
  if (!rope->hasOneUse())
    return nullptr;
  Operation *reader = *rope->getUsers().begin();
  if (auto convert = dyn_cast<ConvertOp>(reader)) {
    if (getElementTypeOrSelf(rope.getResult()).isF32() &&
        getElementTypeOrSelf(convert.getResult()).isBF16()) {
      auto type = RankedTensorType::get(
          rope.getType().getShape(), getElementTypeOrSelf(convert.getResult()));
      RopeOp fused = rebuild(rope, input, type, inPerm, outPerm);
      convert.replaceAllUsesWith(fused.getResult());
      convert.erase();
      rope.erase();
      return fused;
    }
  }
  if (auto transpose = dyn_cast<TransposeOp>(reader)) {
    if (!outPerm && keepsLastDim(transpose.getPermutation())) {
      RopeOp fused = rebuild(rope, input, transpose.getType(), inPerm,
                             transpose.getPermutationAttr());
      transpose.replaceAllUsesWith(fused.getResult());
      transpose.erase();
      rope.erase();
      return fused;
    }
  }
  return nullptr;
}

struct FuseRopePass : public mlir::kiln::impl::KilnFuseRopeBase<FuseRopePass> {
  void runOnOperation() override {
    for (StringRef name : {"step", "update", "eval"}) {
      auto func = getOperation().lookupSymbol<func::FuncOp>(name);
      if (!func || func.isExternal())
        continue;
      SmallVector<RopeOp> ropes;
      func.walk([&](RopeOp rope) { ropes.push_back(rope); });
      for (RopeOp rope : ropes)
        while (RopeOp fused = foldOnce(rope))
          rope = fused;
    }
  }
};

} // namespace
