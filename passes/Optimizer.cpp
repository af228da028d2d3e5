//===- Optimizer.cpp - The "update" program: norm, clipping, optimizer ----===//
//
// --kiln-optimizer: builds `@update`, the artifact's "update" program, run
// once per training step after the last micro-batch of "step". It reads the
// gradients and the loss that @step produced (shared by role and name) and
// updates the parameters and the optimizer state in place.
//
// Algorithm:
//  1. Read kiln.train: optimizer ("adamw", "adam" or "sgd") and its
//     hyperparameters, clip, and the weight-decay exclusions decay_norms,
//     decay_biases, decay_embeddings (missing entry or bad value: error).
//  2. In the loss function (@step, after --kiln-autodiff), pair every param
//     argument with the grad result of the same kiln.name.
//  3. Classify every parameter by how @step uses it (following reshape views):
//     "embedding" (the table of a kiln.embedding, tied ones included), "norm"
//     (a weight or bias of a normalisation op), "bias" (any other rank <= 1
//     parameter) or "weight". Its weight decay is the optimizer's, or 0 for an
//     excluded kind (norm, bias, embedding) unless decay_<kind>s = true. Both
//     are written on the param arguments (kiln.param_kind, kiln.weight_decay).
//  4. Create @update(params..., grads..., loss, state..., lr, step) where the
//     state is adam_m... then adam_v... (adam/adamw), momentum... (sgd with
//     momentum > 0) or nothing (plain sgd).
//  5. grad_norm = sqrt(sum_g reduce_sum(g * g)); scale = kiln.grad_scale(
//     grad_norm, loss) {max_norm = clip} (NaN when either is not finite: the
//     update ops then skip the step).
//  6. One update op per parameter (kiln.adam / kiln.sgd / kiln.sgd_momentum)
//     with its weight decay; update_norm and param_norm are the square roots
//     of the sums of the ops' update_sq and param_sq.
//  7. Results: grad_norm, update_norm, param_norm, params..., state...
//     (consumers look results up by role and name).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <numeric>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// kiln.train, as the update ops need it.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  FloatAttr beta1, beta2, epsilon, weightDecay, momentum, dampening, clip;
  BoolAttr nesterov;
  bool decayNorms = false, decayBiases = false, decayEmbeddings = false;

  bool isAdam() const { return kind != OptimizerKind::Sgd; }
  bool hasMomentumBuffer() const {
    return kind == OptimizerKind::Sgd && momentum.getValueAsDouble() > 0.0;
  }
};

/// A parameter argument of @step, its gradient result and its decay.
struct ParamAndGrad {
  BlockArgument param;
  StringAttr name;
  unsigned gradResult;
  StringRef kind;      // "weight" | "bias" | "norm" | "embedding"
  FloatAttr decay;     // this parameter's weight decay
};

/// Step 1: kiln.train -> OptimizerConfig, with an error on `module` otherwise
/// (#kiln.train's verifier has refused another optimizer's settings).
FailureOr<OptimizerConfig> readTrainConfig(ModuleOp module) {
  TrainConfigAttr train = getTrainConfig(module);
  if (!train)
    return module.emitError("--kiln-optimizer needs the module attribute "
                            "'kiln.train' (#kiln.train<...>: the optimizer "
                            "and its hyperparameters)");
  StringRef optimizer = stringifyOptimizerKind(train.getOptimizer());
  SmallVector<std::pair<FloatAttr, StringRef>> needed = {
      {train.getWeightDecay(), "weight_decay"}};
  if (train.getOptimizer() != OptimizerKind::Sgd)
    needed.append({{train.getBeta1(), "beta1"},
                   {train.getBeta2(), "beta2"},
                   {train.getEpsilon(), "epsilon"}});
  for (auto [value, key] : needed)
    if (!value)
      return module.emitError("'kiln.train' needs '")
             << key << "' for the " << optimizer << " optimizer";
  Builder b(module.getContext());
  auto orZero = [&](FloatAttr value) {
    return value ? value : b.getF32FloatAttr(0.0f);
  };
  OptimizerConfig config;
  config.kind = train.getOptimizer();
  config.weightDecay = train.getWeightDecay();
  config.clip = orZero(train.getClip());
  config.decayNorms = train.decaysNorms();
  config.decayBiases = train.decaysBiases();
  config.decayEmbeddings = train.decaysEmbeddings();
  if (config.isAdam()) {
    config.beta1 = train.getBeta1();
    config.beta2 = train.getBeta2();
    config.epsilon = train.getEpsilon();
  } else {
    config.momentum = orZero(train.getMomentum());
    config.dampening = orZero(train.getDampening());
    config.nesterov =
        train.getNesterov() ? train.getNesterov() : b.getBoolAttr(false);
  }
  return config;
}

