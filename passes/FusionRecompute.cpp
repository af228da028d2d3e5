//===- FusionRecompute.cpp - What --kiln-fusion recomputes in a reader ----===//
//
// Steps 1 and 1d of --kiln-fusion; the algorithm is in Fusion.cpp's header.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionRecompute.h"

#include "passes/FusableOps.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::kiln::fusion {

// 1. One clone per fusable reader of a shared cheap producer.
void cloneCheapProducers(Block &block) {
  SmallVector<Operation *> cheap;
  for (Operation &op : block.without_terminator())
    if (isCheap(&op) && !op.hasOneUse() && !op.use_empty())
      cheap.push_back(&op);
  for (Operation *op : cheap) {
    SmallVector<OpOperand *> fusable;
    bool anyOther = false;
    for (OpOperand &use : op->getUses()) {
      Operation *user = use.getOwner();
      if (isPointwise(user) || rowLength(user))
        fusable.push_back(&use);
      else
        anyOther = true;
    }
    // In program order (then operand order), not use-list order: a
    // module parsed from a dump lists uses in another order than the one
    // built pass by pass, and the clones must come out the same (x * x of
    // a widened x: which clone feeds which operand shows in the kernel).
    llvm::stable_sort(fusable, [&](OpOperand *a, OpOperand *b) {
      Operation *x = block.findAncestorOpInBlock(*a->getOwner());
      Operation *y = block.findAncestorOpInBlock(*b->getOwner());
      if (x != y)
        return x->isBeforeInBlock(y);
      return a->getOperandNumber() < b->getOperandNumber();
    });
    // The original stays with the first reader unless an unfusable op
    // needs it anyway.
    for (auto [i, use] : llvm::enumerate(fusable)) {
      if (i == 0 && !anyOther)
        continue;
      OpBuilder builder(use->getOwner());
      use->set(builder.clone(*op)->getResult(0));
    }
  }
}


namespace {

// A value rounded to a narrower float by a kiln.convert (a bf16 activation).
// Step 1d recomputes only those: the rounding ends the recomputed chain, so
// no FMA contraction can join its last op to the reader's (the reader would
// then see another value than the one the forward stored).
bool isNarrowing(Value value) {
  auto convert = value.getDefiningOp<ConvertOp>();
  return convert &&
         cast<RankedTensorType>(convert.getType()).getElementTypeBitWidth() <
             cast<RankedTensorType>(convert.getInput().getType())
                 .getElementTypeBitWidth();
}

// Step 1d recomputes at most this many pointwise ops per backward read.
constexpr size_t kMaxRecomputeOps = 8;

// 1d. The pointwise ops that make `value` from values not made by forward
// pointwise ops (its inputs), operands first; false when more than
// kMaxRecomputeOps would be needed. `depth` counts the ops above `value` on
// the way down (they are inserted on the way back up), so a linear chain
// meets the bound too: before, only collected siblings counted, and a chain
// of any length was recomputed (and recursed once per op).
bool collectChain(Block &block, Value value,
                  const llvm::DenseSet<Operation *> &forward,
                  llvm::SetVector<Operation *> &ops,
                  llvm::SetVector<Value> &inputs, size_t depth = 0) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != &block || !forward.contains(def) ||
      !isPointwise(def)) {
    inputs.insert(value);
    return true;
  }
  if (ops.contains(def))
    return true;
  // This op, the `depth` above it and the `ops` collected already.
  if (ops.size() + depth >= kMaxRecomputeOps)
    return false;
  for (Value operand : def->getOperands())
    if (!collectChain(block, operand, forward, ops, inputs, depth + 1))
      return false;
  ops.insert(def);
  return true;
}

// Whether `value`'s buffer lives until `reader` runs (or later) anyway.
bool liveAt(Block &block, Value value, Operation *reader,
            const llvm::SetVector<Operation *> &chain) {
  if (isa<BlockArgument>(value))
    return true;
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    Operation *top = block.findAncestorOpInBlock(*user);
    return top && !chain.contains(top) &&
           (top == reader || reader->isBeforeInBlock(top));
  });
}

} // namespace

void recomputeInBackward(func::FuncOp func) {
  if (func.getName() != kStepFunctionName || !func.getBody().hasOneBlock())
    return;
  Block &block = func.getBody().front();
  llvm::DenseSet<Operation *> forward = getForwardOps(func);
  SmallVector<Operation *> readers;
  for (Operation &op : block.without_terminator())
    if (!forward.contains(&op) && (isPointwise(&op) || rowLength(&op)))
      readers.push_back(&op);
  for (Operation *reader : readers) {
    for (OpOperand &use : reader->getOpOperands()) {
      Operation *def = use.get().getDefiningOp();
      if (!def || !forward.contains(def) || !isPointwise(def) ||
          (isCheap(def) && !isa<ConvertOp>(def)))
        continue;
      llvm::SetVector<Operation *> chain;
      llvm::SetVector<Value> inputs;
      if (!collectChain(block, use.get(), forward, chain, inputs))
        continue;
      // The value the forward would keep for this reader: the value read,
      // or what a widening reads (each reader widens its own copy).
      Value kept = isCheap(def) ? def->getOperand(0) : use.get();
      int64_t inputBytes = 0;
      bool live = true;
      for (Value input : inputs) {
        live = live && liveAt(block, input, reader, chain);
        inputBytes += tensorBytes(input);
      }
      if (!live || !chain.contains(kept.getDefiningOp()) ||
          !isNarrowing(kept) || inputBytes > tensorBytes(kept))
        continue;
      OpBuilder builder(reader);
      IRMapping mapping;
      for (Operation *op : chain)
        builder.clone(*op, mapping);
      use.set(mapping.lookup(use.get()));
      for (Operation *op : llvm::reverse(chain))
        if (op->use_empty()) {
          forward.erase(op);
          op->erase();
        }
    }
  }
}


} // namespace mlir::kiln::fusion
