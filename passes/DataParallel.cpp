//===- DataParallel.cpp - Gradients averaged over the data axis -----------===//
//
// --kiln-data-parallel: with `kiln.mesh = {data = N > 1}` every rank computes
// gradients on its own share of the batch, and @update must see their mean.
//
// Algorithm:
//  1. Read N from kiln.mesh (no mesh or N = 1: nothing to do).
//  2. Find @update's grad arguments (error without them: the pass runs
//     after --kiln-optimizer) and its loss argument.
//  3. Cut the grads, last argument first (the backward finishes the last
//     parameters' gradients first, so a bucket is complete early once the
//     reduction overlaps the backward), into buckets of at most
//     `bucket-bytes` (a larger gradient gets a bucket of its own); the loss
//     joins the last bucket.
//  4. One micro-batch per step (grad_accum = 1): each bucket becomes one
//     kiln.all_reduce mean in @step, right after the last op that defines
//     or reads its gradients -- as soon as the backward has finished them,
//     so the runtime can communicate it while the backward goes on -- and
//     @step returns the averages. The loss keeps a bucket of its own.
//  5. At the top of @update, one kiln.all_reduce mean per bucket left
//     (all of them with grad_accum > 1: the accumulated gradients are
//     reduced once per step); every use of an argument reads the bucket's
//     result instead (codegen then reduces the argument's buffer in place).
//  6. ZeRO-2: the grad arguments the optimizer made shards
//     (kiln.shard_axis) join no bucket. @step produces them instead: where
//     it returns the gradient (or, with grad_accum > 1, where it adds a
//     micro-batch's gradient to its accumulator) the flattened gradient is
//     reduce-scattered ("mean"), so @step's result -- and the accumulator,
//     now a shard too -- is this rank's slice, and the whole gradient is a
//     temporary of the backward. The reduce-scatters sit together before
//     the first accumulator update (or the return). This communicates once per micro-batch
//     (as DeepSpeed's stage 2 does): what keeps the gradients sharded.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDATAPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

