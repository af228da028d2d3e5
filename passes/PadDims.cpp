//===- PadDims.cpp - Pad parameter dims to a tensor-core multiple ---------===//
//
// --kiln-pad-dims: GEMMs whose M/N is not a multiple of the tensor-core tile
// (GPT-2's vocab 50257) waste the tail tile and fall off the fast cuBLASLt
// kernels. This pass pads such a parameter dimension up to a multiple of
// `multiple` (default 64; 50257 -> 50304, which is also a multiple of 128,
// so one multiple serves small and large vocabularies without wasting up to
// 127 rows on small ones). The padding is invisible to the user: the true
// shape rides along as `kiln.true_shape` (codegen: Buffer.logical_shape), the
// runtime initialises and checkpoints only that region, and the padded
// entries stay exactly zero during training because no gradient reaches
// them (see step 4).
//
// Algorithm, on the loss function (@step, before @eval and autodiff):
//  1. Refuse everything (with the reason on each candidate) when the train
//     section's Adam has epsilon <= 0: a padded entry has m = v = 0 and
//     its update would be 0 / 0 = NaN.
//  2. Candidates: every dimension of every kiln.role = #kiln.role<param> argument whose
//     size S is larger than `multiple` and not a multiple of it; P = S
//     rounded up. Dimensions smaller than `multiple` are left alone silently
//     (padding would more than double them, and no GEMM tile cares).
//  3. For one candidate, a worklist over (value, padded axis), starting from
//     the parameter, collects the values whose type changes. Every use of a
//     value in the set must absorb the padding:
//       - kiln.embedding table rows: absorbed (ids stay below S);
//       - kiln.transpose / kiln.broadcast: the result's matching axis joins;
//       - kiln.matmul: the padded axis is M of lhs or N of rhs: the result's
//         M / N axis joins (a contracted or batch axis is refused);
//       - kiln.add / sub / mul / neg: the result joins, and every other
//         operand must be padded on the same axis too: a value already in
//         the set, another param of size S (padded with it: a bias), a
//         splat constant, a broadcast of one of those (or along the axis),
//         or a transpose / matmul producing the axis from one of those (so a
//         bias listed before its head pads both);
//       - kiln.cross_entropy logits, class axis: absorbed with
//         valid_classes = S;
//       - anything else (reductions, norms, softmax, reshape, return, ...)
//         refuses: the candidate stays unpadded and the parameter gets
//         kiln.pad_dims_refused = "dim D (S -> P): <why>, at <loc>".
//  4. Why the padding stays zero in training: every path from a padded
//     parameter ends in an embedding (whose gradient only touches rows of
//     ids < S) or in a cross_entropy whose gradient is exactly 0 on classes
//     >= S; add/sub/mul/neg/transpose/broadcast/matmul carry an exact zero
//     cotangent back as zero (their other operands are finite), so every
//     padded gradient entry is 0 and Adam/SGD (with weight decay) keep 0
//     at 0.
//  5. Rewrite: retype every value in the set (splat constants get a splat
//     of the new type), set valid_classes on the cross_entropy ops, record
//     the true shape on each padded argument, update the function type.
//     Then go on with the next candidate on the rewritten IR.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNPADDIMS
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// "model.kiln:12:3" for the innermost file location of `loc` ("?" if none).
std::string describeLocation(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(site.getCallee());
  if (auto name = dyn_cast<NameLoc>(loc))
    return describeLocation(name.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations()) {
      std::string text = describeLocation(inner);
      if (text != "?")
        return text;
    }
  return "?";
}

bool isParameter(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && getArgumentRole(func, arg.getArgNumber()) == Role::Param;
}

/// Step 3: the values one candidate pads, or why it cannot.
class PaddingPlan {
public:
  PaddingPlan(int64_t trueSize, int64_t paddedSize)
      : trueSize(trueSize), paddedSize(paddedSize) {}

  /// Collects everything padding `param`'s dimension `axis` touches. On
  /// failure `reason()` says why.
  LogicalResult collect(BlockArgument param, unsigned axis) {
    if (!join(param, axis))
      return failure();
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      unsigned a = axes.lookup(value);
      for (OpOperand &use : value.getUses())
        if (!absorb(use, a))
          return failure();
    }
    return success();
  }

  const std::string &reason() const { return why; }

  /// Step 5.
  void rewrite(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    for (auto [value, axis] : axes) {
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> shape(type.getShape());
      // The user's shape; an argument padded on another axis before keeps
      // the one recorded then.
      if (auto arg = dyn_cast<BlockArgument>(value))
        if (!func.getArgAttr(arg.getArgNumber(), kTrueShapeAttrName))
          func.setArgAttr(arg.getArgNumber(), kTrueShapeAttrName,
                          DenseI64ArrayAttr::get(ctx, shape));
      shape[axis] = paddedSize;
      auto padded = RankedTensorType::get(shape, type.getElementType(),
                                          type.getEncoding());
      value.setType(padded);
      if (auto constant = value.getDefiningOp<ConstantOp>()) {
        auto splat = cast<DenseElementsAttr>(constant.getValue());
        constant->setAttr(constant.getValueAttrName(),
                          DenseElementsAttr::get(
                              padded, splat.getSplatValue<Attribute>()));
      }
    }
    for (CrossEntropyOp loss : losses) {
      int64_t valid = trueSize;
      if (std::optional<int64_t> existing = loss.getValidClasses())
        valid = std::min(valid, *existing);
      loss.setValidClassesAttr(
          IntegerAttr::get(IntegerType::get(ctx, 64), valid));
    }
    SmallVector<Type> inputs(func.getBody().front().getArgumentTypes());
    func.setType(FunctionType::get(ctx, inputs, func.getResultTypes()));
  }

