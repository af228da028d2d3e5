//===- ReassociateBias.cpp - x + y @ w + b as x + (y @ w + b) -------------===//
//
// --kiln-reassociate-bias: a residual projection `x + y @ w + b` parses as
// (x + P) + broadcast(b), so the bias meets the residual sum and not the
// GEMM product, and --kiln-fuse-gemm-epilogue finds no Bias epilogue for
// the GEMM (GPT-2's attention output projection and MLP down projection).
// Rewritten as x + (P + broadcast(b)), the GEMM takes the bias in its
// epilogue and the residual add stays one pointwise kernel.
//
// A pass of its own, run before the fusion phase (kilnc --no-fusion skips
// that phase), so that fused and unfused artifacts compute the same sums in
// the same order (test/e2e/fusion_equivalence.test).
//
// Algorithm, for each of @step, @update and @eval (single-block bodies):
//  1. An add O = (I, B) (either order) qualifies when B is a [N] f32 vector
//     broadcast along the rows (dims = [rank - 1]: a bias per output
//     column), I = add(x, Q) (either order) is read only by O, and Q is a
//     GEMM product read only by I: an f32 matmul result, or (precision =
//     bf16) the widening convert of a bf16 matmul result, both read once.
//  2. It becomes S = add(Q, B); O' = add(x, S'), where S' = S for an f32
//     product and S' = convert(convert(S) -> bf16) -> f32 for a bf16 one:
//     the projection is stored as bf16(P + bias), one rounding after the
//     bias as torch.autocast's bf16 linear stores it (before: bf16(P), the
//     bias added in f32 by the residual add), which is the form
//     --kiln-fuse-gemm-epilogue turns into a bf16 GEMM with a Bias epilogue.
//  3. A product read by anything else (a metric of the branch output before
//     its bias) is left as it is: no epilogue writes the product before the
//     bias, so it would gain nothing.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNREASSOCIATEBIAS
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

Type elementTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

bool onlyReader(Value v, Operation *reader) {
  return llvm::all_of(v.getUsers(),
                      [&](Operation *user) { return user == reader; });
}

// `v` is a [N] f32 vector broadcast along the rows of a [..., N] tensor.
bool isRowBias(Value v) {
  auto bcast = v.getDefiningOp<BroadcastOp>();
  if (!bcast || !elementTypeOf(v).isF32())
    return false;
  ArrayRef<int64_t> in =
      cast<RankedTensorType>(bcast.getInput().getType()).getShape();
  ArrayRef<int64_t> out = cast<RankedTensorType>(v.getType()).getShape();
  ArrayRef<int64_t> dims = bcast.getDims();
  return in.size() == 1 && dims.size() == 1 &&
         dims[0] == static_cast<int64_t>(out.size()) - 1 &&
         in[0] == out.back();
}

// Step 1: `v` is a GEMM product read only by `add`: an f32 matmul result,
// or the f32 widening of a bf16 one.
bool isSoleProduct(Value v, Operation *add) {
  if (!onlyReader(v, add) || !elementTypeOf(v).isF32())
    return false;
  Value p = v;
  if (auto widen = v.getDefiningOp<ConvertOp>()) {
    p = widen.getInput();
    if (!elementTypeOf(p).isBF16() || !onlyReader(p, widen))
      return false;
  }
  return static_cast<bool>(p.getDefiningOp<MatmulOp>());
}

void reassociate(Block &block) {
  SmallVector<AddOp> adds;
  for (Operation &op : block.without_terminator())
    if (auto add = dyn_cast<AddOp>(op))
      adds.push_back(add);
  // In block order: an inner add is visited (and kept) before its outer
  // add erases it.
  for (AddOp outer : adds) {
    Value bias = isRowBias(outer.getRhs()) ? outer.getRhs() : outer.getLhs();
    Value inner = bias == outer.getRhs() ? outer.getLhs() : outer.getRhs();
    auto residual = inner.getDefiningOp<AddOp>();
    if (!isRowBias(bias) || !residual || !onlyReader(inner, outer))
      continue;
    Value product = residual.getRhs(), x = residual.getLhs();
    if (!isSoleProduct(product, residual))
      std::swap(product, x);
    if (product == x || !isSoleProduct(product, residual))
      continue;
    // Step 2, at the outer add: every operand is defined by then.
    OpBuilder b(outer);
    Value sum = b.create<AddOp>(outer.getLoc(), product, bias);
    if (product.getDefiningOp<ConvertOp>()) {
      auto type = cast<RankedTensorType>(sum.getType());
      Value rounded =
          b.create<ConvertOp>(outer.getLoc(), type.clone(b.getBF16Type()), sum);
      sum = b.create<ConvertOp>(outer.getLoc(), type, rounded);
    }
    Value total = b.create<AddOp>(residual.getLoc(), x, sum);
    outer.getResult().replaceAllUsesWith(total);
    outer->erase();
    residual->erase();
  }
}

struct KilnReassociateBiasPass
    : public mlir::kiln::impl::KilnReassociateBiasBase<
          KilnReassociateBiasPass> {
  void runOnOperation() override {
    for (StringRef name :
         {kStepFunctionName, kUpdateFunctionName, kEvalFunctionName}) {
      auto func = getOperation().lookupSymbol<func::FuncOp>(name);
      if (func && func.getBody().hasOneBlock())
        reassociate(func.getBody().front());
    }
  }
};

} // namespace
