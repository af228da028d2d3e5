//===- Partition.cpp - The SPMD program of one rank -----------------------===//
//
// --kiln-partition: turns the forward graph, whose values carry the
// shardings --kiln-propagate-sharding chose, into the program one rank
// runs: every split value gets its local type (the split dimensions
// divided by their axis's ranks), and the collectives the ops' sharding
// rules require are inserted, each with the model-file line and the reason
// (`partial sums of the row-parallel matmul at gpt2.kiln:41`). It runs
// before autodiff, so the backward is derived from the partitioned forward:
// the collectives' VJPs (ir/KilnCollectiveOps.cpp) are the backward's
// collectives. Megatron's tensor parallelism is then what these rules give
// for column- then row-parallel weights -- one all-reduce per block
// forward (the row-parallel matmul's partial sums) and one per block
// backward (the VJP of the kiln.mesh_vary on the column-parallel matmul's
// input) -- not a special case.
//
// 1. Split arguments: a parameter becomes its local block (kiln.shard_axis,
//    kiln.shard_dim, kiln.whole_shape say which, for the runtime's
//    initialisation and checkpoints); an input stays whole and is cut with
//    kiln.local_shard (the data loader feeds whole batches).
// 2. Each op, in order: from its rule, each factor's axis (the results'
//    split for pass-through factors, the operands' for sums); each operand
//    resharded to what the factors ask (kiln.all_gather / kiln.local_shard,
//    along dimension 0 or through a transpose); each float operand that
//    lacks an axis the op's factors use marked kiln.mesh_vary over it (its
//    gradient sums the ranks' parts); the results retyped (a splat
//    constant rebuilt); a split Sum (Mean) factor all-reduces every result
//    with "sum" ("mean").
// 3. kiln.sharding_constraint: its operand resharded to its sharding,
//    then the op removed.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"
#include "ir/Sharding.h"
#include "ir/StepFunction.h"
#include "passes/FusionReport.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNPARTITION
#include "passes/Passes.h.inc"

namespace {

std::string opName(Operation *op) {
  return op->getName().getStringRef().drop_front(5).str(); // "kiln."
}

/// "the row-parallel matmul at gpt2.kiln:41:7" and the like.
std::string describe(Operation *op, const ShardingRule &rule,
                     ArrayRef<std::string> factorAxis) {
  std::string what = opName(op);
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    // Factors: batch..., M, K, N (matmulRule's order).
    size_t n = rule.factors.size();
    if (!factorAxis[n - 2].empty())
      what = "row-parallel matmul";
    else if (!factorAxis[n - 1].empty())
      what = "column-parallel matmul";
  }
  return "the " + what + " at " + modelLocation(op->getLoc());
}

class Partitioner {
public:
  Partitioner(func::FuncOp func, const Mesh &mesh)
      : func_(func), mesh_(mesh), b_(func.getContext()) {}

  LogicalResult run() {
    // The rules read the whole (unpartitioned) types: take them all first.
    SmallVector<Operation *> ops;
    for (Operation &op : func_.getBody().front())
      if (!isa<func::ReturnOp>(op)) {
        ops.push_back(&op);
        rules_[&op] = getShardingRule(&op);
      }
    for (BlockArgument arg : func_.getArguments())
      if (failed(splitArgument(arg)))
        return failure();
    for (Operation *op : ops)
      if (failed(partition(op)))
        return failure();
    func_.setType(FunctionType::get(
        func_.getContext(), func_.getBody().front().getArgumentTypes(),
        func_.getResultTypes()));
    return success();
  }

private:
  TensorSharding shardingOf(Value v) {
    auto it = current_.find(v);
    if (it != current_.end())
      return it->second;
    return TensorSharding(cast<RankedTensorType>(v.getType()).getRank(), "");
  }

