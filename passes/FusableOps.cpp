//===- FusableOps.cpp - What --kiln-fusion can put into one kernel --------===//
//
// The predicates are described in FusableOps.h.
//
//===----------------------------------------------------------------------===//

#include "passes/FusableOps.h"

#include "ir/KilnOps.h"

#include <string>

namespace mlir::kiln::fusion {

int64_t elementsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast<ConstantOp>(op);
  if (!constant)
    return false;
  auto value = constant->getAttrOfType<DenseElementsAttr>("value");
  return value && value.isSplat();
}

bool isPointwise(Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  if (isa<BroadcastOp, IotaOp, CausalMaskOp>(op) || isSplatConstant(op))
    return true;
  Dialect *dialect = op->getDialect();
  return op->hasTrait<OpTrait::Elementwise>() && dialect &&
         dialect->getNamespace() == KilnDialect::getDialectNamespace();
}

bool isCheap(Operation *op) {
  if (auto convert = dyn_cast<ConvertOp>(op))
    return convert.getInput().getType().getElementType().isBF16() &&
           convert.getType().getElementType().isF32();
  return isSplatConstant(op) || isa<IotaOp, BroadcastOp>(op);
}

std::optional<int64_t> rowLength(Operation *op) {
  if (auto row = dyn_cast<RowOpInterface>(op))
    return row.getRowLength();
  if (auto sum = dyn_cast<ReduceSumOp>(op)) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(sum.getInput().getType()).getShape();
    ArrayRef<int64_t> dims = sum.getDims();
    int64_t rank = shape.size();
    if (dims.empty() || elementsOf(sum.getResult()) <= 1)
      return std::nullopt;
    int64_t first = rank - static_cast<int64_t>(dims.size());
    int64_t length = 1;
    for (auto [j, d] : llvm::enumerate(dims)) {
      if (d != first + static_cast<int64_t>(j))
        return std::nullopt;
      length *= shape[d];
    }
    return length;
  }
  return std::nullopt;
}

// Row ops whose result 0 is row-shaped, so pointwise ops on it can run in
// the same row loop.
bool hasRowEpilogue(Operation *op) {
  auto row = dyn_cast<RowOpInterface>(op);
  return row && row.hasRowEpilogue();
}

bool hasElementEpilogue(Operation *op) {
  auto row = dyn_cast<RowOpInterface>(op);
  return row && row.hasElementEpilogue();
}

bool isOptimizerUpdate(Operation *op) {
  return isa<AdamOp, SgdOp, SgdMomentumOp>(op);
}

// Why an op never joins a group, or "" for ops that are simply not fusable.
std::string whyStandalone(Operation *op) {
  if (isa<MatmulOp>(op))
    return "kiln.matmul is a GEMM call and stays a kernel of its own";
  if (auto fusion = dyn_cast<FusionOp>(op); fusion && fusion.getKind() == FusionKind::Gemm)
    return "a GEMM with its epilogue (kiln.fusion \"gemm\") is one GEMM "
           "call and stays a kernel of its own";
  if (isa<EmbeddingOp, EmbeddingGradOp>(op))
    return op->getName().getStringRef().str() +
           " gathers rows by index and stays a kernel of its own";
  if (isa<TransposeOp, SliceOp, PadOp, ConcatOp>(op))
    return op->getName().getStringRef().str() +
           " moves elements between dimensions and stays a kernel of its own";
  return "";
}

// A kiln.convert rounding a function argument to bf16 (step 1c).
bool isArgumentCopy(Operation *op, Block &block) {
  auto convert = dyn_cast<ConvertOp>(op);
  if (!convert || !convert.getType().getElementType().isBF16())
    return false;
  auto arg = dyn_cast<BlockArgument>(convert.getInput());
  return arg && arg.getOwner() == &block;
}

// A kiln.reduce_sum of a whole f32 tensor to one value (the global norm's
// sum of squares of each gradient).
bool isTotalSum(Operation *op) {
  auto sum = dyn_cast<ReduceSumOp>(op);
  return sum && elementsOf(sum.getResult()) == 1 && elementsOf(sum.getInput()) > 1 &&
         cast<RankedTensorType>(sum.getInput().getType()).getElementType().isF32();
}

} // namespace mlir::kiln::fusion
