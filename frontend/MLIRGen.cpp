//===- MLIRGen.cpp - TensorGraph to the kiln dialect ----------------------===//
//
// A single forward walk: Sema has already inlined blocks, checked shapes and
// made broadcasts explicit, so every node maps to exactly one kiln op (or a
// function argument). Each op gets the FileLineColLoc of its expression; an
// op inlined from a block gets CallSiteLoc(expression, call site), nested
// for blocks called from blocks.
//
//===----------------------------------------------------------------------===//

#include "frontend/MLIRGen.h"
#include "frontend/MLIRGenAttention.h"

#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace kd =
    mlir::kiln; // the dialect; `kiln` alone is the frontend namespace

namespace kiln {
namespace {

class MLIRGen {
public:
  MLIRGen(MLIRContext &ctx, const TensorGraph &graph, const std::string &path,
          llvm::raw_ostream &errs)
      : ctx_(ctx), b_(&ctx), graph_(graph), file_(StringAttr::get(&ctx, path)),
        errs_(errs) {}

  OwningOpRef<ModuleOp> emit();

private:
  Location loc(SourceLoc l) {
    return FileLineColLoc::get(file_, l.line, l.col);
  }
  /// locs = [expression, innermost call site, ..., outermost call site];
  /// each call site named after its block instance (callInstances).
  Location loc(const std::vector<SourceLoc> &locs,
               const std::vector<std::string> &callInstances) {
    auto site = [&](size_t i) -> Location {
      if (i == 0 || i > callInstances.size())
        return loc(locs[i]);
      return NameLoc::get(StringAttr::get(&ctx_, callInstances[i - 1]),
                          loc(locs[i]));
    };
    Location result = site(locs.size() - 1);
    for (int i = (int)locs.size() - 2; i >= 0; --i)
      result = CallSiteLoc::get(site(i), result);
    return result;
  }
  Location loc(const Node &n) { return loc(n.locs, n.callInstances); }
  RankedTensorType tensorType(const TensorType &t) {
    Type element = t.isFloat()  ? Type(b_.getF32Type())
                   : t.isBool() ? Type(b_.getI1Type())
                                : Type(b_.getIntegerType(32));
    return RankedTensorType::get(t.shape, element);
  }
  Value emitNode(const Node &n, Location l);
  void setFunctionAttributes(func::FuncOp func);
  void setModuleAttributes(ModuleOp module);

