//===- AttentionDims.cpp - Shapes and row addressing of attention ops -----===//

#include "codegen/AttentionDims.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <utility>

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

AttentionDims attentionDims(Operation *op) {
  bool tokensMajor =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case<k::AttentionOp, k::AttentionGradOp>(
              [](auto attention) { return attention.isTokensMajor(); })
          .Default([](Operation *) { return false; });
  // [B, H, T, D] order, whatever the layout
  auto dims = [&](unsigned operand) {
    auto type = cast<RankedTensorType>(op->getOperand(operand).getType());
    SmallVector<int64_t, 4> shape(type.getShape());
    if (tokensMajor)
      std::swap(shape[1], shape[2]);
    return shape;
  };
  SmallVector<int64_t, 4> q = dims(0), k = dims(1), v = dims(2);
  return {q[0], q[1], q[2], q[3], k[1], k[2], v[3], q[1] / k[1], tokensMajor};
}

std::string AttentionDims::rowOffset(bool kv, const std::string &b,
                                     const std::string &head,
                                     const std::string &row,
                                     int64_t width) const {
  auto str = [](int64_t v) { return std::to_string(v); };
  int64_t heads = kv ? KVH : H, rows = kv ? S : T;
  std::string inner = row == "0" ? "" : " + " + row;
  if (tokensMajor) // ((b * rows + row) * heads + head) * width
    return "((" + b + " * " + str(rows) + inner + ") * " + str(heads) +
           " + " + head + ") * " + str(width);
  // ((b * heads + head) * rows + row) * width
  return "((" + b + " * " + str(heads) + " + " + head + ") * " + str(rows) +
         inner + ") * " + str(width);
}

} // namespace kiln
