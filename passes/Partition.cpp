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
// 4. An op whose split factor its rule marks Rewritten is replaced by the
//    ops that compute it on blocks (Megatron's vocabulary parallelism): an
//    embedding of a row-split table (each rank's rows looked up, the
//    lookups all-reduced), a cross-entropy over class-split logits (each
//    rank's logsumexp all-gathered and combined, the target's logit
//    all-reduced).
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"
#include "ir/Sharding.h"
#include "ir/StepFunction.h"
#include "passes/FusionReport.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <limits>

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
    // The function's results leave whole (its scalars are; a split value
    // is gathered).
    Operation *ret = func_.getBody().front().getTerminator();
    b_.setInsertionPoint(ret);
    for (OpOperand &result : ret->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(result.get().getType());
      if (!type || isReplicated(shardingOf(result.get())))
        continue;
      result.set(reshard(result.get(), TensorSharding(type.getRank(), ""),
                         ret->getLoc(), "the program returns it whole"));
    }
    // The shardings of the values this pass made (collectives, the views
    // around them: alongDim recorded them), for sharding.txt.
    func_.walk([&](Operation *op) {
      if (op->hasAttr(kShardingAttrName) || op->getNumResults() != 1)
        return;
      Value result = op->getResult(0);
      auto it = current_.find(result);
      if (it != current_.end() && !isReplicated(it->second))
        op->setAttr(kShardingAttrName,
                    b_.getArrayAttr({shardingAttr(op->getContext(), it->second)}));
    });
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
    if (getArgumentRole(func_, index) != Role::Param) {
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
        value = alongDim(value, d, "", loc, [&](Value v) -> Value {
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
        value = alongDim(value, d, to[d], loc, [&](Value v) -> Value {
          auto t = cast<RankedTensorType>(v.getType());
          SmallVector<int64_t> shape(t.getShape());
          shape[0] /= mesh_.size(to[d]);
          return b_.create<LocalShardOp>(
              loc, RankedTensorType::get(shape, t.getElementType()), v, to[d],
              0, why);
        });
        from[d] = to[d];
      }
    return value;
  }

  /// The reduce-scatter over `axis` of the partial sums `partial` into the
  /// split `to` (the dimension `to` splits over `axis`), at the builder's
  /// insertion point.
  Value reduceScatter(Value partial, ArrayRef<std::string> to, StringRef axis,
                      Location loc, const std::string &reason) {
    reshardOps_.clear();
    unsigned d = llvm::find(to, axis) - to.begin();
    StringAttr why = b_.getStringAttr(reason);
    return alongDim(partial, d, axis, loc, [&](Value v) -> Value {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(t.getShape());
      shape[0] /= mesh_.size(axis);
      return b_.create<ReduceScatterOp>(
          loc, RankedTensorType::get(shape, t.getElementType()), v, Reduction::Sum, axis,
          0, why);
    });
  }

  /// `collective(value)` along dimension `d`, which it leaves split over
  /// `axis` ("": whole): dimension 0 directly when every dimension before
  /// `d` is 1 (the blocks are contiguous), else through a transpose that
  /// brings `d` to the front and one back. Every value made gets its
  /// sharding (current_), for the ops after it and for sharding.txt.
  Value alongDim(Value value, unsigned d, StringRef axis, Location loc,
                 llvm::function_ref<Value(Value)> collective) {
    auto type = cast<RankedTensorType>(value.getType());
    TensorSharding in = shardingOf(value), out = in;
    out[d] = axis.str();
    auto record = [&](Value v, TensorSharding sharding) {
      reshardOps_.push_back(v.getDefiningOp());
      current_[v] = std::move(sharding);
      return v;
    };
    // The sharding of the [front..., rest] view with `d` first: `from`'s
    // dimension `d` first, then the rest (`order`).
    auto ordered = [&](const TensorSharding &from, ArrayRef<int64_t> order) {
      TensorSharding sharding;
      for (int64_t i : order)
        sharding.push_back(from[i]);
      return sharding;
    };
    if (llvm::all_of(type.getShape().take_front(d),
                     [](int64_t n) { return n == 1; })) {
      if (d == 0)
        return record(collective(value), out);
      SmallVector<int64_t> rest = llvm::to_vector(llvm::seq<int64_t>(d, type.getRank()));
      SmallVector<int64_t> flat(type.getShape().drop_front(d));
      Value front = record(b_.create<ReshapeOp>(
                               loc, RankedTensorType::get(flat, type.getElementType()), value),
                           ordered(in, rest));
      Value done = record(collective(front), ordered(out, rest));
      SmallVector<int64_t> shape(type.getShape().take_front(d));
      auto doneType = cast<RankedTensorType>(done.getType());
      shape.append(doneType.getShape().begin(), doneType.getShape().end());
      return record(b_.create<ReshapeOp>(
                        loc, RankedTensorType::get(shape, type.getElementType()), done),
                    out);
    }
    SmallVector<int64_t> perm{(int64_t)d};
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (i != (int64_t)d)
        perm.push_back(i);
    SmallVector<int64_t> back(type.getRank());
    for (auto [i, p] : llvm::enumerate(perm))
      back[p] = i;
    Value front = record(b_.create<TransposeOp>(loc, value, perm), ordered(in, perm));
    Value done = record(collective(front), ordered(out, perm));
    return record(b_.create<TransposeOp>(loc, done, back), out);
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
    // A result split over an axis a Sum factor also uses (sequence
    // parallelism's row-parallel product): the op computes the partial sums
    // whole along that result dimension, and a reduce-scatter fills the
    // split result. Axis -> the factor it scatters.
    llvm::StringMap<int64_t> scattered;
    for (auto [f, axis] : llvm::enumerate(factorAxis))
      if (!axis.empty() && rule.factors[f].kind == FactorKind::PassThrough &&
          llvm::any_of(llvm::seq<size_t>(0, factorAxis.size()), [&](size_t g) {
            return factorAxis[g] == axis && rule.factors[g].kind == FactorKind::Sum;
          }))
        scattered[axis] = f;
    for (auto &entry : scattered)
      factorAxis[entry.second] = "";
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
        // One reshard per value and sharding, shared by its readers (q, k
        // and v read one gather of their input).
        Value &cached = resharded_[v][formatSharding(want)];
        if (!cached)
          cached = reshard(v, want, op->getLoc(),
                           where + (gathers ? " reads it whole"
                                            : " reads this rank's block"));
        v = cached;
      }
      if (isa<FloatType>(type.getElementType()))
        for (const std::string &axis : axesUsed)
          if (!llvm::is_contained(want, axis))
            v = vary(v, axis, where);
      op->setOperand(i, v);
    }

    // A split factor the op cannot compute on its blocks: rewritten.
    for (auto [f, axis] : llvm::enumerate(factorAxis))
      if (!axis.empty() && rule.factors[f].kind == FactorKind::Rewritten) {
        b_.setInsertionPoint(op);
        if (auto ce = dyn_cast<CrossEntropyOp>(op))
          return vocabParallelCrossEntropy(ce, axis, rule, factorAxis);
        if (auto embedding = dyn_cast<EmbeddingOp>(op))
          return splitTableEmbedding(embedding, axis);
        return op->emitOpError() << "has a split factor no rewrite handles";
      }

    // Results: local types (whole along a scattered dimension until the
    // reduce-scatter); partial sums all-reduced or reduce-scattered.
    SmallVector<TensorSharding> wanted; // each result's propagated sharding
    for (OpResult r : op->getResults())
      wanted.push_back(isa<RankedTensorType>(r.getType()) ? getSharding(r)
                                                          : TensorSharding());
    for (OpResult r : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type)
        continue;
      TensorSharding s = wanted[r.getResultNumber()];
      bool scatteredHere = false;
      for (std::string &axis : s)
        if (scattered.count(axis)) {
          axis.clear();
          scatteredHere = true;
        }
      r.setType(localType(type, s, mesh_));
      current_[r] = s;
      // The op's own result is the partial sums, whole along the scattered
      // dimension: say so (sharding.txt reads it).
      if (scatteredHere && op->getNumResults() == 1)
        op->setAttr(kShardingAttrName,
                    b_.getArrayAttr({shardingAttr(op->getContext(), s)}));
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
        if (isSum && scattered.count(axis)) {
          const TensorSharding &to = wanted[r.getResultNumber()];
          Value split = reduceScatter(r, to, axis, op->getLoc(),
                                      "partial sums of " + where +
                                          ", each rank keeping its block of "
                                          "the split result");
          r.replaceAllUsesExcept(split, llvm::SmallPtrSet<Operation *, 4>(
                                            reshardOps_.begin(), reshardOps_.end()));
          continue;
        }
        auto reduce = b_.create<AllReduceOp>(
            op->getLoc(), ValueRange{r}, isSum ? Reduction::Sum : Reduction::Mean, axis,
            b_.getStringAttr((isSum ? "partial sums of " : "the mean over the "
                                                           "ranks' blocks of ") +
                             where));
        r.replaceAllUsesExcept(reduce.getResult(0), reduce);
        current_[reduce.getResult(0)] = current_[r];
      }
    }
    return success();
  }

  /// This rank's block along `axis` of the indices 0 .. whole - 1 (of
  /// `type`), the dimension of `whole` elements being split over it.
  Value blockIndices(Location loc, int64_t whole, Type type, StringRef axis,
                     StringAttr why) {
    Value iota = b_.create<IotaOp>(loc, RankedTensorType::get({whole}, type));
    return b_.create<LocalShardOp>(
        loc, RankedTensorType::get({whole / mesh_.size(axis)}, type), iota, axis,
        0, why);
  }

  /// `a and b` of two i1 tensors, as the frontend writes it: select(a, b, a).
  Value both(Location loc, Value a, Value b) {
    return b_.create<SelectOp>(loc, a, b, a);
  }

  Value splat(Location loc, Value like, double value) {
    return createSplatConstant(b_, loc, cast<RankedTensorType>(like.getType()),
                               value);
  }

  /// log(sum(exp(x))) over the last dimension of `x` from its softmax p:
  /// sum(p * (x - log p)), each term p * lse (the sum of p is 1), with the
  /// classes whose p underflows to 0 left out -- no infinity anywhere, in
  /// the value or its gradient, whose d/dx is p as lse's.
  Value logSumExp(Location loc, Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    Value p = b_.create<SoftmaxOp>(loc, x);
    Value kept = b_.create<CmpOp>(loc, "gt", p, splat(loc, p, 0.0));
    Value logP = b_.create<LogOp>(
        loc, b_.create<SelectOp>(loc, kept, p, splat(loc, p, 1.0)));
    Value xKept = b_.create<SelectOp>(loc, kept, x, splat(loc, x, 0.0));
    Value terms = b_.create<MulOp>(loc, p, b_.create<SubOp>(loc, xKept, logP));
    return b_.create<ReduceSumOp>(loc, terms,
                                  ArrayRef<int64_t>{type.getRank() - 1});
  }

  /// Megatron's vocabulary-parallel cross-entropy: logits [R..., V/n] (the
  /// classes split over `axis`), targets [R...] whole over it.
  ///   lse_r = logsumexp of the rank's classes              [R...]
  ///   lse   = logsumexp over the ranks of every lse_r (all-gathered)
  ///   x_t   = sum over the ranks of the target's logit, 0 on the ranks
  ///           that do not hold its class (all-reduced)
  ///   loss  = mean over rows of (lse - x_t), 0 for a target outside
  ///           [0, valid_classes), as kiln.cross_entropy.
  LogicalResult vocabParallelCrossEntropy(CrossEntropyOp op, StringRef axis,
                                          const ShardingRule &rule,
                                          ArrayRef<std::string> factorAxis) {
    Location loc = op.getLoc();
    Value x = op.getLogits(), t = op.getTargets();
    auto xType = cast<RankedTensorType>(x.getType());
    auto tType = cast<RankedTensorType>(t.getType());
    const int64_t rank = xType.getRank(), ranks = mesh_.size(axis);
    const int64_t classes = xType.getShape().back() * ranks;
    const int64_t valid = op.getValidClasses().value_or(classes);
    if (valid <= (ranks - 1) * (classes / ranks))
      return op.emitError() << "the vocabulary-parallel cross-entropy over "
                            << ranks << " ranks needs classes on every rank, "
                            << "but only " << valid << " of the padded "
                            << classes << " are valid";
    std::string where = "the vocabulary-parallel cross_entropy at " +
                        modelLocation(loc);
    StringAttr why = b_.getStringAttr(where + ": each rank's class indices");

    // Each class's index, on this rank's block: [R..., V/n].
    Type indexType = tType.getElementType();
    SmallVector<int64_t> lastDim{rank - 1};
    Value mine = blockIndices(loc, classes, indexType, axis, why);
    Value index = b_.create<BroadcastOp>(
        loc, RankedTensorType::get(xType.getShape(), indexType), mine,
        b_.getDenseI64ArrayAttr(lastDim));
    // Padded classes out of the softmax.
    Value logits = x;
    if (valid < classes) {
      Value inClass = b_.create<CmpOp>(loc, "lt", index, splat(loc, index, valid));
      logits = b_.create<SelectOp>(loc, inClass, x,
                                   splat(loc, x, -std::numeric_limits<double>::infinity()));
    }
    // lse over the rank's classes, then over the ranks' lse values.
    Value local = logSumExp(loc, logits); // [R...]
    auto rowsType = cast<RankedTensorType>(local.getType());
    SmallVector<int64_t> one{1}, gathered{ranks};
    one.append(rowsType.getShape().begin(), rowsType.getShape().end());
    gathered.append(rowsType.getShape().begin(), rowsType.getShape().end());
    Value all = b_.create<AllGatherOp>(
        loc, RankedTensorType::get(gathered, rowsType.getElementType()),
        b_.create<ReshapeOp>(loc, RankedTensorType::get(one, rowsType.getElementType()),
                             local),
        axis, 0, b_.getStringAttr(where + ": every rank's logsumexp of its classes"));
    SmallVector<int64_t> toLast;
    for (int64_t d = 1; d < (int64_t)gathered.size(); ++d)
      toLast.push_back(d);
    toLast.push_back(0);
    Value lse = logSumExp(loc, b_.create<TransposeOp>(loc, all, toLast)); // [R...]
    // The target's logit, from the rank holding its class.
    SmallVector<int64_t> rowDims;
    for (int64_t d = 0; d + 1 < rank; ++d)
      rowDims.push_back(d);
    Value targets = b_.create<BroadcastOp>(
        loc, RankedTensorType::get(xType.getShape(), indexType), t,
        b_.getDenseI64ArrayAttr(rowDims));
    Value hit = b_.create<CmpOp>(loc, "eq", index, targets);
    Value picked = b_.create<ReduceSumOp>(
        loc, b_.create<SelectOp>(loc, hit, x, splat(loc, x, 0.0)), lastDim);
    auto targetLogit = b_.create<AllReduceOp>(
        loc, ValueRange{picked}, Reduction::Sum, axis,
        b_.getStringAttr(where + ": the target's logit, from the rank holding "
                                 "its class"));
    // Rows with a target outside [0, valid_classes) count 0.
    Value inRange = both(loc, b_.create<CmpOp>(loc, "ge", t, splat(loc, t, 0.0)),
                         b_.create<CmpOp>(loc, "lt", t, splat(loc, t, valid)));
    Value rowLoss = b_.create<SubOp>(loc, lse, targetLogit.getResult(0));
    rowLoss = b_.create<SelectOp>(loc, inRange, rowLoss, splat(loc, rowLoss, 0.0));
    SmallVector<int64_t> allRows(rowDims);
    Value loss = rowsType.getRank() == 0
                     ? rowLoss
                     : b_.create<ReduceSumOp>(loc, rowLoss, allRows).getResult();
    loss = b_.create<DivOp>(loc, loss,
                            splat(loc, loss, static_cast<double>(rowsType.getNumElements())));
    // Rows split over another axis: the mean of the ranks' means.
    for (auto [f, rowAxis] : llvm::enumerate(factorAxis))
      if (!rowAxis.empty() && rule.factors[f].kind == FactorKind::Mean)
        loss = b_.create<AllReduceOp>(
                      loc, ValueRange{loss}, Reduction::Mean, rowAxis,
                      b_.getStringAttr("the mean over the ranks' blocks of " + where))
                   .getResult(0);
    op.getResult().replaceAllUsesWith(loss);
    op.erase();
    return success();
  }

  /// An embedding whose table's rows are split over `axis`: each rank looks
  /// up the indices that fall in its block of rows (0 for the others), and
  /// an all-reduce sums the ranks' lookups (Megatron's vocabulary-parallel
  /// embedding). The backward scatters into the rank's rows alone.
  LogicalResult splitTableEmbedding(EmbeddingOp op, StringRef axis) {
    Location loc = op.getLoc();
    Value table = op.getTable(), indices = op.getIndices();
    auto tableType = cast<RankedTensorType>(table.getType());
    auto indexType = cast<RankedTensorType>(indices.getType());
    const int64_t rows = tableType.getDimSize(0);
    std::string where = "the vocabulary-parallel embedding at " + modelLocation(loc);
    // The rank's first row: the first of its block of row indices.
    Value start = b_.create<SliceOp>(
        loc,
        blockIndices(loc, rows * mesh_.size(axis), indexType.getElementType(),
                     axis, b_.getStringAttr(where + ": the rank's first row")),
        0, 0, 1);
    Value local = b_.create<SubOp>(
        loc, indices,
        b_.create<BroadcastOp>(loc, indexType, start, b_.getDenseI64ArrayAttr({0})));
    Value mine = both(loc, b_.create<CmpOp>(loc, "ge", local, splat(loc, local, 0.0)),
                      b_.create<CmpOp>(loc, "lt", local, splat(loc, local, rows)));
    Value safe = b_.create<SelectOp>(loc, mine, local, splat(loc, local, 0.0));
    Value rowsRead = b_.create<EmbeddingOp>(loc, table, safe);
    auto resultType = cast<RankedTensorType>(rowsRead.getType());
    SmallVector<int64_t> indexDims;
    for (int64_t d = 0; d < indexType.getRank(); ++d)
      indexDims.push_back(d);
    Value mineRows = b_.create<BroadcastOp>(
        loc, RankedTensorType::get(resultType.getShape(), b_.getI1Type()), mine,
        b_.getDenseI64ArrayAttr(indexDims));
    Value masked = b_.create<SelectOp>(loc, mineRows, rowsRead,
                                       splat(loc, rowsRead, 0.0));
    auto sum = b_.create<AllReduceOp>(
        loc, ValueRange{masked}, Reduction::Sum, axis,
        b_.getStringAttr(where + ": each rank looks up the rows it holds"));
    TensorSharding sharding = getSharding(op.getResult());
    op.getResult().replaceAllUsesWith(sum.getResult(0));
    current_[sum.getResult(0)] = sharding;
    op.erase();
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
  DenseMap<Value, llvm::StringMap<Value>> resharded_;
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
