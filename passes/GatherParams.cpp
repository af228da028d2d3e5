//===- GatherParams.cpp - ZeRO-3: parameters gathered where they are used -===//
//
// --kiln-gather-params: with `zero = 3` each rank keeps only its slice of
// every parameter whose elements split evenly over the data ranks (the
// optimizer, --kiln-optimizer, already updates that slice in place). The
// programs that read a parameter get it whole from an all-gather placed
// just before it is first needed, so the whole tensor lives only while it
// is in use -- a rematerialization by communication, which is why the pass
// runs in the remat phase, after --kiln-remat has placed its recomputes.
//
// Algorithm, for @step and @eval:
//  1. Read the stage and ranks (zero < 3: nothing to do).
//  2. The backward's start: the first op (with operands) of the body that
//     getForwardOps does not count as forward; @eval has none.
//  3. For each parameter argument with a shard type: a chain of views and
//     casts of it (kiln.reshape, kiln.convert: mixed precision's one bf16
//     copy shared by the forward's and the backward's GEMMs) read on both
//     sides of the backward's start is cloned for the backward's readers,
//     so nothing derived from the forward's gather lives into the backward.
//  4. Split its uses (by their top-level op) into those before the
//     backward's start and those after (recomputes included: they sit in
//     the backward).
//  5. Prefetch: parameters are grouped by block (the name up to its last
//     '.', "Block.3"); on each side, a block's gathers go where the block
//     read before it on that side starts (the first block's where it
//     starts), so the runtime can gather the next block while one
//     computes -- two blocks' parameters whole at a time, as FSDP does.
//  6. Each side's readers read reshape(all_gather(slice)); the argument
//     becomes the slice (kiln.shard_axis, kiln.whole_shape).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNGATHERPARAMS
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Whether `op` only changes its operand's shape or element type.
bool isViewOrCast(Operation *op) {
  return isa<ReshapeOp, ConvertOp>(op) && op->getNumOperands() == 1;
}

/// Step 3: every view or cast of `param` read on both sides of `start`
/// gets its own chain from `param` for its backward readers.
void splitViews(Value param, Block &body, unsigned start,
                llvm::DenseMap<Operation *, unsigned> &position) {
  SmallVector<Value> worklist{param};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : llvm::make_early_inc_range(value.getUsers())) {
      if (!isViewOrCast(user) || user->getBlock() != &body ||
          position.lookup(user) >= start)
        continue;
      SmallVector<std::pair<Operation *, OpOperand *>> backward;
      for (OpOperand &use : user->getResult(0).getUses()) {
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        if (position.lookup(top) >= start)
          backward.push_back({top, &use});
      }
      if (!backward.empty() &&
          backward.size() != static_cast<size_t>(std::distance(
                                  user->getResult(0).use_begin(),
                                  user->getResult(0).use_end()))) {
        Operation *first = backward.front().first;
        for (auto &[top, use] : backward)
          if (top->isBeforeInBlock(first))
            first = top;
        OpBuilder b(first);
        Value again = cloneChainFrom(user->getResult(0), param, b, position,
                                 position.lookup(first));
        for (auto &[top, use] : backward)
          use->set(again);
      }
      worklist.push_back(user->getResult(0));
    }
  }
}

/// Steps 3-6, for one function.
void gatherParams(func::FuncOp func, const ZeroSharding &zero) {
  Block &body = func.front();
  llvm::DenseMap<Operation *, unsigned> position;
  for (Operation &op : body)
    position[&op] = position.size();
  unsigned start = getBackwardStart(func, position);
  bool hasBackward = start < body.getOperations().size();
  // (4) Every sliced parameter's readers, forward (0) and backward (1).
  struct Sliced {
    BlockArgument arg;
    RankedTensorType whole, shard;
    std::string block; // its name up to the last '.': "Block.3"
    SmallVector<std::pair<Operation *, OpOperand *>> uses[2];
    Operation *first[2] = {nullptr, nullptr}; // first reader, in block order
  };
  SmallVector<Sliced> sliced;
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (getArgumentRole(func, i) != Role::Param)
      continue;
    auto whole = cast<RankedTensorType>(arg.getType());
    std::optional<RankedTensorType> shard = zero.shardType(whole);
    if (!shard)
      continue;
    if (hasBackward)
      splitViews(arg, body, start, position);
    Sliced &p = sliced.emplace_back();
    p.arg = arg;
    p.whole = whole;
    p.shard = *shard;
    auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttrName);
    StringRef full = name ? name.getValue() : "";
    p.block = full.rsplit('.').second.empty() ? full.str() : full.rsplit('.').first.str();
    for (OpOperand &use : arg.getUses()) {
      Operation *top = body.findAncestorOpInBlock(*use.getOwner());
      int side = position.lookup(top) >= start;
      p.uses[side].push_back({top, &use});
      // Clones share the position of the op they were created before.
      if (!p.first[side] || top->isBeforeInBlock(p.first[side]))
        p.first[side] = top;
    }
  }
  // (5) Prefetch: a block's parameters are gathered when the block read
  // before it (on the same side) starts, so the gather can run while that
  // block computes; the first block's where it starts itself.
  llvm::StringMap<Operation *> blockStart[2];
  for (const Sliced &p : sliced)
    for (int side = 0; side < 2; ++side)
      if (Operation *first = p.first[side]) {
        Operation *&at = blockStart[side][p.block];
        if (!at || first->isBeforeInBlock(at))
          at = first;
      }
  llvm::StringMap<Operation *> gatherAt[2];
  for (int side = 0; side < 2; ++side) {
    SmallVector<Operation *> starts;
    for (auto &entry : blockStart[side])
      starts.push_back(entry.second);
    llvm::sort(starts, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
    for (auto &entry : blockStart[side]) {
      auto it = llvm::find(starts, entry.second);
      gatherAt[side][entry.first()] = it == starts.begin() ? *it : *(it - 1);
    }
  }
  // (6) The gathers, and the readers reading them.
  OpBuilder b(func.getContext());
  for (Sliced &p : sliced) {
    auto flat = RankedTensorType::get({p.whole.getNumElements()},
                                      p.whole.getElementType());
    for (int side = 0; side < 2; ++side) {
      if (p.uses[side].empty())
        continue;
      b.setInsertionPoint(gatherAt[side][p.block]);
      std::string reason =
          !hasBackward ? "ZeRO-3: the parameter gathered for the forward"
          : side       ? "ZeRO-3: the parameter gathered again for the backward"
                       : "ZeRO-3: the parameter gathered for the forward, "
                         "freed before the backward";
      Value gathered = b.create<AllGatherOp>(p.arg.getLoc(), flat, p.arg,
                                             kDataAxisName, 0,
                                             b.getStringAttr(reason));
      Value view = b.create<ReshapeOp>(p.arg.getLoc(), p.whole, gathered);
      for (auto &[top, use] : p.uses[side])
        use->set(view);
    }
    p.arg.setType(p.shard);
    unsigned i = p.arg.getArgNumber();
    func.setArgAttrs(i, withShardAttrs(func.getArgAttrDict(i), p.whole));
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 func.getResultTypes()));
}

struct KilnGatherParamsPass
    : public mlir::kiln::impl::KilnGatherParamsBase<KilnGatherParamsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // (1)
    ZeroSharding zero = readZeroSharding(module);
    if (zero.stage < 3)
      return;
    for (StringRef name : {kStepFunctionName, kEvalFunctionName})
      if (auto func = module.lookupSymbol<func::FuncOp>(name))
        if (!func.isExternal())
          gatherParams(func, zero);
  }
};

} // namespace
