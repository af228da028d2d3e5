//===- GradAccum.cpp - Loss and gradient accumulators for micro-batches ---===//
//
// --kiln-grad-accum: with `grad_accum = K > 1` in kiln.train, "step" runs K
// times per training step and its loss and gradients must add up over the
// micro-batches. Each becomes an accumulator: an extra argument with the same
// kiln.role and kiln.name that @step updates in place with
// `kiln.accumulate %acc, %value {scale = 1/K}`. The runtime zeroes the
// accumulators before the first micro-step; "update" then reads the mean
// loss and mean gradients from the same buffers. K = 1 changes nothing.
//
// Algorithm, for the function with a kiln.role = #kiln.role<loss> result:
//  1. Read K from kiln.train (absent: 1; #kiln.train verifies K >= 1).
//  2. Error if the function has no grad results (autodiff has not run) or
//     already has a loss argument (the pass already ran).
//  3. For the loss and every grad result, in result order: append an
//     argument of its type, role and name (the loss is named "loss"), and
//     return kiln.accumulate(argument, value) instead of the value.
//  Metrics are left alone: they report the last micro-batch.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNGRADACCUM
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

LogicalResult addAccumulators(func::FuncOp func, int64_t microBatches) {
  // (2)
  if (!findResultWithRole(func, Role::Grad))
    return func.emitOpError("has no kiln.role = #kiln.role<grad> results; "
                            "--kiln-grad-accum must run after --kiln-autodiff");
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (getArgumentRole(func, i) == Role::Loss)
      return func.emitOpError("already has a loss accumulator argument (was "
                              "--kiln-grad-accum already run?)");
  auto ret = cast<func::ReturnOp>(func.front().getTerminator());

  // (3) The accumulator arguments, in one insertArguments call.
  SmallVector<unsigned> accumulated;
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  SmallVector<Location> locs;
  OpBuilder b(ret);
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    std::optional<Role> role = getResultRole(func, i);
    if (role != Role::Loss && role != Role::Grad)
      continue;
    auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName);
    accumulated.push_back(i);
    types.push_back(func.getResultTypes()[i]);
    attrs.push_back(name ? roleAndName(b, *role, name.getValue())
                         : roleNamedAfterItself(b, *role));
    locs.push_back(ret.getOperand(i).getLoc());
  }
  unsigned first = func.getNumArguments();
  func.insertArguments(SmallVector<unsigned>(types.size(), first), types,
                       attrs, locs);
  if (getResultRole(func, accumulated.front()) == Role::Loss)
    func.setResultAttrs(accumulated.front(),
                        roleNamedAfterItself(b, Role::Loss));

  FloatAttr scale = b.getF32FloatAttr(1.0 / static_cast<double>(microBatches));
  for (auto [k, resultIndex] : llvm::enumerate(accumulated)) {
    Value value = ret.getOperand(resultIndex);
    Value acc = func.getArgument(first + k);
    Value sum = b.create<AccumulateOp>(value.getLoc(), value.getType(), acc,
                                       value, scale);
    ret.setOperand(resultIndex, sum);
  }
  return success();
}

struct KilnGradAccumPass
    : public mlir::kiln::impl::KilnGradAccumBase<KilnGradAccumPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t microBatches = getGradAccumSteps(module);
    if (microBatches == 1)
      return;
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (!hasLossResult(func))
        continue;
      if (func.isExternal() || !func.getBody().hasOneBlock()) {
        func.emitOpError("must have a single-block body");
        return signalPassFailure();
      }
      if (failed(addAccumulators(func, microBatches)))
        return signalPassFailure();
    }
  }
};

} // namespace
