//===- FusableOps.cpp - What --kiln-fusion can put into one kernel --------===//
//
// The predicates are described in FusableOps.h.
//
//===----------------------------------------------------------------------===//

#include "passes/FusableOps.h"

#include "ir/KilnOps.h"

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

} // namespace mlir::kiln::fusion
