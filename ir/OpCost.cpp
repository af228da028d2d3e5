//===- OpCost.cpp - FLOPs and bytes of one kiln op -------------------------===//

#include "ir/OpCost.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::kiln {

int64_t tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  int64_t bits = type.getElementTypeBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

namespace {
int64_t numElements(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

// [..., M, K] @ [..., K, N]: 2·K per result element.
double gemmFlops(Value lhs, bool transposeLhs, Value result) {
  auto type = cast<RankedTensorType>(lhs.getType());
  int64_t k = type.getDimSize(type.getRank() - (transposeLhs ? 2 : 1));
  return 2.0 * (double)numElements(result) * (double)k;
}
} // namespace

double estimateFlops(Operation *op) {
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return gemmFlops(matmul.getLhs(), matmul.getTransposeLhs(),
                     matmul.getResult());
  if (auto accumulate = dyn_cast<MatmulAccumulateOp>(op))
    return gemmFlops(accumulate.getLhs(), accumulate.getTransposeLhs(),
                     accumulate.getResult()) +
           (double)numElements(accumulate.getResult());
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    // out [B, H, Tq, D] from Tk keys: q·kᵀ and p·v, 2·Tk·D each per row
    // (k [B, KVH, Tk, D], or [B, Tk, KVH, D] in layout bthd).
    auto k = cast<RankedTensorType>(attention.getK().getType());
    int64_t tk = k.getDimSize(attention.getTokensDim());
    return 4.0 * (double)numElements(attention.getOut()) * (double)tk;
  }
  if (isa<ReshapeOp, ConstantOp>(op))
    return 0;
  double flops = 0;
  for (Value result : op->getResults())
    flops += (double)numElements(result);
  return flops;
}

} // namespace mlir::kiln
