//===- StepFunction.cpp - Queries on the training-step function -----------===//
//
// Shared by the passes that extend the step function (autodiff, optimizer),
// so the conventions of StepFunction.h are read in one place.
//
//===----------------------------------------------------------------------===//

#include "ir/StepFunction.h"

#include "ir/KilnOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::kiln {

bool hasLossResult(func::FuncOp func) {
  return findResultWithRole(func, Role::Loss).has_value();
}

SmallVector<func::FuncOp> getLossFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (hasLossResult(func))
      functions.push_back(func);
  return functions;
}

std::optional<Role> getResultRole(func::FuncOp func, unsigned index) {
  auto role = func.getResultAttrOfType<RoleAttr>(index, kRoleAttrName);
  return role ? std::optional<Role>(role.getValue()) : std::nullopt;
}

std::optional<Role> getArgumentRole(func::FuncOp func, unsigned index) {
  auto role = func.getArgAttrOfType<RoleAttr>(index, kRoleAttrName);
  return role ? std::optional<Role>(role.getValue()) : std::nullopt;
}

StringRef roleName(std::optional<Role> role) {
  return role ? stringifyRole(*role) : StringRef();
}

std::optional<unsigned> findResultWithRole(func::FuncOp func, Role role) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (getResultRole(func, i) == role)
      return i;
  return std::nullopt;
}

DictionaryAttr roleAndName(Builder &b, Role role, StringRef name) {
  return b.getDictionaryAttr(
      {b.getNamedAttr(kRoleAttrName, RoleAttr::get(b.getContext(), role)),
       b.getNamedAttr(kNameAttrName, b.getStringAttr(name))});
}

DictionaryAttr roleNamedAfterItself(Builder &b, Role role) {
  return roleAndName(b, role, stringifyRole(role));
}

FailureOr<SmallVector<ParameterArgument>> getParameterArguments(func::FuncOp func) {
  SmallVector<ParameterArgument> params;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (getArgumentRole(func, index) != Role::Param)
      continue;
    auto name = func.getArgAttrOfType<StringAttr>(index, kNameAttrName);
    if (!name)
      return func.emitOpError("parameter argument #")
             << index << " has no kiln.name";
    params.push_back({arg, name});
  }
  return params;
}

llvm::DenseSet<Operation *> getForwardOps(func::FuncOp func) {
  llvm::DenseSet<Operation *> forward;
  if (func.getBody().empty())
    return forward;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Operation *> worklist;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    std::optional<Role> role = getResultRole(func, i);
    if (role == Role::Loss || role == Role::Metric)
      if (Operation *def = value.getDefiningOp())
        worklist.push_back(def);
  }
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
    getUsedValuesDefinedAbove(op->getRegions(), used);
    for (Value v : used)
      if (Operation *def = v.getDefiningOp())
        worklist.push_back(def);
  }
  // The backward's prologue: ops that read only forward values and
  // arguments (views and copies of activations for the weight gradients,
  // wherever autodiff and CSE placed them). Constants do not count: the
  // loss's cotangent seed is one, and everything after it is backward.
  // Nor does the gradient of the fused classifier's chunks: the loss reads
  // the other result of their kiln.cross_entropy_grad (with loss), which
  // makes the op forward, but its gradient scales the loss's cotangent (a
  // constant by then), and everything reading it is backward.
  auto isForwardValue = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return true;
    if (!forward.count(def) || def->hasTrait<OpTrait::ConstantLike>())
      return false;
    auto ceGrad = dyn_cast<CrossEntropyGradOp>(def);
    return !ceGrad || v != ceGrad.getResult();
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (forward.count(&op) || op.getNumOperands() == 0)
      continue;
    bool onlyForward = llvm::all_of(op.getOperands(), isForwardValue);
    if (onlyForward)
      forward.insert(&op);
  }
  return forward;
}

std::optional<RankedTensorType>
ZeroSharding::shardType(RankedTensorType full) const {
  int64_t elements = full.getNumElements();
  if (stage < 1 || ranks < 1 || elements % ranks != 0)
    return std::nullopt;
  return RankedTensorType::get({elements / ranks}, full.getElementType());
}

llvm::StringMap<unsigned> getGradResultsByName(func::FuncOp func) {
  llvm::StringMap<unsigned> byName;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (getResultRole(func, i) == Role::Grad)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName))
        byName[name.getValue()] = i;
  return byName;
}

DictionaryAttr withShardAttrs(DictionaryAttr attrs, RankedTensorType whole) {
  Builder b(whole.getContext());
  NamedAttrList list(attrs);
  list.set(kShardAxisAttrName, b.getStringAttr(kDataAxisName));
  list.set(kWholeShapeAttrName, b.getDenseI64ArrayAttr(whole.getShape()));
  return list.getDictionary(whole.getContext());
}

TrainConfigAttr getTrainConfig(ModuleOp module) {
  return module->getAttrOfType<TrainConfigAttr>(kTrainAttrName);
}

int64_t getGradAccumSteps(ModuleOp module) {
  TrainConfigAttr train = getTrainConfig(module);
  return train ? train.getGradAccum() : 1;
}

ZeroSharding readZeroSharding(ModuleOp module) {
  ZeroSharding zero;
  auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttrName);
  if (TrainConfigAttr train = getTrainConfig(module))
    zero.stage = train.getZero();
  if (auto ranks = mesh ? mesh.getAs<IntegerAttr>("data") : IntegerAttr())
    zero.ranks = ranks.getInt();
  return zero;
}

unsigned getBackwardStart(func::FuncOp func,
                          const llvm::DenseMap<Operation *, unsigned> &position) {
  Block &body = func.front();
  if (!hasLossResult(func))
    return body.getOperations().size();
  llvm::DenseSet<Operation *> forward = getForwardOps(func);
  for (Operation &op : body.without_terminator())
    if (op.getNumOperands() > 0 && !forward.count(&op))
      return position.lookup(&op);
  return body.getOperations().size();
}

Value cloneChainFrom(Value value, Value root, OpBuilder &b,
                     llvm::DenseMap<Operation *, unsigned> &position,
                     unsigned at) {
  if (value == root)
    return root;
  Operation *op = value.getDefiningOp();
  Value operand = cloneChainFrom(op->getOperand(0), root, b, position, at);
  IRMapping mapping;
  mapping.map(op->getOperand(0), operand);
  Operation *clone = b.clone(*op, mapping);
  position[clone] = at;
  return clone->getResult(0);
}

} // namespace mlir::kiln