/// Whether `use` is a weight or bias operand of a normalisation op (any op
/// whose learned per-feature scale/shift should not decay).
bool isNormalizationParameter(OpOperand &use) {
  auto row = dyn_cast<RowOpInterface>(use.getOwner());
  return row && row.isNormalizationParameter(use.getOperandNumber());
}

/// Step 3: the parameter's kind, from its uses in @step.
StringRef classifyParameter(BlockArgument param) {
  bool embedding = false, norm = false;
  SmallVector<Value> views{param};
  for (size_t next = 0; next < views.size(); ++next)
    for (OpOperand &use : views[next].getUses()) {
      Operation *user = use.getOwner();
      if (auto reshape = dyn_cast<ReshapeOp>(user))
        views.push_back(reshape.getResult());
      else if (isa<EmbeddingOp>(user) && use.getOperandNumber() == 0)
        embedding = true;
      else if (isNormalizationParameter(use))
        norm = true;
    }
  if (embedding)
    return "embedding";
  if (norm)
    return "norm";
  if (cast<RankedTensorType>(param.getType()).getRank() <= 1)
    return "bias";
  return "weight";
}

FloatAttr decayOf(Builder &b, StringRef kind, const OptimizerConfig &config) {
  bool excluded = (kind == "norm" && !config.decayNorms) ||
                  (kind == "bias" && !config.decayBiases) ||
                  (kind == "embedding" && !config.decayEmbeddings);
  return excluded ? b.getF32FloatAttr(0.0f) : config.weightDecay;
}

/// Steps 2-3: the params of `step` with their grad results and decay.
FailureOr<SmallVector<ParamAndGrad>>
pairParamsWithGrads(func::FuncOp step, const OptimizerConfig &config) {
  llvm::StringMap<unsigned> gradByName = getGradResultsByName(step);
  if (gradByName.empty())
    return step.emitOpError("has no kiln.role = #kiln.role<grad> results; "
                            "--kiln-optimizer must run after --kiln-autodiff");

  Builder b(step.getContext());
  SmallVector<ParamAndGrad> pairs;
  FailureOr<SmallVector<ParameterArgument>> params = getParameterArguments(step);
  if (failed(params))
    return failure();
  for (auto [arg, name] : *params) {
    auto it = gradByName.find(name.getValue());
    if (it == gradByName.end())
      return step.emitOpError("has no gradient result for parameter '")
             << name.getValue() << "'";
    if (step.getResultTypes()[it->second] != arg.getType())
      return step.emitOpError("gradient of parameter '")
             << name.getValue() << "' has type "
             << step.getResultTypes()[it->second] << ", expected "
             << arg.getType();
    auto type = cast<RankedTensorType>(arg.getType());
    if (!type.getElementType().isF32())
      return step.emitOpError("parameter '")
             << name.getValue() << "' must be f32 for the "
             << stringifyOptimizerKind(config.kind)
             << " optimizer, found " << type;
    StringRef kind = classifyParameter(arg);
    pairs.push_back({arg, name, it->second, kind, decayOf(b, kind, config)});
    step.setArgAttr(arg.getArgNumber(), kParamKindAttrName,
                    b.getStringAttr(kind));
    step.setArgAttr(arg.getArgNumber(), kWeightDecayAttrName,
                    pairs.back().decay);
  }
  return pairs;
}

