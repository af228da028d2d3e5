//===- FusionMaterialize.cpp - A fusion group becomes a kiln.fusion op ----===//
//
// Step 4 of --kiln-fusion; the algorithm is in Fusion.cpp's header.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionMaterialize.h"

#include "passes/FusableOps.h"

#include "ir/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::kiln::fusion {

void materializeFusion(SmallVectorImpl<Operation *> &ops,
                       SmallPtrSetImpl<Operation *> &members, Operation *rowOp,
                       FusionKind kind) {
  // A splat constant read from outside is cloned in front of its first
  // reader inside (a literal in the kernel). Only element-wise readers take
  // one (a broadcast or row op reads buffers; optimizer kernels hold updates
  // only).
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    if (kind == FusionKind::Optimizer || op == rowOp || !isPointwise(op) ||
        isa<BroadcastOp>(op))
      continue;
    for (OpOperand &use : op->getOpOperands()) {
      Operation *def = use.get().getDefiningOp();
      if (!def || members.contains(def) || !isSplatConstant(def))
        continue;
      OpBuilder builder(op);
      Operation *literal = builder.clone(*def);
      use.set(literal->getResult(0));
      ops.insert(ops.begin() + i, literal);
      members.insert(literal);
      ++i; // `op` moved one slot on
    }
  }
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  SmallVector<Location> locs;
  for (Operation *op : ops) {
    locs.push_back(op->getLoc());
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || !members.contains(def))
        inputs.insert(v);
    }
  }
  for (Operation *op : ops)
    for (Value r : op->getResults()) {
      bool readOutside = llvm::any_of(r.getUsers(), [&](Operation *user) {
        return !members.contains(user);
      });
      // A row op's results are written, except a norm's row output that
      // only its epilogue reads: the kernels apply the epilogue to each
      // element in a register (RowOpInterface::hasElementEpilogue), so a
      // block's fp32 y or dx never reaches memory.
      bool elementOnly =
          op == rowOp && r == op->getResult(0) && hasElementEpilogue(op);
      bool writtenByKernel =
          (!isPointwise(op) && !elementOnly) ||
          (rowOp && llvm::is_contained(rowOp->getOperands(), r));
      if (readOutside || writtenByKernel)
        outputs.push_back(r);
    }

  MLIRContext *ctx = ops.back()->getContext();
  OpBuilder builder(ctx);
  builder.setInsertionPointAfter(ops.back());
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto fusion = builder.create<FusionOp>(FusedLoc::get(ctx, locs), resultTypes,
                                         inputs.getArrayRef(), kind);
  Block *body = new Block();
  fusion.getBody().push_back(body);
  for (Value v : inputs)
    body->addArgument(v.getType(), v.getLoc());
  for (Operation *op : ops)
    op->moveBefore(body, body->end());
  for (auto [input, arg] : llvm::zip(inputs, body->getArguments()))
    Value(input).replaceUsesWithIf(arg, [&](OpOperand &use) {
      return fusion->isProperAncestor(use.getOwner());
    });
  builder.setInsertionPointToEnd(body);
  builder.create<YieldOp>(fusion.getLoc(), outputs);
  for (auto [v, result] : llvm::zip(outputs, fusion.getResults()))
    v.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !fusion->isProperAncestor(use.getOwner());
    });
}

} // namespace mlir::kiln::fusion
