//===- SinkGemms.cpp - Backward GEMMs placed at their first reader --------===//
//
// --kiln-sink-gemms: autodiff emits each op's input and weight gradients
// together, so an input-gradient GEMM often runs long before anything reads
// its product: SwiGLU's dh = dy @ w2^T is made before the weight gradient
// h^T @ dy, and under recompute before the whole block is recomputed. The
// product is then live beside every value made in between (Llama-3 1.2B
// [64, 2048] under full recompute: a 2 GiB dh beside the recomputed block).
// Moving the GEMM down to its first reader keeps the same ops and values
// (ops are pure; the schedule is the op order) and frees those bytes there.
//
// Algorithm, for @step (a single block), each backward kiln.matmul (one the
// loss and metrics do not depend on), last first:
//  1. F is the first op of the block that reads its result (or holds a
//     reader in its regions); skip when there is none, when it is the next
//     op, or when the function returns the result (a gradient: its buffer
//     is the gradient's, live anyway).
//  2. The move makes every operand not read at or after F (other than by
//     the GEMM) live until F: an argument costs nothing, anything else its
//     bytes. Move when the product's bytes exceed those.
//  3. Stay when an op between the GEMM and F updates an operand in place
//     (codegen gives an accumulate, an optimizer update, an embedding_grad
//     with acc, a matmul_accumulate or an all-reduce its operand's buffer):
//     the GEMM would read the updated bytes.
//  4. The GEMM goes right before F.
// The memory plan (codegen) and the remat pass's peaks see the new order;
// the remat pass asks for peaks after the fusion phase, which ends here.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNSINKGEMMS
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Step 1's F, or null when the GEMM stays.
Operation *firstReader(Operation *gemm, Block &block) {
  Operation *first = nullptr;
  for (Operation *user : gemm->getUsers()) {
    Operation *top = block.findAncestorOpInBlock(*user);
    if (top == block.getTerminator())
      return nullptr;
    if (!first || top->isBeforeInBlock(first))
      first = top;
  }
  return first == gemm->getNextNode() ? nullptr : first;
}

/// Whether `op` (or an op of its regions: a kiln.fusion's members) may
/// write the buffer of one of its operands (step 3).
bool updatesInPlace(Operation *op) {
  bool found = false;
  op->walk([&](Operation *nested) {
    found |= isa<AccumulateOp, AdamOp, SgdOp, SgdMomentumOp, MatmulAccumulateOp,
                 AllReduceOp>(nested) ||
             (isa<EmbeddingGradOp>(nested) && cast<EmbeddingGradOp>(nested).getAcc());
  });
  return found;
}

/// Step 3: whether an op between `gemm` and `first` updates in place a value
/// the GEMM reads (or a reshape view of one: views share the buffer).
bool operandUpdatedBefore(Operation *gemm, Operation *first) {
  llvm::SmallPtrSet<Value, 8> read;
  SmallVector<Value> pending(gemm->getOperands());
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    if (!read.insert(v).second)
      continue;
    if (auto view = v.getDefiningOp<ReshapeOp>())
      pending.push_back(view.getInput());
    for (Operation *user : v.getUsers())
      if (auto view = dyn_cast<ReshapeOp>(user))
        pending.push_back(view.getResult());
  }
  for (Operation *op = gemm->getNextNode(); op != first; op = op->getNextNode())
    if (updatesInPlace(op) && llvm::any_of(op->getOperands(), [&](Value v) {
          return read.contains(v);
        }))
      return true;
  return false;
}

/// Step 2: the bytes whose live ranges the move to `first` lengthens.
int64_t lengthenedBytes(Operation *gemm, Operation *first, Block &block) {
  int64_t bytes = 0;
  llvm::SmallPtrSet<Value, 4> seen;
  for (Value operand : gemm->getOperands()) {
    if (!seen.insert(operand).second || isa<BlockArgument>(operand))
      continue;
    bool readLater = llvm::any_of(operand.getUsers(), [&](Operation *user) {
      Operation *top = block.findAncestorOpInBlock(*user);
      return top != gemm && !top->isBeforeInBlock(first);
    });
    if (!readLater)
      bytes += tensorBytes(operand);
  }
  return bytes;
}

struct SinkGemmsPass : public mlir::kiln::impl::KilnSinkGemmsBase<SinkGemmsPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>(kStepFunctionName);
    if (!step || !step.getBody().hasOneBlock())
      return;
    Block &block = step.getBody().front();
    llvm::DenseSet<Operation *> forward = getForwardOps(step);
    SmallVector<MatmulOp> gemms;
    for (Operation &op : block.without_terminator())
      if (auto gemm = dyn_cast<MatmulOp>(op); gemm && !forward.count(&op))
        gemms.push_back(gemm);
    for (MatmulOp gemm : llvm::reverse(gemms)) {
      Operation *first = firstReader(gemm, block);
      if (!first || tensorBytes(gemm.getResult()) <= lengthenedBytes(gemm, first, block) ||
          operandUpdatedBefore(gemm, first))
        continue;
      // Not Operation::moveBefore: a splice renumbers the whole block at the
      // next isBeforeInBlock; removed and inserted, only the GEMM needs a
      // number (a 256-layer Llama has thousands of ops).
      gemm->remove();
      block.getOperations().insert(first->getIterator(), gemm);
    }
  }
};

} // namespace
