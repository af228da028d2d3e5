//===- StepFunction.cpp - Queries on the training-step function -----------===//
//
// Shared by the passes that extend the step function (autodiff, optimizer),
// so the conventions of StepFunction.h are read in one place.
//
//===----------------------------------------------------------------------===//

#include "ir/StepFunction.h"

namespace mlir::kiln {

bool hasLossResult(func::FuncOp func) {
  return findResultWithRole(func, role::kLoss).has_value();
}

SmallVector<func::FuncOp> getLossFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (hasLossResult(func))
      functions.push_back(func);
  return functions;
}

StringRef getResultRole(func::FuncOp func, unsigned index) {
  auto role = func.getResultAttrOfType<StringAttr>(index, kRoleAttrName);
  return role ? role.getValue() : StringRef();
}

StringRef getArgumentRole(func::FuncOp func, unsigned index) {
  auto role = func.getArgAttrOfType<StringAttr>(index, kRoleAttrName);
  return role ? role.getValue() : StringRef();
}

std::optional<unsigned> findResultWithRole(func::FuncOp func, StringRef role) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (getResultRole(func, i) == role)
      return i;
  return std::nullopt;
}

DictionaryAttr roleAndName(Builder &b, StringRef role, StringRef name) {
  return b.getDictionaryAttr(
      {b.getNamedAttr(kRoleAttrName, b.getStringAttr(role)),
       b.getNamedAttr(kNameAttrName, b.getStringAttr(name))});
}

FailureOr<SmallVector<ParameterArgument>> getParameterArguments(func::FuncOp func) {
  SmallVector<ParameterArgument> params;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto role = func.getArgAttrOfType<StringAttr>(index, kRoleAttrName);
    if (!role || role.getValue() != role::kParam)
      continue;
    auto name = func.getArgAttrOfType<StringAttr>(index, kNameAttrName);
    if (!name)
      return func.emitOpError("parameter argument #")
             << index << " has no kiln.name";
    params.push_back({arg, name});
  }
  return params;
}

} // namespace mlir::kiln