/// The arguments of @update (step 4), in order, with their attributes.
struct UpdateSignature {
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  SmallVector<Location> locs;

  void add(Type type, DictionaryAttr attr, Location loc) {
    types.push_back(type);
    attrs.push_back(attr);
    locs.push_back(loc);
  }
};

/// sum(g * g) over every element of `g`, as a rank-0 tensor.
Value sumOfSquares(OpBuilder &b, Location loc, Value g) {
  auto type = cast<RankedTensorType>(g.getType());
  Value squares = b.create<MulOp>(loc, g, g); // shape of the param
  if (type.getRank() == 0)
    return squares;
  SmallVector<int64_t> allDims(type.getRank());
  std::iota(allDims.begin(), allDims.end(), 0);
  return b.create<ReduceSumOp>(loc, squares, allDims); // tensor<f32>
}

Value addScalars(OpBuilder &b, Location loc, Value sum, Value term) {
  return sum ? b.create<AddOp>(loc, sum, term).getResult() : term;
}

/// A sum of scalars over the parameters, kept apart by what each term
/// covers: a whole replicated tensor, or only this rank's part along a mesh
/// axis (a ZeRO shard over data; a tensor-parallel block over model).
struct ShardedSums {
  Value replicated;
  llvm::MapVector<StringRef, Value> partial; // axis -> sum of rank terms

  /// `term` covers the whole tensor (axis ""), or this rank's part of it
  /// along `axis`.
  void add(OpBuilder &b, Location loc, Value term, StringRef axis) {
    Value &sum = axis.empty() ? replicated : partial[axis];
    sum = addScalars(b, loc, sum, term);
  }
  /// Each of `sums`' totals over the whole model: per axis, the partial
  /// terms of all of them summed over its ranks in one all-reduce, plus the
  /// replicated terms. `reason(axis)` says why, for the report.
  static SmallVector<Value>
  totals(OpBuilder &b, Location loc, ArrayRef<ShardedSums *> sums,
         llvm::function_ref<std::string(StringRef)> reason) {
    llvm::SetVector<StringRef> axes;
    for (ShardedSums *s : sums)
      for (auto &entry : s->partial)
        axes.insert(entry.first);
    for (StringRef axis : axes) {
      SmallVector<Value> terms;
      for (ShardedSums *s : sums)
        if (Value v = s->partial.lookup(axis))
          terms.push_back(v);
      auto reduce = b.create<AllReduceOp>(loc, terms, Reduction::Sum, axis,
                                          b.getStringAttr(reason(axis)));
      unsigned next = 0;
      for (ShardedSums *s : sums)
        if (s->partial.lookup(axis))
          s->partial[axis] = reduce.getResult(next++);
    }
    SmallVector<Value> result;
    for (ShardedSums *s : sums) {
      Value total = s->replicated;
      for (auto &entry : s->partial)
        total = addScalars(b, loc, total, entry.second);
      result.push_back(total);
    }
    return result;
  }
};

/// `attrs` plus the tensor-parallel split of the parameter whose argument
/// attributes are `param` (kiln.shard_axis, kiln.shard_dim,
/// kiln.whole_shape), if it has one: its gradient and optimizer state are
/// blocks alike.
DictionaryAttr withSplitOf(DictionaryAttr attrs, DictionaryAttr param) {
  if (!param || !param.get(kShardDimAttrName))
    return attrs;
  NamedAttrList list(attrs);
  for (StringRef name : {StringRef(kShardAxisAttrName),
                         StringRef(kShardDimAttrName),
                         StringRef(kWholeShapeAttrName)})
    list.set(name, param.get(name));
  return list.getDictionary(attrs.getContext());
}

/// The mesh axis a tensor-parallel parameter is split over ("" if whole).
StringRef splitAxisOf(DictionaryAttr param) {
  if (!param || !param.get(kShardDimAttrName))
    return "";
  auto axis = param.getAs<StringAttr>(kShardAxisAttrName);
  return axis ? axis.getValue() : "";
}

