//===- Autodiff.cpp - Reverse-mode automatic differentiation --------------===//
//
// --kiln-autodiff: turns the forward loss function into the joint
// forward+backward function by appending d loss / d param for every
// parameter argument. The per-op rules (VJPs) live with the ops, behind
// DifferentiableOpInterface (ir/KilnVJP.cpp); this pass only orders them and
// sums their contributions.
//
// Algorithm, for the function with a kiln.role = #kiln.role<loss> result (other results
// must be kiln.role = #kiln.role<metric>: reported, never differentiated; @eval has an
// "eval_loss" result instead and is skipped):
//  1. Activity: walk the body forward marking the values that depend on a
//     floating-point `param` argument. Only those are differentiated, so
//     integer values (token ids, targets, iota positions) and constants are
//     never given a cotangent.
//  2. Seed: the cotangent of the returned loss is a splat constant 1.0
//     (metric results get none).
//  3. Walk the body backwards from the return. For each op with a cotangent on
//     any of its results and an active operand, call buildVJP through
//     DifferentiableOpInterface (null cotangents for unused results). An op
//     that does not implement the interface is an error on that op.
//  4. Fan-out: when a value already has a cotangent, the new contribution is
//     added with kiln.add.
//  5. Append one result per `param` argument, in argument order, with
//     kiln.role = #kiln.role<grad> and kiln.name = the parameter's name; parameters
//     with no path to the loss get a zero splat. The function type and result
//     attributes are updated.
//  6. Erase backward ops whose results ended up unused (cotangents of
//     inactive operands that a VJP built anyway).
//
// All backward ops are inserted just before the return, in the order they are
// built, so every use is dominated by its definition.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNAUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {


/// Values that carry gradients: ranked tensors of a floating-point type.
bool isDifferentiableType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Differentiates one loss function in place (steps 1-6 above).
class ReverseModeDifferentiator {
public:
  explicit ReverseModeDifferentiator(func::FuncOp func) : func(func) {}

  LogicalResult run();

private:
  LogicalResult checkSignature();
  void markActiveValues();
  LogicalResult propagate(Operation *op, OpBuilder &b);
  void accumulate(OpBuilder &b, Value value, Value contribution);
  LogicalResult appendGradients(OpBuilder &b, func::ReturnOp ret);
  void eraseDeadBackwardOps(Operation *firstBackwardOp, Operation *ret);

  func::FuncOp func;
  unsigned lossIndex = 0;                  // the loss result
  llvm::DenseSet<Value> active;            // depends on a param (step 1)
  llvm::DenseMap<Value, Value> cotangents; // d loss / d value so far
  SmallVector<Operation *> forwardOps;     // the body before autodiff
};

LogicalResult ReverseModeDifferentiator::checkSignature() {
  lossIndex = *findResultWithRole(func, Role::Loss);
  if (func.isExternal())
    return func.emitOpError("has a kiln.role = #kiln.role<loss> result but no body");
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("must have a single block to be differentiated, "
                            "found ")
           << func.getBody().getBlocks().size();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    std::optional<Role> role = getResultRole(func, i);
    if (role == Role::Loss) {
      if (i != lossIndex)
        return func.emitOpError("has more than one kiln.role = #kiln.role<loss> "
                                "result");
      continue;
    }
    if (role != Role::Metric)
      return func.emitOpError("result #")
             << i << " has kiln.role = #kiln.role<" << roleName(role)
             << ">; only the loss and metrics may be returned before "
                "autodiff (was --kiln-autodiff already run?)";
  }
  auto lossType = dyn_cast<RankedTensorType>(func.getResultTypes()[lossIndex]);
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType()))
    return func.emitOpError("loss must be a rank-0 floating-point tensor, "
                            "found ")
           << func.getResultTypes()[lossIndex];
  if (!isa<func::ReturnOp>(func.front().getTerminator()))
    return func.emitOpError("must end with func.return");
  return success();
}

void ReverseModeDifferentiator::markActiveValues() {
  for (BlockArgument arg : func.getArguments()) {
    if (getArgumentRole(func, arg.getArgNumber()) == Role::Param &&
        isDifferentiableType(arg.getType()))
      active.insert(arg);
  }
  for (Operation &op : func.front().without_terminator()) {
    forwardOps.push_back(&op);
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return active.contains(v); }))
      continue;
    for (Value result : op.getResults())
      if (isDifferentiableType(result.getType()))
        active.insert(result);
  }
}

void ReverseModeDifferentiator::accumulate(OpBuilder &b, Value value,
                                           Value contribution) {
  Value &slot = cotangents[value];
  if (!slot) {
    slot = contribution;
    return;
  }
  // Fan-out: d loss / d value = sum over the uses' contributions.
  slot = b.create<AddOp>(contribution.getLoc(), slot, contribution);
}

