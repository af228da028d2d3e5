//===- AttentionLayout.cpp - Attention on [B, T, H, D] without transposes --===//
//
// --kiln-attention-layout: a transformer block computes q, k and v as
// [B, T, H*D] projections, reshapes them to [B, T, H, D] and transposes
// them to the [B, H, T, D] kiln.attention reads; attention's output goes
// back through the inverse transpose to [B, T, H*D] for the output
// projection, and the backward runs the same four transposes the other way
// (dout in, dq, dk, dv out). Each is a kernel that reads and writes a whole
// activation: eight passes per layer that only move bytes. This pass gives
// such attention ops the layout bthd (AttentionLayoutAttr): the kernels read
// q, k, v and dout where the GEMMs wrote them and write out, dq, dk and dv
// where the GEMMs read them.
//
// Algorithm, for each of @step and @eval (single-block bodies):
//  1. Each kiln.attention in layout bhtd whose q, k and v are each either a
//     kiln.transpose with permutation [0, 2, 1, 3] (it reads the
//     transpose's input) or computed by a kiln.rope, possibly through a
//     kiln.convert, and read only by attention ops (it reads a new transpose
//     [0, 2, 1, 3] of that value, one per value, which --kiln-fuse-rope then
//     folds into the rope as its result_permutation): the same op in layout
//     bthd; its old out is replaced by transpose(out', [0, 2, 1, 3]), lse as
//     it was.
//  2. Each kiln.attention_grad in layout bhtd whose q, k, v, out and dout
//     qualify alike (after step 1 its out is such a transpose): the same in
//     layout bthd; dq, dk and dv are replaced by transposes of the new ones.
//  3. A transpose [0, 2, 1, 3] of one of the new transposes is its input
//     (the output projection's reshape(transpose(out)) reads out' itself),
//     and so is one of a kiln.convert of it that only such transposes read
//     (the convert then converts the new value: the fp32 dq that the bias
//     gradient sums); transposes left without readers are erased.
// Every rewrite gives the same bits: the kernels compute the same sums in
// the same order and only address rows differently (codegen/AttentionDims.h).
// Runs in the fusion phase (kilnc --no-fusion skips it) before
// --kiln-fuse-rope, after autodiff and remat have placed every attention op.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNATTENTIONLAYOUT
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

constexpr int64_t kSwap[] = {0, 2, 1, 3};

bool swapsHeadsAndTokens(TransposeOp transpose) {
  return transpose.getPermutation() == ArrayRef<int64_t>(kSwap);
}

// transpose(value, [0, 2, 1, 3]) right after `value`'s definition.
Value swapped(OpBuilder &b, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t, 4> shape(type.getShape());
  std::swap(shape[1], shape[2]);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(value);
  return b.create<TransposeOp>(
      value.getLoc(), RankedTensorType::get(shape, type.getElementType()),
      value, b.getDenseI64ArrayAttr(kSwap));
}

// The [B, T, H, D] forms of per-head values: a transpose's input, or one
// new transpose per rope value.
class TokensMajorForms {
public:
  // Whether `value` ([B, H, T, D]) is a transpose [0, 2, 1, 3] of a [B, T,
  // H, D] tensor, or a rope's result (possibly through a convert), which
  // --kiln-fuse-rope can write transposed at no cost: only attention ops
  // (and the transpose made here for it) read the value, and only the
  // convert reads the rope (its rules 3 and 4 need one reader), so that
  // transpose is sure to fold.
  bool hasFreeForm(Value value) const {
    if (auto transpose = value.getDefiningOp<TransposeOp>())
      return swapsHeadsAndTokens(transpose);
    Operation *producer = value.getDefiningOp();
    if (auto convert = dyn_cast_or_null<ConvertOp>(producer)) {
      producer = convert.getInput().getDefiningOp();
      if (producer && !producer->hasOneUse())
        return false;
    }
    Value made = forRope.lookup(value);
    return isa_and_nonnull<RopeOp>(producer) &&
           llvm::all_of(value.getUsers(), [&](Operation *user) {
             return isa<AttentionOp, AttentionGradOp>(user) ||
                    (made && user == made.getDefiningOp());
           });
  }

  // The form of `value`, which must have one (hasFreeForm).
  Value of(OpBuilder &b, Value value) {
    if (auto transpose = value.getDefiningOp<TransposeOp>())
      return transpose.getInput();
    Value &cached = forRope[value];
    if (!cached)
      cached = swapped(b, value);
    return cached;
  }

  // Transposes made for rope values that ended up unread.
  void eraseUnread() {
    for (auto &[value, transpose] : forRope)
      if (transpose.use_empty())
        transpose.getDefiningOp()->erase();
  }

private:
  llvm::DenseMap<Value, Value> forRope;
};

// [B, H, T, D] type -> [B, T, H, D].
Type swappedType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t, 4> shape(tensor.getShape());
  std::swap(shape[1], shape[2]);
  return RankedTensorType::get(shape, tensor.getElementType());
}

