//===- StepFunction.cpp - Queries on the training-step function -----------===//
//
// Shared by the passes that extend the step function (autodiff, optimizer),
// so the conventions of StepFunction.h are read in one place.
//
//===----------------------------------------------------------------------===//

#include "ir/StepFunction.h"

namespace mlir::kiln {

bool hasLossResult(func::FuncOp func) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto role = func.getResultAttrOfType<StringAttr>(i, kRoleAttrName);
    if (role && role.getValue() == role::kLoss)
      return true;
  }
  return false;
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
