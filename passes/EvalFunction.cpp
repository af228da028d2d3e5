//===- EvalFunction.cpp - The forward-only evaluation program -------------===//
//
// --kiln-eval-function: clones the forward loss function, before autodiff
// extends it, into `@eval`, the artifact's "eval" program (validation loss of
// one batch). It reads the same parameters and inputs (shared with @step by
// role and name) and writes only its loss.
//
// Algorithm:
//  1. Find the function with a kiln.role = #kiln.role<loss> result (@step); error if
//     there is none, if it already has gradients, or if @eval exists.
//  2. Clone it as @eval, placed after it.
//  3. Keep only the loss result, now kiln.role = #kiln.role<eval_loss>; metrics are
//     dropped (they are reported by "step").
//  4. Erase the ops that only fed the dropped results.
//  5. Evaluation runs without dropout: every kiln.attention of @eval gets
//     dropout = 0 (its RNG-state capture stays, unread).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNEVALFUNCTION
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

LogicalResult buildEvalFunction(ModuleOp module, func::FuncOp step) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(kEvalFunctionName))
    return existing.emitOpError("already exists; --kiln-eval-function "
                                "creates @eval from the loss function");
  if (findResultWithRole(step, Role::Grad))
    return step.emitOpError("already has gradients; --kiln-eval-function must "
                            "run before --kiln-autodiff");
  if (step.isExternal() || !step.getBody().hasOneBlock())
    return step.emitOpError("must have a single-block body to be cloned");
  unsigned lossIndex = *findResultWithRole(step, Role::Loss);

  // (2) The clone, right after @step.
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(step);
  auto eval = cast<func::FuncOp>(b.clone(*step));
  eval.setSymName(kEvalFunctionName);

  // (3) Only the loss, as eval_loss.
  auto ret = cast<func::ReturnOp>(eval.front().getTerminator());
  Value loss = ret.getOperand(lossIndex);
  ret->setOperands(loss);
  eval.setType(FunctionType::get(module.getContext(), eval.getArgumentTypes(),
                                 {loss.getType()}));
  SmallVector<DictionaryAttr> resultAttrs{
      roleNamedAfterItself(b, Role::EvalLoss)};
  eval.setAllResultAttrs(resultAttrs);

  // (4) Ops that only computed metrics.
  SmallVector<Operation *> ops;
  for (Operation &op : eval.front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();

  // (5) No dropout when evaluating.
  eval.walk([&](AttentionOp attention) {
    if (attention.getDropoutProbability() != 0.0)
      attention.setDropoutAttr(b.getF32FloatAttr(0.0f));
  });
  return success();
}

struct KilnEvalFunctionPass
    : public mlir::kiln::impl::KilnEvalFunctionBase<KilnEvalFunctionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> lossFunctions = getLossFunctions(module);
    if (lossFunctions.size() != 1) {
      module.emitError("--kiln-eval-function needs exactly one function with "
                       "a kiln.role = #kiln.role<loss> result, found ")
          << lossFunctions.size();
      return signalPassFailure();
    }
    if (failed(buildEvalFunction(module, lossFunctions.front())))
      signalPassFailure();
  }
};

} // namespace