// Whether every reader of `value` is a transpose [0, 2, 1, 3].
bool onlySwappedBack(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUsers(), [](Operation *user) {
           auto transpose = dyn_cast<TransposeOp>(user);
           return transpose && swapsHeadsAndTokens(transpose);
         });
}

// Each transpose [0, 2, 1, 3] reading `value` is replaced by `replacement`.
void foldSwapsBack(Value value, Value replacement) {
  for (Operation *user : llvm::make_early_inc_range(value.getUsers()))
    if (auto transpose = dyn_cast<TransposeOp>(user);
        transpose && swapsHeadsAndTokens(transpose)) {
      transpose.replaceAllUsesWith(replacement);
      transpose.erase();
    }
}

// Replaces `old`'s uses by transpose(replacement, [0, 2, 1, 3]) (step 3):
// readers that swap back read `replacement` itself, and a convert read
// only by such transposes (the bias gradient's fp32 copy of dq) converts
// `replacement` instead.
void replaceSwapped(OpBuilder &b, Value old, Value replacement) {
  Value back = swapped(b, replacement);
  old.replaceAllUsesWith(back);
  foldSwapsBack(back, replacement);
  for (Operation *user : llvm::make_early_inc_range(back.getUsers())) {
    auto convert = dyn_cast<ConvertOp>(user);
    if (!convert || !onlySwappedBack(convert.getResult()))
      continue;
    b.setInsertionPoint(convert);
    auto converted = b.create<ConvertOp>(
        convert.getLoc(), swappedType(convert.getType()), replacement);
    foldSwapsBack(convert.getResult(), converted.getResult());
    convert.erase();
  }
  if (back.use_empty())
    back.getDefiningOp()->erase();
}

// Steps 1-2 on `op` (a kiln.attention or kiln.attention_grad in layout
// bhtd) whose operands `perHeadIn` and first `perHeadOut` results are
// per-head tensors: the op in layout bthd when every per-head operand has a
// free [B, T, H, D] form (TokensMajorForms::hasFreeForm).
void relayout(Operation *op, ArrayRef<unsigned> perHeadIn,
              unsigned perHeadOut, TokensMajorForms &forms) {
  for (unsigned i : perHeadIn)
    if (!forms.hasFreeForm(op->getOperand(i)))
      return;
  OpBuilder b(op);
  SmallVector<Value> operands(op->getOperands());
  llvm::SmallSetVector<Operation *, 5> producers;
  for (unsigned i : perHeadIn) {
    if (Operation *producer = operands[i].getDefiningOp())
      producers.insert(producer);
    operands[i] = forms.of(b, operands[i]);
  }
  SmallVector<Type> types(op->getResultTypes());
  for (unsigned i = 0; i < perHeadOut; ++i)
    types[i] = swappedType(types[i]);
  b.setInsertionPoint(op);
  OperationState state(op->getLoc(), op->getName(), operands, types,
                       op->getAttrs());
  state.attributes.set(
      "layout", AttentionLayoutAttr::get(b.getContext(), AttentionLayout::Bthd));
  for (unsigned r = 0; r < op->getNumRegions(); ++r)
    state.addRegion();
  Operation *fresh = b.create(state);
  IRMapping mapping;
  for (unsigned r = 0; r < op->getNumRegions(); ++r)
    op->getRegion(r).cloneInto(&fresh->getRegion(r), mapping);

  for (unsigned i = 0; i < op->getNumResults(); ++i) {
    if (i < perHeadOut)
      replaceSwapped(b, op->getResult(i), fresh->getResult(i));
    else
      op->getResult(i).replaceAllUsesWith(fresh->getResult(i));
  }
  op->erase();
  for (Operation *producer : producers)
    if (isa<TransposeOp>(producer) && producer->use_empty())
      producer->erase();
}

struct AttentionLayoutPass
    : public mlir::kiln::impl::KilnAttentionLayoutBase<AttentionLayoutPass> {
  void runOnOperation() override {
    for (StringRef name : {"step", "eval"}) {
      auto func = getOperation().lookupSymbol<func::FuncOp>(name);
      if (!func || func.isExternal())
        continue;
      SmallVector<Operation *> forward, backward;
      func.walk([&](Operation *op) {
        if (auto attention = dyn_cast<AttentionOp>(op);
            attention && !attention.isTokensMajor())
          forward.push_back(op);
        if (auto grad = dyn_cast<AttentionGradOp>(op);
            grad && !grad.isTokensMajor())
          backward.push_back(op);
      });
      TokensMajorForms forms;
      // Forward: q, k, v -> out (lse keeps [B, H, T]).
      for (Operation *op : forward)
        relayout(op, {0, 1, 2}, 1, forms);
      // Backward: q, k, v, out and dout (operand 5; lse is operand 4) ->
      // dq, dk, dv (capture gradients as they are).
      for (Operation *op : backward)
        relayout(op, {0, 1, 2, 3, 5}, 3, forms);
      forms.eraseUnread();
    }
  }
};

} // namespace
