//===- RegatherActivations.cpp - Gathered activations gathered again -------===//
//
// --kiln-regather-activations: a value all-gathered over a tensor axis in
// the forward (sequence parallelism's input of the column-parallel
// products, gathered from each rank's positions) and read again by the
// backward (the weight gradient reads it) would stay whole from the forward
// to the backward. The backward gathers it again from the rank's part
// instead, which lives on (1 / ranks of the bytes) -- Megatron's
// sequence-parallel backward; the same remat by communication as ZeRO-3's
// --kiln-gather-params, for activations. Runs in the remat phase, after
// --kiln-remat has placed its recomputes (they are backward readers too).
//
// For @step:
//  1. The backward's start (getBackwardStart).
//  2. Each kiln.all_gather over a tensor axis in the forward, with the
//     single-operand ops after it that only move or cast its elements
//     (transpose, reshape, convert: the reshard's way back, mixed
//     precision's bf16 copy): every one of these values read after the
//     backward's start gets its chain cloned from the gather's input just
//     before its first backward reader, and its backward readers read the
//     clone.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNREGATHERACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Whether `op` only moves or casts its operand's elements.
bool movesElements(Operation *op) {
  return isa<TransposeOp, ReshapeOp, ConvertOp>(op) && op->getNumOperands() == 1;
}

void regather(func::FuncOp func) {
  Block &body = func.front();
  llvm::DenseMap<Operation *, unsigned> position;
  for (Operation &op : body)
    position[&op] = position.size();
  const unsigned start = getBackwardStart(func, position);
  SmallVector<AllGatherOp> gathers;
  for (auto gather : body.getOps<AllGatherOp>())
    if (gather.getAxis() != kDataAxisName && position.lookup(gather) < start)
      gathers.push_back(gather);
  for (AllGatherOp gather : gathers) {
    Value root = gather.getInput();
    SmallVector<Value> worklist{gather.getResult()};
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      SmallVector<OpOperand *> backward;
      Operation *first = nullptr;
      for (OpOperand &use : value.getUses()) {
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        if (position.lookup(top) < start) {
          if (movesElements(top) && top == use.getOwner())
            worklist.push_back(top->getResult(0));
          continue;
        }
        backward.push_back(&use);
        if (!first || top->isBeforeInBlock(first))
          first = top;
      }
      if (backward.empty())
        continue;
      OpBuilder b(first);
      Value again = cloneChainFrom(value, root, b, position, position.lookup(first));
      Operation *gatherAgain = again.getDefiningOp();
      while (gatherAgain && !isa<AllGatherOp>(gatherAgain))
        gatherAgain = gatherAgain->getOperand(0).getDefiningOp();
      if (gatherAgain)
        gatherAgain->setAttr(
            "reason",
            b.getStringAttr(gather.getReason().value_or("").str() +
                            "; gathered again for the backward"));
      for (OpOperand *use : backward)
        use->set(again);
    }
  }
}

struct KilnRegatherActivationsPass
    : public mlir::kiln::impl::KilnRegatherActivationsBase<
          KilnRegatherActivationsPass> {
  void runOnOperation() override {
    if (auto step = getOperation().lookupSymbol<func::FuncOp>(kStepFunctionName))
      if (!step.isExternal())
        regather(step);
  }
};

} // namespace