/// One parameter's ZeRO update: this rank's slice of replicated values
/// going in, every rank's new slice gathered coming out.
class ShardedUpdate {
public:
  ShardedUpdate(OpBuilder &b, Location loc, const ZeroSharding &zero,
                std::optional<RankedTensorType> shard)
      : b_(b), loc_(loc), zero_(zero), shard_(shard) {}

  /// This rank's slice of the flattened `whole`.
  Value take(Value whole) {
    auto type = cast<RankedTensorType>(whole.getType());
    auto flat = RankedTensorType::get({type.getNumElements()},
                                      type.getElementType());
    Value view = b_.create<ReshapeOp>(loc_, flat, whole);
    return b_.create<LocalShardOp>(
        loc_, *shard_, view, kDataAxisName, 0,
        b_.getStringAttr("ZeRO-" + std::to_string(zero_.stage) +
                         ": this rank's share of the optimizer update"));
  }
  /// The whole tensor of type `whole` from every rank's `slice`.
  Value gather(Value slice, Type whole) {
    auto type = cast<RankedTensorType>(whole);
    auto flat = RankedTensorType::get({type.getNumElements()},
                                      type.getElementType());
    Value gathered = b_.create<AllGatherOp>(
        loc_, flat, slice, kDataAxisName, 0,
        b_.getStringAttr("ZeRO-" + std::to_string(zero_.stage) +
                         ": the updated parameter from every rank's shard"));
    return b_.create<ReshapeOp>(loc_, type, gathered);
  }

private:
  OpBuilder &b_;
  Location loc_;
  const ZeroSharding &zero_;
  std::optional<RankedTensorType> shard_;
};