  MLIRContext &ctx_;
  OpBuilder b_;
  const TensorGraph &graph_;
  StringAttr file_;
  llvm::raw_ostream &errs_;
  std::vector<Value> values_; // node index -> its SSA value
  Block *entry_ = nullptr;
  Value dropoutRng_; // the dropout_rng argument, when some attention drops
};

Value MLIRGen::emitNode(const Node &n, Location l) {
  auto operand = [&](int i) { return values_[n.operands[i]]; };
  switch (n.kind) {
  case NodeKind::Param:
    return entry_->getArgument(n.argIndex);
  case NodeKind::Input:
    return entry_->getArgument(graph_.params.size() + n.argIndex);
  case NodeKind::Constant:
    return kd::createSplatConstant(b_, l, tensorType(n.type), n.value);
  case NodeKind::Iota:
    return b_.create<kd::IotaOp>(l, tensorType(n.type));
  case NodeKind::Add:
    return b_.create<kd::AddOp>(l, operand(0), operand(1));
  case NodeKind::Sub:
    return b_.create<kd::SubOp>(l, operand(0), operand(1));
  case NodeKind::Mul:
    return b_.create<kd::MulOp>(l, operand(0), operand(1));
  case NodeKind::Div:
    return b_.create<kd::DivOp>(l, operand(0), operand(1));
  case NodeKind::Pow:
    return b_.create<kd::PowOp>(l, operand(0), operand(1));
  case NodeKind::Neg:
    return b_.create<kd::NegOp>(l, operand(0));
  case NodeKind::UnaryMath: {
    // Any unary elementwise kiln op, by name (its result type is its
    // operand's).
    OperationState state(l, n.mathOp);
    state.addOperands(operand(0));
    state.addTypes(operand(0).getType());
    return b_.create(state)->getResult(0);
  }
  case NodeKind::Gelu:
    return b_.create<kd::GeluOp>(l, operand(0));
  case NodeKind::Softmax:
    return b_.create<kd::SoftmaxOp>(l, operand(0));
  case NodeKind::CausalMask:
    return b_.create<kd::CausalMaskOp>(
        l, operand(0),
        llvm::APFloat::getInf(llvm::APFloat::IEEEsingle(), /*Negative=*/true));
  case NodeKind::Broadcast:
    return b_.create<kd::BroadcastOp>(l, tensorType(n.type), operand(0),
                                      n.dims);
  case NodeKind::ReduceSum:
    return b_.create<kd::ReduceSumOp>(l, operand(0), n.dims);
  case NodeKind::Reshape:
    return b_.create<kd::ReshapeOp>(l, tensorType(n.type), operand(0));
  case NodeKind::Transpose:
    return b_.create<kd::TransposeOp>(l, operand(0), n.dims);
  case NodeKind::Slice:
    return b_.create<kd::SliceOp>(l, operand(0), n.dims[0], n.dims[1],
                                  n.dims[2]);
  case NodeKind::Concat: {
    SmallVector<Value> inputs;
    for (size_t i = 0; i < n.operands.size(); ++i)
      inputs.push_back(operand(i));
    return b_.create<kd::ConcatOp>(l, inputs, n.dims[0]);
  }
  case NodeKind::Matmul:
    return b_.create<kd::MatmulOp>(l, operand(0), operand(1));
  case NodeKind::Embedding:
    return b_.create<kd::EmbeddingOp>(l, operand(0), operand(1));
  case NodeKind::LayerNorm:
    // Result 0 is the normalized output; mean/rstd serve the VJP.
    return b_
        .create<kd::LayerNormOp>(l, operand(0), operand(1), operand(2),
                                 (float)n.value)
        ->getResult(0);
  case NodeKind::Rope:
    return b_.create<kd::RopeOp>(l, operand(0).getType(), operand(0),
                                 b_.getDenseF32ArrayAttr(n.floats), /*inverse=*/false);
  case NodeKind::RmsNorm:
    // Result 0 is the normalized output; rstd serves the VJP.
    return b_.create<kd::RmsNormOp>(l, operand(0), operand(1), (float)n.value)
        ->getResult(0);
  case NodeKind::CrossEntropy:
    return b_.create<kd::CrossEntropyOp>(l, operand(0), operand(1));
  case NodeKind::Attention: {
    SmallVector<Value> operands;
    for (size_t i = 0; i < n.operands.size(); ++i)
      operands.push_back(operand(i));
    return emitAttentionOp(b_, l, n, operands, tensorType(n.type),
                           dropoutRng_);
  }
  case NodeKind::Compare: {
    StringRef predicate = n.op == '<'   ? "lt"
                          : n.op == 'l' ? "le"
                          : n.op == '>' ? "gt"
                          : n.op == 'g' ? "ge"
                          : n.op == 'e' ? "eq"
                                        : "ne";
    return b_.create<kd::CmpOp>(l, predicate, operand(0), operand(1));
  }
  case NodeKind::Select:
    return b_.create<kd::SelectOp>(l, operand(0), operand(1), operand(2));
  case NodeKind::ToFloat:
    return b_.create<kd::ConvertOp>(l, tensorType(n.type), operand(0));
  case NodeKind::ShardingConstraint:
    return b_.create<kd::ShardingConstraintOp>(
        l, operand(0), b_.getStrArrayAttr(SmallVector<StringRef>(
                           n.sharding.begin(), n.sharding.end())));
  }
  return Value();
}

void MLIRGen::setFunctionAttributes(func::FuncOp func) {
  // All argument attributes in one call: setArgAttr rebuilds the whole
  // arg_attrs array each time, which is quadratic in time and (through the
  // uniqued intermediate arrays) memory for models with many parameters.
  auto role = b_.getStringAttr(kd::kRoleAttrName);
  auto name = b_.getStringAttr(kd::kNameAttrName);
  auto init = b_.getStringAttr(kd::kInitAttrName);
  SmallVector<DictionaryAttr> argAttrs;
  argAttrs.reserve(graph_.params.size() + graph_.inputs.size());
  // `shard [...]` of the declaration, when it has one.
  auto withSharding = [&](SmallVector<NamedAttribute> attrs,
                          const std::vector<std::string> &sharding) {
    if (!kd::isReplicated(sharding))
      attrs.push_back(b_.getNamedAttr(kd::kShardingAttrName,
                                      kd::shardingAttr(&ctx_, sharding)));
    return b_.getDictionaryAttr(attrs);
  };
  for (const ParamInfo &p : graph_.params)
    argAttrs.push_back(withSharding(
        {b_.getNamedAttr(role, kd::RoleAttr::get(&ctx_, kd::Role::Param)),
         b_.getNamedAttr(name, b_.getStringAttr(p.name)),
         b_.getNamedAttr(init,
                         kd::InitializerAttr::get(&ctx_, p.init, p.stddev))},
        p.sharding));
  for (const InputInfo &in : graph_.inputs)
    argAttrs.push_back(withSharding(
        {b_.getNamedAttr(role, kd::RoleAttr::get(&ctx_, kd::Role::Input)),
         b_.getNamedAttr(name, b_.getStringAttr(in.name))},
        in.sharding));
  if (dropoutRng_)
    argAttrs.push_back(
        kd::roleNamedAfterItself(b_, kd::Role::DropoutRng));
  func.setAllArgAttrs(argAttrs);
  SmallVector<DictionaryAttr> resultAttrs;
  resultAttrs.push_back(b_.getDictionaryAttr(
      {b_.getNamedAttr(role, kd::RoleAttr::get(&ctx_, kd::Role::Loss))}));
  for (const MetricInfo &m : graph_.metrics)
    resultAttrs.push_back(kd::roleAndName(b_, kd::Role::Metric, m.name));
  func.setAllResultAttrs(resultAttrs);
}

void MLIRGen::setModuleAttributes(ModuleOp module) {
  const TrainInfo &t = graph_.train;
  // Sema has checked every name setting against the enums' spellings.
  auto f32 = [&](double value) { return b_.getF32FloatAttr(value); };
  bool sgd = t.optimizer == "sgd";
  // Only the arguments of the chosen optimizer: the dumps and the
  // artifact's settings show what applies.
  auto adam = [&](double value) { return sgd ? FloatAttr() : f32(value); };
  auto forSgd = [&](double value) { return sgd ? f32(value) : FloatAttr(); };
  auto train = kd::TrainConfigAttr::get(
      &ctx_, t.batch, t.seq, t.gradAccum, f32(t.clip),
      *kd::symbolizePrecision(t.precision), t.memoryBudget, t.zero,
      *kd::symbolizeRematMode(t.remat), *kd::symbolizeOptimizerKind(t.optimizer),
      adam(t.beta1), adam(t.beta2), adam(t.epsilon), forSgd(t.momentum),
      forSgd(t.dampening), sgd ? b_.getBoolAttr(t.nesterov) : BoolAttr(),
      f32(t.weightDecay), b_.getBoolAttr(t.decayNorms),
      b_.getBoolAttr(t.decayBiases), b_.getBoolAttr(t.decayEmbeddings));
  module->setAttr(kd::kTrainAttrName, train);
  module->setAttr(kd::kModelAttrName, b_.getStringAttr(graph_.modelName));
  // The ranks the step runs on (KilnCollectiveOps.td); absent: one.
  if (!t.mesh.empty()) {
    NamedAttrList mesh;
    // A tensor axis of one rank splits nothing (Sema dropped it from the
    // annotations): leave it out. A data axis of one rank stays -- its
    // degenerate all-reduces are the single-rank check of data parallelism.
    for (const auto &[axis, size] : t.mesh)
      if (size > 1 || axis == kd::kDataAxisName)
        mesh.append(axis, b_.getI64IntegerAttr(size));
    if (!mesh.empty())
      module->setAttr(kd::kMeshAttrName, mesh.getDictionary(&ctx_));
  }
  // The recompute the model file sets per block instance (the remat phase).
  if (!graph_.rematOverrides.empty()) {
    NamedAttrList overrides;
    for (const auto &[instance, tier] : graph_.rematOverrides)
      overrides.append(instance, b_.getStringAttr(tier));
    module->setAttr(kd::kRematOverridesAttrName, overrides.getDictionary(&ctx_));
  }
}

OwningOpRef<ModuleOp> MLIRGen::emit() {
  Location modelLoc = loc(graph_.modelLoc);
  OwningOpRef<ModuleOp> module = ModuleOp::create(modelLoc);
  setModuleAttributes(*module);

  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  for (const ParamInfo &p : graph_.params) {
    argTypes.push_back(tensorType(p.type));
    argLocs.push_back(loc(p.loc));
  }
  for (const InputInfo &in : graph_.inputs) {
    argTypes.push_back(tensorType(in.type));
    argLocs.push_back(loc(in.loc));
  }
  // Last, with dropout: the runtime's [seed, micro-step offset].
  bool hasDropout = graphHasDropout(graph_);
  if (hasDropout) {
    argTypes.push_back(RankedTensorType::get({2}, b_.getI64Type()));
    argLocs.push_back(modelLoc);
  }
  // Results: the loss, then one scalar per metric.
  Type scalarType = RankedTensorType::get({}, b_.getF32Type());
  SmallVector<Type> resultTypes(1 + graph_.metrics.size(), scalarType);
  b_.setInsertionPointToEnd(module->getBody());
  auto func = b_.create<func::FuncOp>(
      modelLoc, kd::kStepFunctionName,
      b_.getFunctionType(argTypes, resultTypes));
  entry_ = func.addEntryBlock();
  for (auto [arg, l] : llvm::zip(entry_->getArguments(), argLocs))
    arg.setLoc(l);
  if (hasDropout)
    dropoutRng_ = entry_->getArguments().back();
  setFunctionAttributes(func);

  b_.setInsertionPointToStart(entry_);
  values_.reserve(graph_.nodes.size());
  for (const Node &n : graph_.nodes)
    values_.push_back(emitNode(n, loc(n)));
  SmallVector<Value> results{values_[graph_.loss]};
  for (const MetricInfo &m : graph_.metrics)
    results.push_back(values_[m.node]);
  b_.create<func::ReturnOp>(loc(graph_.nodes[graph_.loss]), results);

  if (failed(verify(*module))) {
    errs_ << "kilnc: internal error: the IR generated for '" << file_.getValue()
          << "' does not verify (see above)\n";
    return nullptr;
  }
  return module;
}

} // namespace

OwningOpRef<ModuleOp> emitKilnModule(MLIRContext &ctx, const TensorGraph &graph,
                                     const std::string &path,
                                     llvm::raw_ostream &errs) {
  ctx.getOrLoadDialect<kd::KilnDialect>();
  ctx.getOrLoadDialect<func::FuncDialect>();
  return MLIRGen(ctx, graph, path, errs).emit();
}

} // namespace kiln