  LogicalResult splitArgument(BlockArgument arg) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return success();
    TensorSharding sharding = getSharding(arg);
    if (isReplicated(sharding))
      return success();
    unsigned index = arg.getArgNumber();
    if (getArgumentRole(func_, index) != role::kParam) {
      // An input: whole from the data loader, cut here.
      current_[arg] = TensorSharding(type.getRank(), "");
      b_.setInsertionPointToStart(&func_.getBody().front());
      Value local = reshard(arg, sharding, arg.getLoc(),
                            "the annotation at " + modelLocation(arg.getLoc()) +
                                " splits this input");
      llvm::SmallPtrSet<Operation *, 4> own(reshardOps_.begin(),
                                            reshardOps_.end());
      arg.replaceUsesWithIf(local, [&](OpOperand &use) {
        return !own.contains(use.getOwner());
      });
      return success();
    }
    SmallVector<unsigned> split;
    for (auto [d, axis] : llvm::enumerate(sharding))
      if (!axis.empty())
        split.push_back(d);
    if (split.size() != 1)
      return func_.emitError()
             << "parameter "
             << func_.getArgAttrOfType<StringAttr>(index, kNameAttrName)
             << " is split along " << split.size()
             << " dimensions; a parameter may be split along one";
    NamedAttrList attrs(func_.getArgAttrDict(index));
    attrs.set(kShardAxisAttrName, b_.getStringAttr(sharding[split[0]]));
    attrs.set(kShardDimAttrName, b_.getI64IntegerAttr(split[0]));
    attrs.set(kWholeShapeAttrName, b_.getDenseI64ArrayAttr(type.getShape()));
    func_.setArgAttrs(index, attrs.getDictionary(func_.getContext()));
    arg.setType(localType(type, sharding, mesh_));
    current_[arg] = sharding;
    return success();
  }

  /// `value` (split as shardingOf says) split as `to`, through the
  /// collectives that takes, created at the builder's insertion point.
  Value reshard(Value value, ArrayRef<std::string> to, Location loc,
                const std::string &reason) {
    reshardOps_.clear();
    TensorSharding from = shardingOf(value);
    StringAttr why = b_.getStringAttr(reason);
    for (unsigned d = 0; d < from.size(); ++d)
      if (!from[d].empty() && from[d] != to[d]) {
        value = alongDim(value, d, loc, [&](Value v) -> Value {
          auto t = cast<RankedTensorType>(v.getType());
          SmallVector<int64_t> shape(t.getShape());
          shape[0] *= mesh_.size(from[d]);
          return b_.create<AllGatherOp>(
              loc, RankedTensorType::get(shape, t.getElementType()), v,
              from[d], 0, why);
        });
        from[d] = "";
      }
    for (unsigned d = 0; d < from.size(); ++d)
      if (!to[d].empty() && from[d].empty()) {
        value = alongDim(value, d, loc, [&](Value v) -> Value {
          auto t = cast<RankedTensorType>(v.getType());
          SmallVector<int64_t> shape(t.getShape());
          shape[0] /= mesh_.size(to[d]);
          return b_.create<LocalShardOp>(
              loc, RankedTensorType::get(shape, t.getElementType()), v, to[d],
              0, why);
        });
        from[d] = to[d];
      }
    current_[value] = from;
    return value;
  }

  /// `collective(value)` along dimension `d`: dimension 0 directly when
  /// every dimension before `d` is 1 (the blocks are contiguous), else
  /// through a transpose that brings `d` to the front and one back.
  Value alongDim(Value value, unsigned d, Location loc,
                 llvm::function_ref<Value(Value)> collective) {
    auto type = cast<RankedTensorType>(value.getType());
    bool contiguous = llvm::all_of(type.getShape().take_front(d),
                                   [](int64_t n) { return n == 1; });
    auto record = [&](Value v) {
      reshardOps_.push_back(v.getDefiningOp());
      return v;
    };
    if (contiguous) {
      if (d == 0)
        return record(collective(value));
      SmallVector<int64_t> flat(type.getShape().drop_front(d));
      Value front = record(b_.create<ReshapeOp>(
          loc, RankedTensorType::get(flat, type.getElementType()), value));
      Value done = record(collective(front));
      SmallVector<int64_t> shape(type.getShape().take_front(d));
      auto doneType = cast<RankedTensorType>(done.getType());
      shape.append(doneType.getShape().begin(), doneType.getShape().end());
      return record(b_.create<ReshapeOp>(
          loc, RankedTensorType::get(shape, type.getElementType()), done));
    }
    SmallVector<int64_t> perm{(int64_t)d};
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (i != (int64_t)d)
        perm.push_back(i);
    SmallVector<int64_t> back(type.getRank());
    for (auto [i, p] : llvm::enumerate(perm))
      back[p] = i;
    Value front = record(b_.create<TransposeOp>(loc, value, perm));
    Value done = record(collective(front));
    return record(b_.create<TransposeOp>(loc, done, back));
  }

  LogicalResult partition(Operation *op) {
    b_.setInsertionPoint(op);
    if (auto constraint = dyn_cast<ShardingConstraintOp>(op)) {
      TensorSharding to =
          readSharding(constraint.getSharding(), constraint.getType().getRank());
      Value local = reshard(constraint.getInput(), to, op->getLoc(),
                            "shard(...) at " + modelLocation(op->getLoc()) +
                                " asks for " + formatSharding(to));
      constraint.getResult().replaceAllUsesWith(local);
      current_[local] = to;
      op->erase();
      return success();
    }
    const ShardingRule &rule = rules_[op];
    unsigned numOperands = op->getNumOperands();
    // Each factor's axis: pass-through factors from the results' shardings
    // (what propagation chose), sums from the operands'.
    SmallVector<std::string> factorAxis(rule.factors.size());
    for (OpResult r : op->getResults()) {
      if (!isa<RankedTensorType>(r.getType()))
        continue;
      TensorSharding s = getSharding(r);
      for (auto [d, f] : llvm::enumerate(rule.results[r.getResultNumber()]))
        if (f >= 0 && !s[d].empty())
          factorAxis[f] = s[d];
    }
    for (unsigned i = 0; i < numOperands; ++i) {
      if (!isa<RankedTensorType>(op->getOperand(i).getType()))
        continue;
      TensorSharding s = shardingOf(op->getOperand(i));
      for (auto [d, f] : llvm::enumerate(rule.operands[i]))
        if (f >= 0 && !s[d].empty() && factorAxis[f].empty() &&
            rule.factors[f].kind != FactorKind::Whole &&
            (rule.factors[f].kind != FactorKind::PassThrough ||
             op->getNumResults() == 0))
          factorAxis[f] = s[d];
    }
    SmallVector<std::string> axesUsed;
    for (const std::string &axis : factorAxis)
      if (!axis.empty() && !llvm::is_contained(axesUsed, axis))
        axesUsed.push_back(axis);
    std::string where = describe(op, rule, factorAxis);

    // Operands: resharded to the factors' axes, then marked varying.
    for (unsigned i = 0; i < numOperands; ++i) {
      Value v = op->getOperand(i);
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (!type)
        continue;
      TensorSharding want(type.getRank(), "");
      for (auto [d, f] : llvm::enumerate(rule.operands[i]))
        if (f >= 0)
          want[d] = factorAxis[f];
      if (shardingOf(v) != want) {
        bool gathers = llvm::any_of(llvm::zip(shardingOf(v), want), [](auto p) {
          return !std::get<0>(p).empty() && std::get<0>(p) != std::get<1>(p);
        });
        v = reshard(v, want, op->getLoc(),
                    where + (gathers ? " reads it whole" : " reads this rank's block"));
      }
      if (isa<FloatType>(type.getElementType()))
        for (const std::string &axis : axesUsed)
          if (!llvm::is_contained(want, axis))
            v = vary(v, axis, where);
      op->setOperand(i, v);
    }

    // Results: local types; partial sums all-reduced.
    for (OpResult r : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type)
        continue;
      TensorSharding s = getSharding(r);
      r.setType(localType(type, s, mesh_));
      current_[r] = s;
    }
    if (auto constant = dyn_cast<ConstantOp>(op))
      if (constant.getType() != constant.getValue().getType())
        constant.setValueAttr(
            cast<DenseElementsAttr>(constant.getValue())
                .resizeSplat(cast<ShapedType>(constant.getType())));
    b_.setInsertionPointAfter(op);
    for (auto [f, axis] : llvm::enumerate(factorAxis)) {
      FactorKind kind = rule.factors[f].kind;
      if (axis.empty() || (kind != FactorKind::Sum && kind != FactorKind::Mean))
        continue;
      for (OpResult r : op->getResults()) {
        bool isSum = kind == FactorKind::Sum;
        auto reduce = b_.create<AllReduceOp>(
            op->getLoc(), ValueRange{r}, isSum ? "sum" : "mean", axis,
            b_.getStringAttr((isSum ? "partial sums of " : "the mean over the "
                                                           "ranks' blocks of ") +
                             where));
        r.replaceAllUsesExcept(reduce.getResult(0), reduce);
        current_[reduce.getResult(0)] = current_[r];
      }
    }
    return success();
  }

  /// kiln.mesh_vary of `v` over `axis`, one per value and axis.
  Value vary(Value v, StringRef axis, const std::string &where) {
    Value &cached = varied_[v][axis];
    if (cached)
      return cached;
    OpBuilder::InsertionGuard guard(b_);
    if (auto *def = v.getDefiningOp())
      b_.setInsertionPointAfter(def);
    else
      b_.setInsertionPointToStart(&func_.getBody().front());
    Value varied = b_.create<MeshVaryOp>(
        v.getLoc(), v, axis,
        b_.getStringAttr(where + " reads it whole on every rank: its gradient "
                                 "sums the ranks' parts"));
    current_[varied] = shardingOf(v);
    cached = varied;
    return varied;
  }

  func::FuncOp func_;
  const Mesh &mesh_;
  OpBuilder b_;
  DenseMap<Value, TensorSharding> current_;
  DenseMap<Operation *, ShardingRule> rules_;
  DenseMap<Value, llvm::StringMap<Value>> varied_;
  SmallVector<Operation *> reshardOps_;
};

struct KilnPartition : impl::KilnPartitionBase<KilnPartition> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Mesh mesh = readMesh(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Partitioner(func, mesh).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::kiln