struct KilnDataParallelPass
    : public mlir::kiln::impl::KilnDataParallelBase<KilnDataParallelPass> {
  using KilnDataParallelBase::KilnDataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // (1)
    auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttrName);
    auto ranks = mesh ? mesh.getAs<IntegerAttr>(kDataAxisName) : IntegerAttr();
    // A mesh of one rank is data parallelism over one rank: its all-reduces
    // degenerate, but run through the same path (MPI, Gloo or NCCL) as with
    // more, which is how that path is checked on one GPU. No mesh: none.
    if (!ranks || ranks.getInt() < 1)
      return;
    // One data rank beside tensor-parallel axes: the ranks are those axes',
    // and there is nothing to average over data.
    if (ranks.getInt() == 1 && mesh.size() > 1)
      return;
    auto update = module.lookupSymbol<func::FuncOp>("update");
    if (!update) {
      module.emitError("kiln.mesh asks for data parallelism but the module "
                       "has no @update; --kiln-data-parallel runs after "
                       "--kiln-optimizer");
      return signalPassFailure();
    }
    // (2)
    SmallVector<BlockArgument> grads, shardedGrads;
    BlockArgument loss;
    for (unsigned i = 0, e = update.getNumArguments(); i < e; ++i) {
      std::optional<Role> role = getArgumentRole(update, i);
      if (role == Role::Grad) {
        // ZeRO's slices are over data; a tensor-parallel block (over
        // another axis) is all-reduced over data like a whole gradient.
        auto axis = update.getArgAttrOfType<StringAttr>(i, kShardAxisAttrName);
        (axis && axis.getValue() == kDataAxisName ? shardedGrads : grads)
            .push_back(update.getArgument(i));
      }
      else if (role == Role::Loss)
        loss = update.getArgument(i);
    }
    if (grads.empty() && shardedGrads.empty()) {
      update.emitOpError("has no kiln.role = #kiln.role<grad> arguments to average "
                         "over the data axis");
      return signalPassFailure();
    }
    // (3)
    SmallVector<SmallVector<Value>> buckets(1);
    int64_t bytes = 0;
    for (BlockArgument g : llvm::reverse(grads)) {
      int64_t size = tensorBytes(g);
      if (!buckets.back().empty() && bytes + size > bucketBytes) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(g);
      bytes += size;
    }
    // (4) One micro-batch per step: each bucket is reduced in @step as soon
    // as the backward has finished its gradients, so the runtime can
    // communicate it while the backward goes on.
    auto steps = getLossFunctions(module);
    if (steps.size() == 1 && getGradAccumSteps(module) == 1 && !grads.empty() &&
        succeeded(reduceBucketsInStep(steps.front(), update, buckets, ranks.getInt())))
      buckets.assign(1, {});
    if (loss)
      buckets.back().push_back(loss);

    // (5)
    OpBuilder b = OpBuilder::atBlockBegin(&update.front());
    bool gradsHere = llvm::any_of(buckets, [&](const SmallVector<Value> &bucket) {
      return llvm::any_of(bucket, [&](Value v) { return v != loss; });
    });
    auto reason = b.getStringAttr(
        std::string(!gradsHere ? "data parallel: mean of the loss"
                    : loss     ? "data parallel: mean of the gradients and "
                                 "the loss"
                               : "data parallel: mean of the gradients") +
        " over " +
        std::to_string(ranks.getInt()) + (ranks.getInt() == 1 ? " rank" : " ranks"));
    for (SmallVector<Value> &bucket : buckets) {
      if (bucket.empty())
        continue;
      auto reduce = b.create<AllReduceOp>(update.getLoc(), bucket, Reduction::Mean,
                                          kDataAxisName, reason);
      for (auto [i, arg] : llvm::enumerate(bucket))
        arg.replaceAllUsesExcept(reduce.getResult(i), reduce);
    }
    // (6)
    if (!shardedGrads.empty() &&
        failed(reduceScatterInStep(module, update, shardedGrads,
                                   ranks.getInt())))
      return signalPassFailure();
  }

  /// Step 4: each bucket of @update's gradient arguments becomes one
  /// kiln.all_reduce mean in `step` over the values it returns for them,
  /// right after the last op that defines or reads one of them; `step`
  /// returns the averages. Fails, changing nothing, when a gradient has no
  /// result in `step`.
  LogicalResult reduceBucketsInStep(func::FuncOp step, func::FuncOp update,
                                    ArrayRef<SmallVector<Value>> buckets,
                                    int64_t ranks) {
    auto ret = cast<func::ReturnOp>(step.front().getTerminator());
    llvm::StringMap<unsigned> gradResult = getGradResultsByName(step);
    SmallVector<SmallVector<unsigned>> results;
    for (const SmallVector<Value> &bucket : buckets) {
      results.emplace_back();
      for (Value g : bucket) {
        auto name = update.getArgAttrOfType<StringAttr>(
            cast<BlockArgument>(g).getArgNumber(), kNameAttrName);
        auto found = name ? gradResult.find(name.getValue()) : gradResult.end();
        if (found == gradResult.end())
          return failure();
        results.back().push_back(found->second);
      }
    }
    OpBuilder b(step.getContext());
    auto reason = b.getStringAttr(
        "data parallel: mean of the gradients over " + std::to_string(ranks) +
        (ranks == 1 ? " rank" : " ranks") +
        ", as soon as the backward finishes them");
    Block &body = step.front();
    // Each value is averaged once: two parameters may have one gradient
    // value (unused ones share CSE's zero constant; `a + b` gives a and b the
    // same), and an all-reduce updates its operands in place, so a value
    // listed twice was a buffer reduced twice in one call. A constant is
    // the same on every rank: its mean is itself.
    llvm::DenseMap<Value, Value> averaged;
    for (ArrayRef<unsigned> bucket : results) {
      // After every op that defines or reads one of the bucket's values.
      llvm::SetVector<Value> values;
      Operation *last = nullptr;
      auto later = [&](Operation *op) {
        op = body.findAncestorOpInBlock(*op);
        if (op && op != ret && (!last || last->isBeforeInBlock(op)))
          last = op;
      };
      for (unsigned r : bucket) {
        Value v = ret.getOperand(r);
        if (averaged.count(v) || v.getDefiningOp<ConstantOp>() || !values.insert(v))
          continue;
        if (Operation *def = v.getDefiningOp())
          later(def);
        for (Operation *user : v.getUsers())
          later(user);
      }
      if (values.empty())
        continue;
      if (last)
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPointToStart(&body);
      auto reduce = b.create<AllReduceOp>(step.getLoc(), values.getArrayRef(),
                                          Reduction::Mean, kDataAxisName, reason);
      for (auto [k, v] : llvm::enumerate(values))
        averaged[v] = reduce.getResult(k);
    }
    for (ArrayRef<unsigned> bucket : results)
      for (unsigned r : bucket)
        if (Value mean = averaged.lookup(ret.getOperand(r)))
          ret.setOperand(r, mean);
    return success();
  }

  /// Step 6: @step returns this rank's shard of each gradient in `shards`.
  LogicalResult reduceScatterInStep(ModuleOp module, func::FuncOp update,
                                    ArrayRef<BlockArgument> shards,
                                    int64_t ranks) {
    SmallVector<func::FuncOp> steps = getLossFunctions(module);
    if (steps.size() != 1)
      return module.emitError("ZeRO-2 needs exactly one function with a "
                              "kiln.role = #kiln.role<loss> result, found ")
             << steps.size();
    func::FuncOp step = steps.front();
    auto ret = cast<func::ReturnOp>(step.front().getTerminator());
    llvm::StringMap<unsigned> gradResult = getGradResultsByName(step);
    // The reduce-scatters go together before the first accumulator update
    // (or the return): consecutive, the runtime may issue them as one.
    Operation *anchor = ret;
    for (Operation &op : step.front())
      if (isa<AccumulateOp>(op)) {
        anchor = &op;
        break;
      }
    SmallVector<AccumulateOp> replaced;
    OpBuilder b(ret);
    StringAttr axis = b.getStringAttr(kDataAxisName);
    auto reason = b.getStringAttr(
        "ZeRO-" + std::to_string(readZeroSharding(module).stage) +
        ": mean of the gradient over " + std::to_string(ranks) +
        (ranks == 1 ? " rank" : " ranks") + ", this rank keeping its shard");
    for (BlockArgument shard : shards) {
      auto name = update.getArgAttrOfType<StringAttr>(shard.getArgNumber(),
                                                      kNameAttrName);
      auto found = gradResult.find(name.getValue());
      if (found == gradResult.end())
        return step.emitOpError("has no gradient result for '")
               << name.getValue() << "', which ZeRO-2 shards";
      unsigned result = found->second;
      Value grad = ret.getOperand(result);
      // With grad_accum > 1 the result is accumulate(acc, micro-batch grad):
      // the micro-batch's gradient is reduced, the accumulator a shard.
      auto accumulate = grad.getDefiningOp<AccumulateOp>();
      auto acc = accumulate ? dyn_cast<BlockArgument>(accumulate.getAcc())
                            : BlockArgument();
      Value whole = acc ? accumulate.getValue() : grad;
      Operation *producer = whole.getDefiningOp();
      bool beforeAnchor = !producer || producer->isBeforeInBlock(anchor);
      b.setInsertionPoint(beforeAnchor ? anchor
                          : acc        ? accumulate.getOperation()
                                       : ret.getOperation());
      auto type = cast<RankedTensorType>(whole.getType());
      auto flat = RankedTensorType::get({type.getNumElements()},
                                        type.getElementType());
      Type shardType = shard.getType();
      Value view = b.create<ReshapeOp>(whole.getLoc(), flat, whole);
      Value scattered = b.create<ReduceScatterOp>(
          whole.getLoc(), shardType, view, Reduction::Mean, axis, 0, reason);
      Value returned = scattered;
      if (acc) {
        acc.setType(shardType);
        step.setArgAttrs(acc.getArgNumber(),
                         withShardAttrs(step.getArgAttrDict(acc.getArgNumber()), type));
        b.setInsertionPoint(accumulate);
        returned = b.create<AccumulateOp>(accumulate.getLoc(), shardType, acc,
                                          scattered, accumulate.getScaleAttr());
        ret.setOperand(result, returned);
        replaced.push_back(accumulate); // erased below: `anchor` may be one
      } else {
        ret.setOperand(result, returned);
      }
      step.setResultAttrs(result,
                          withShardAttrs(step.getResultAttrDict(result), type));
    }
    for (AccumulateOp op : replaced) {
      // Its accumulator is a slice now: nothing else may read the old sum.
      if (!op->use_empty())
        return op.emitOpError("is read besides @step's result, but ZeRO-2 "
                              "makes its accumulator a slice");
      op.erase();
    }
    step.setType(FunctionType::get(step.getContext(),
                                   step.front().getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }
};

} // namespace