/// Steps 4-7.
LogicalResult buildUpdateFunction(ModuleOp module, func::FuncOp step,
                                  const OptimizerConfig &config) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(kUpdateFunctionName))
    return existing.emitOpError("already exists (was --kiln-optimizer "
                                "already run?)");
  FailureOr<SmallVector<ParamAndGrad>> pairs =
      pairParamsWithGrads(step, config);
  if (failed(pairs))
    return failure();
  size_t n = pairs->size();
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  auto scalarType = RankedTensorType::get({}, b.getF32Type());

  // ZeRO: a parameter whose elements split evenly over the data ranks has
  // its optimizer state (from stage 2 its gradient, from stage 3 itself)
  // as this rank's shard; the others stay replicated.
  ZeroSharding zero = readZeroSharding(module);
  SmallVector<std::optional<RankedTensorType>> shards;
  for (const ParamAndGrad &p : *pairs)
    shards.push_back(
        zero.shardType(cast<RankedTensorType>(p.param.getType())));

  // (4) Signature: params, grads, loss, state, lr, step.
  UpdateSignature sig;
  for (auto [i, p] : llvm::enumerate(*pairs)) {
    DictionaryAttr attrs = step.getArgAttrDict(p.param.getArgNumber());
    if (zero.stage >= 3 && shards[i]) // @step gathers it where it is used
      sig.add(*shards[i],
              withShardAttrs(attrs, cast<RankedTensorType>(p.param.getType())),
              p.param.getLoc());
    else
      sig.add(p.param.getType(), attrs, p.param.getLoc());
  }
  auto stateArg = [&](size_t i, Role r, bool shardable) {
    const ParamAndGrad &p = (*pairs)[i];
    if (shardable && shards[i])
      sig.add(*shards[i],
              withShardAttrs(roleAndName(b, r, p.name),
                             cast<RankedTensorType>(p.param.getType())),
              p.param.getLoc());
    else
      sig.add(p.param.getType(),
              withSplitOf(roleAndName(b, r, p.name),
                          step.getArgAttrDict(p.param.getArgNumber())),
              p.param.getLoc());
  };
  for (size_t i = 0; i < n; ++i)
    stateArg(i, Role::Grad, zero.stage >= 2);
  sig.add(scalarType, roleNamedAfterItself(b, Role::Loss), step.getLoc());
  SmallVector<Role> stateRoles;
  if (config.isAdam())
    stateRoles = {Role::AdamM, Role::AdamV};
  else if (config.hasMomentumBuffer())
    stateRoles = {Role::Momentum};
  for (Role stateRole : stateRoles)
    for (size_t i = 0; i < n; ++i)
      stateArg(i, stateRole, /*shardable=*/true);
  for (Role scalarRole : {Role::LearningRate, Role::Step})
    sig.add(scalarType, roleNamedAfterItself(b, scalarRole), step.getLoc());

  b.setInsertionPointAfter(step);
  auto update = b.create<func::FuncOp>(step.getLoc(), kUpdateFunctionName,
                                       b.getFunctionType(sig.types, {}));
  Block *entry = update.addEntryBlock();
  for (auto [arg, loc] : llvm::zip_equal(entry->getArguments(), sig.locs))
    arg.setLoc(loc);
  update.setAllArgAttrs(sig.attrs);
  auto args = entry->getArguments();
  auto params = args.take_front(n);
  auto grads = args.slice(n, n);
  Value loss = args[2 * n];
  auto state = args.slice(2 * n + 1, stateRoles.size() * n);
  Value lr = args[args.size() - 2];
  Value stepCount = args[args.size() - 1];
  b.setInsertionPointToStart(entry);
  Location loc = step.getLoc();

  // (5) Gradient norm and the clipping / guard scale. Shards' sums are
  // partial: their sum over the ranks joins the replicated tensors' sums.
  // A term covers this rank's part along a ZeRO shard's data axis or a
  // tensor-parallel parameter's axis, or the whole tensor.
  SmallVector<StringRef> splitAxis;
  for (const ParamAndGrad &p : *pairs)
    splitAxis.push_back(
        splitAxisOf(step.getArgAttrDict(p.param.getArgNumber())));
  auto partOf = [&](size_t i, bool zeroShard) -> StringRef {
    return zeroShard ? StringRef(kDataAxisName) : splitAxis[i];
  };
  // Why each partial sum is all-reduced, for the report: the gradients'
  // norm (grads = true) or the update's and the parameters'.
  auto why = [&](bool grads) {
    return [&, grads](StringRef axis) -> std::string {
      if (axis == kDataAxisName)
        return grads ? "ZeRO-" + std::to_string(zero.stage) +
                           ": the squared norms of the rank's gradient "
                           "shards, summed for the global norm"
                     : "ZeRO: the squared update and parameter norms of the "
                       "rank's shards, summed for the global norms";
      return std::string("tensor parallel: the squared ") +
             (grads ? "gradient norms" : "update and parameter norms") +
             " of the rank's blocks of the split parameters, summed over '" +
             axis.str() + "' for the global norm";
    };
  };
  ShardedSums gradSums;
  for (auto [i, g] : llvm::enumerate(grads))
    gradSums.add(b, g.getLoc(), sumOfSquares(b, g.getLoc(), g),
                 partOf(i, zero.stage >= 2 && shards[i]));
  Value gradSumSq =
      ShardedSums::totals(b, loc, {&gradSums}, why(true))[0];
  Value gradNorm = b.create<SqrtOp>(loc, gradSumSq);
  Value scale = b.create<GradScaleOp>(loc, scalarType, gradNorm, loss,
                                      config.clip);

  // (6) One update per parameter.
  SmallVector<Value> newParams, newState(state.size());
  ShardedSums updateSums, paramSums;
  for (auto [i, p] : llvm::enumerate(*pairs)) {
    Value param = params[i], grad = grads[i];
    Type type = param.getType();
    Location ploc = p.param.getLoc();
    // ZeRO: the update runs on this rank's shard of the parameter.
    ShardedUpdate shard(b, ploc, zero, shards[i]);
    if (shards[i]) {
      type = *shards[i];
      if (zero.stage < 3)
        param = shard.take(param);
      if (zero.stage < 2)
        grad = shard.take(grad);
    }
    Value updateSq, paramSq;
    if (config.isAdam()) {
      auto op = b.create<AdamOp>(
          ploc, type, type, type, scalarType, scalarType, param, grad,
          state[i], state[n + i], lr, stepCount, scale, config.beta1,
          config.beta2, config.epsilon, p.decay,
          b.getBoolAttr(config.kind == OptimizerKind::AdamW));
      newParams.push_back(op.getNewParam());
      newState[i] = op.getNewM();
      newState[n + i] = op.getNewV();
      updateSq = op.getUpdateSq();
      paramSq = op.getParamSq();
    } else if (config.hasMomentumBuffer()) {
      auto op = b.create<SgdMomentumOp>(
          ploc, type, type, scalarType, scalarType, param, grad, state[i], lr,
          stepCount, scale, config.momentum, config.dampening, config.nesterov,
          p.decay);
      newParams.push_back(op.getNewParam());
      newState[i] = op.getNewBuf();
      updateSq = op.getUpdateSq();
      paramSq = op.getParamSq();
    } else {
      auto op = b.create<SgdOp>(ploc, type, scalarType, scalarType, param,
                                grad, lr, scale, p.decay);
      newParams.push_back(op.getNewParam());
      updateSq = op.getUpdateSq();
      paramSq = op.getParamSq();
    }
    updateSums.add(b, ploc, updateSq, partOf(i, shards[i].has_value()));
    paramSums.add(b, ploc, paramSq, partOf(i, shards[i].has_value()));
  }
  // Every rank's new shards gathered back into the whole parameters (below
  // ZeRO-3), one after the other: the updates stay together for fusion,
  // and the runtime may issue consecutive gathers as one.
  for (auto [i, p] : llvm::enumerate(*pairs))
    if (shards[i] && zero.stage < 3)
      newParams[i] = ShardedUpdate(b, p.param.getLoc(), zero, shards[i])
                         .gather(newParams[i], p.param.getType());
  SmallVector<Value> norms = ShardedSums::totals(
      b, loc, {&updateSums, &paramSums}, why(false));
  Value updateNorm = b.create<SqrtOp>(loc, norms[0]);
  Value paramNorm = b.create<SqrtOp>(loc, norms[1]);

  // (7) Results.
  SmallVector<Value> results{gradNorm, updateNorm, paramNorm};
  SmallVector<DictionaryAttr> resultAttrs;
  for (Role r : {Role::GradNorm, Role::UpdateNorm, Role::ParamNorm})
    resultAttrs.push_back(roleNamedAfterItself(b, r));
  for (auto [value, p] : llvm::zip_equal(newParams, *pairs)) {
    results.push_back(value);
    resultAttrs.push_back(roleAndName(b, Role::Param, p.name));
  }
  for (auto [k, stateRole] : llvm::enumerate(stateRoles))
    for (auto [i, p] : llvm::enumerate(*pairs)) {
      results.push_back(newState[k * n + i]);
      resultAttrs.push_back(roleAndName(b, stateRole, p.name));
    }
  b.create<func::ReturnOp>(loc, results);
  update.setType(FunctionType::get(ctx, sig.types,
                                   ValueRange(results).getTypes()));
  update.setAllResultAttrs(resultAttrs);
  return success();
}

struct KilnOptimizerPass
    : public mlir::kiln::impl::KilnOptimizerBase<KilnOptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<OptimizerConfig> config = readTrainConfig(module);
    if (failed(config))
      return signalPassFailure();

    SmallVector<func::FuncOp> lossFunctions = getLossFunctions(module);
    if (lossFunctions.size() != 1) {
      module.emitError("--kiln-optimizer needs exactly one function with a "
                       "kiln.role = #kiln.role<loss> result, found ")
          << lossFunctions.size();
      return signalPassFailure();
    }
    func::FuncOp step = lossFunctions.front();
    if (step.isExternal() || !step.getBody().hasOneBlock()) {
      step.emitOpError("must have a single-block body ending with "
                       "func.return");
      return signalPassFailure();
    }
    if (failed(buildUpdateFunction(module, step, *config)))
      signalPassFailure();
  }
};

} // namespace