private:
  bool refuse(Operation *op, const Twine &what) {
    why = (what + " (" + op->getName().getStringRef() + " at " +
           describeLocation(op->getLoc()) + ")")
              .str();
    return false;
  }

  /// Adds `value` with its padded axis (checked: the axis has size S).
  bool join(Value value, unsigned axis) {
    auto type = cast<RankedTensorType>(value.getType());
    auto [it, inserted] = axes.insert({value, axis});
    if (!inserted) {
      if (it->second == axis)
        return true;
      why = "a value would be padded on two different axes";
      return false;
    }
    if (static_cast<int64_t>(axis) >= type.getRank() ||
        type.getDimSize(axis) != trueSize) {
      why = "a value on the padded path has another size on that axis";
      return false;
    }
    worklist.push_back(value);
    return true;
  }

  /// `operand` of an elementwise op must be padded on `axis` too.
  bool pull(Operation *user, Value operand, unsigned axis) {
    if (axes.count(operand))
      return join(operand, axis);
    if (isParameter(operand))
      return join(operand, axis); // a bias of the same size, padded with it
    Operation *def = operand.getDefiningOp();
    if (auto constant = dyn_cast_or_null<ConstantOp>(def)) {
      auto value = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (value && value.isSplat())
        return join(operand, axis);
    }
    if (auto broadcast = dyn_cast_or_null<BroadcastOp>(def)) {
      auto inputType = cast<RankedTensorType>(broadcast.getInput().getType());
      for (auto [i, d] : llvm::enumerate(broadcast.getDims())) {
        if (d != static_cast<int64_t>(axis))
          continue;
        if (inputType.getDimSize(i) == 1) // expanded along the padded axis
          return join(operand, axis);
        return join(operand, axis) &&
               pull(broadcast, broadcast.getInput(), static_cast<unsigned>(i));
      }
      return join(operand, axis); // the padded axis is a new one
    }
    // Backwards through the ops whose forward rule is in `absorb`, so the
    // order of the parameters does not matter (a bias before its head).
    if (auto transpose = dyn_cast_or_null<TransposeOp>(def))
      return join(operand, axis) &&
             pull(transpose, transpose.getInput(),
                  static_cast<unsigned>(transpose.getPermutation()[axis]));
    if (auto matmul = dyn_cast_or_null<MatmulOp>(def)) {
      unsigned rank = matmul.getResult().getType().getRank();
      if (axis == rank - 1) { // N comes from rhs
        unsigned rhsRank = matmul.getRhs().getType().getRank();
        unsigned n = matmul.getTransposeRhs() ? rhsRank - 2 : rhsRank - 1;
        return join(operand, axis) && pull(matmul, matmul.getRhs(), n);
      }
      if (axis == rank - 2) { // M comes from lhs
        unsigned lhsRank = matmul.getLhs().getType().getRank();
        unsigned m = matmul.getTransposeLhs() ? lhsRank - 1 : lhsRank - 2;
        return join(operand, axis) && pull(matmul, matmul.getLhs(), m);
      }
    }
    return refuse(user, "another operand of an elementwise op on the padded "
                        "path cannot be padded");
  }

  /// Whether `use` of a value padded on `axis` can absorb the padding.
  bool absorb(OpOperand &use, unsigned axis) {
    Operation *user = use.getOwner();
    unsigned index = use.getOperandNumber();
    if (isa<EmbeddingOp>(user)) {
      if (index == 0 && axis == 0)
        return true; // rows >= S are never gathered
      return refuse(user, "an embedding's feature dimension cannot be padded");
    }
    if (auto transpose = dyn_cast<TransposeOp>(user)) {
      ArrayRef<int64_t> perm = transpose.getPermutation();
      for (auto [i, p] : llvm::enumerate(perm))
        if (p == static_cast<int64_t>(axis))
          return join(transpose.getResult(), i);
      return refuse(user, "malformed transpose");
    }
    if (auto broadcast = dyn_cast<BroadcastOp>(user))
      return join(broadcast.getResult(), broadcast.getDims()[axis]);
    if (auto matmul = dyn_cast<MatmulOp>(user)) {
      auto type = cast<RankedTensorType>(use.get().getType());
      unsigned rank = type.getRank();
      unsigned resultRank = matmul.getResult().getType().getRank();
      if (index == 1) { // rhs [.., K, N] or [.., N, K]
        unsigned n = matmul.getTransposeRhs() ? rank - 2 : rank - 1;
        if (axis == n)
          return join(matmul.getResult(), resultRank - 1);
      } else { // lhs [.., M, K] or [.., K, M]
        unsigned m = matmul.getTransposeLhs() ? rank - 1 : rank - 2;
        if (axis == m)
          return join(matmul.getResult(), resultRank - 2);
      }
      return refuse(user, "a matmul contracts or batches over the padded "
                          "dimension");
    }
    if (isa<AddOp, SubOp, MulOp, NegOp>(user)) {
      for (Value operand : user->getOperands())
        if (operand != use.get() && !pull(user, operand, axis))
          return false;
      return join(user->getResult(0), axis);
    }
    if (auto loss = dyn_cast<CrossEntropyOp>(user)) {
      auto type = cast<RankedTensorType>(use.get().getType());
      if (index == 0 && axis + 1 == type.getRank()) {
        losses.insert(loss);
        return true; // valid_classes = S masks the padded classes
      }
      return refuse(user, "cross_entropy over a padded position dimension");
    }
    return refuse(user, "used by an op that cannot ignore padded entries");
  }

  int64_t trueSize, paddedSize;
  llvm::MapVector<Value, unsigned> axes; // value -> padded axis
  SmallVector<Value> worklist;
  llvm::SetVector<CrossEntropyOp> losses;
  std::string why;
};