LogicalResult ReverseModeDifferentiator::propagate(Operation *op,
                                                   OpBuilder &b) {
  SmallVector<Value> resultGrads;
  bool anyGrad = false;
  for (Value result : op->getResults()) {
    resultGrads.push_back(cotangents.lookup(result));
    anyGrad |= static_cast<bool>(resultGrads.back());
  }
  // Nothing flows back through this op: either it does not reach the loss or
  // none of its operands depends on a parameter (constants, iota, masks).
  if (!anyGrad || llvm::none_of(op->getOperands(),
                                [&](Value v) { return active.contains(v); }))
    return success();

  auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
  if (!differentiable)
    return op->emitOpError("lies between a parameter and the loss but does "
                           "not implement DifferentiableOpInterface");

  // A rule that cannot apply (e.g. a cotangent on layer_norm's saved mean)
  // reports the error on the op itself.
  FailureOr<SmallVector<Value>> operandGrads =
      differentiable.buildVJP(b, resultGrads);
  if (failed(operandGrads))
    return failure();
  assert(operandGrads->size() == op->getNumOperands() &&
         "buildVJP must return one cotangent (or null) per operand");

  for (auto [operand, grad] :
       llvm::zip_equal(op->getOperands(), *operandGrads)) {
    if (!grad || !active.contains(operand))
      continue;
    assert(grad.getType() == operand.getType() &&
           "buildVJP must return cotangents of the operand's type");
    accumulate(b, operand, grad);
  }
  return success();
}

LogicalResult ReverseModeDifferentiator::appendGradients(OpBuilder &b,
                                                         func::ReturnOp ret) {
  SmallVector<Value> grads;
  SmallVector<DictionaryAttr> gradAttrs;
  FailureOr<SmallVector<ParameterArgument>> params = getParameterArguments(func);
  if (failed(params))
    return failure();
  for (auto [arg, name] : *params) {
    if (!isDifferentiableType(arg.getType()))
      return func.emitOpError("parameter '")
             << name.getValue() << "' must be a floating-point tensor, found "
             << arg.getType();
    Value grad = cotangents.lookup(arg);
    if (!grad) // No path to the loss: the gradient is zero.
      grad = createSplatConstant(b, arg.getLoc(),
                                 cast<RankedTensorType>(arg.getType()), 0.0);
    grads.push_back(grad);
    gradAttrs.push_back(
        roleAndName(b, Role::Grad, name.getValue()));
  }

  SmallVector<Type> resultTypes(func.getResultTypes());
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  for (auto [grad, attrs] : llvm::zip_equal(grads, gradAttrs)) {
    resultTypes.push_back(grad.getType());
    resultAttrs.push_back(attrs);
  }
  ret.getOperandsMutable().append(grads);
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 resultTypes));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

void ReverseModeDifferentiator::eraseDeadBackwardOps(Operation *firstBackwardOp,
                                                     Operation *ret) {
  SmallVector<Operation *> backwardOps;
  for (Operation *op = firstBackwardOp; op != ret; op = op->getNextNode())
    backwardOps.push_back(op);
  for (Operation *op : llvm::reverse(backwardOps))
    if (isOpTriviallyDead(op))
      op->erase();
}

LogicalResult ReverseModeDifferentiator::run() {
  if (failed(checkSignature()))
    return failure();
  auto ret = cast<func::ReturnOp>(func.front().getTerminator());
  OpBuilder b(ret);

  // (1) Which values depend on a parameter.
  markActiveValues();

  // (2) d loss / d loss = 1.
  Value loss = ret.getOperand(lossIndex);
  Value seed = createSplatConstant(b, ret.getLoc(),
                                   cast<RankedTensorType>(loss.getType()), 1.0);
  cotangents[loss] = seed;

  // (3), (4) Backwards over the forward ops.
  for (Operation *op : llvm::reverse(forwardOps))
    if (failed(propagate(op, b)))
      return failure();

  // (5) One gradient result per parameter.
  if (failed(appendGradients(b, ret)))
    return failure();

  // (6) Drop what the VJPs built for inactive operands.
  eraseDeadBackwardOps(seed.getDefiningOp(), ret);
  return success();
}

struct KilnAutodiffPass
    : public mlir::kiln::impl::KilnAutodiffBase<KilnAutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> lossFunctions = getLossFunctions(module);
    if (lossFunctions.empty()) {
      module.emitError("--kiln-autodiff found no function with a "
                       "kiln.role = #kiln.role<loss> result");
      return signalPassFailure();
    }
    for (func::FuncOp func : lossFunctions)
      if (failed(ReverseModeDifferentiator(func).run()))
        return signalPassFailure();
    // kiln.mesh_vary has given the backward its all-reduce; it computes
    // nothing (in @eval neither).
    module.walk([](MeshVaryOp vary) {
      vary.getResult().replaceAllUsesWith(vary.getInput());
      vary.erase();
    });
  }
};

} // namespace