/// Step 1: "" or why Adam's update would turn the padding into NaN.
std::string optimizerRefusal(ModuleOp module) {
  TrainConfigAttr train = getTrainConfig(module);
  if (!train)
    return "";
  FloatAttr epsilon = train.getEpsilon();
  if (train.getOptimizer() != OptimizerKind::Sgd && epsilon &&
      epsilon.getValueAsDouble() <= 0.0)
    return "Adam with epsilon <= 0 would update padded entries by 0 / 0";
  return "";
}

void appendRefusal(func::FuncOp func, unsigned argIndex, StringRef text) {
  std::string all = text.str();
  if (auto old = func.getArgAttrOfType<StringAttr>(argIndex,
                                                   kPadRefusedAttrName))
    all = (old.getValue() + "; " + text).str();
  func.setArgAttr(argIndex, kPadRefusedAttrName,
                  StringAttr::get(func.getContext(), all));
}

void padFunction(func::FuncOp func, int64_t multiple,
                 StringRef globalRefusal) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    if (getArgumentRole(func, i) != Role::Param)
      continue;
    BlockArgument param = func.getArgument(i);
    auto type = dyn_cast<RankedTensorType>(param.getType());
    if (!type || !type.hasStaticShape())
      continue;
    // (2) Candidates; types are re-read because a plan may have padded this
    // parameter together with an earlier one.
    for (unsigned axis = 0; static_cast<int64_t>(axis) < type.getRank();
         ++axis) {
      int64_t size =
          cast<RankedTensorType>(param.getType()).getDimSize(axis);
      if (size <= multiple || size % multiple == 0)
        continue;
      int64_t padded = (size + multiple - 1) / multiple * multiple;
      std::string head = ("dim " + Twine(axis) + " (" + Twine(size) + " -> " +
                          Twine(padded) + ") not padded: ")
                             .str();
      if (!globalRefusal.empty()) {
        appendRefusal(func, i, head + globalRefusal.str());
        continue;
      }
      // (3)
      PaddingPlan plan(size, padded);
      if (failed(plan.collect(param, axis))) {
        appendRefusal(func, i, head + plan.reason());
        continue;
      }
      // (5)
      plan.rewrite(func);
    }
  }
}

struct KilnPadDimsPass
    : public mlir::kiln::impl::KilnPadDimsBase<KilnPadDimsPass> {
  using KilnPadDimsBase::KilnPadDimsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (multiple < 1) {
      module.emitError() << "--kiln-pad-dims multiple must be positive, got "
                         << static_cast<int64_t>(multiple);
      return signalPassFailure();
    }
    std::string refusal = optimizerRefusal(module);
    for (func::FuncOp func : getLossFunctions(module)) {
      if (func.isExternal() || !func.getBody().hasOneBlock()) {
        func.emitOpError("must have a single-block body");
        return signalPassFailure();
      }
      padFunction(func, multiple, refusal);
    }
  }
};

} // namespace
