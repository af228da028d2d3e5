//===- Pipelines.cpp - The Kiln pass pipeline, written down once ----------===//
//
// Every pass the compiler runs, in order, grouped into the named phases that
// kilnc's --compile-to and --dump-phases-to expose. Adding a pass means adding
// one line (and its comment) here; nothing else decides the order.
//
// The pass manager verifies the IR after every pass (its verifier is on by
// default), so each phase boundary is a verified module.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::kiln {

void buildFrontendCleanupPhase(OpPassManager &pm) {
  // Fold constants, identity reshapes/broadcasts and other op-local
  // simplifications the frontend leaves behind (e.g. size-1 broadcasts).
  pm.addPass(createCanonicalizerPass());
  // Merge identical subexpressions (repeated reshapes of the same parameter,
  // duplicated constants) so autodiff differentiates each value once.
  pm.addPass(createCSEPass());
}

void buildAutodiffPhase(OpPassManager &pm) {
  // Reverse mode over the loss function: appends one "grad" result per param.
  pm.addPass(createKilnAutodiff());
  // VJPs emit reshapes, splat constants and broadcasts that fold away
  // (e.g. the seed 1.0 broadcast into a reduce_sum's VJP).
  pm.addPass(createCanonicalizerPass());
  // Forward values recomputed by several VJPs (transposes, reshapes of the
  // same operand) are shared.
  pm.addPass(createCSEPass());
}

void buildOptimizerPhase(OpPassManager &pm) {
  // Reads `kiln.train`: appends the grad norm and one kiln.adamw per param,
  // with adam_m/adam_v/lr/step arguments.
  pm.addPass(createKilnOptimizer());
  // Fold the constants of the grad-norm sum.
  pm.addPass(createCanonicalizerPass());
  // Share the g*g products with anything else squaring the same gradient.
  pm.addPass(createCSEPass());
}

llvm::ArrayRef<CompilerPhase> getCompilerPhases() {
  static const CompilerPhase phases[] = {
      {"kiln", "frontend output, verified, canonicalized and CSE'd",
       buildFrontendCleanupPhase},
      {"autodiff", "gradients of the loss appended (--kiln-autodiff)",
       buildAutodiffPhase},
      {"optimizer", "grad norm and AdamW update appended (--kiln-optimizer)",
       buildOptimizerPhase},
  };
  return phases;
}

const CompilerPhase *lookupCompilerPhase(llvm::StringRef name) {
  for (const CompilerPhase &phase : getCompilerPhases())
    if (phase.name == name)
      return &phase;
  return nullptr;
}

LogicalResult buildTrainingPipeline(OpPassManager &pm,
                                    llvm::StringRef lastPhase) {
  if (!lastPhase.empty() && !lookupCompilerPhase(lastPhase))
    return failure();
  for (const CompilerPhase &phase : getCompilerPhases()) {
    phase.build(pm);
    if (phase.name == lastPhase)
      break;
  }
  return success();
}

void registerKilnPipelines() {
  PassPipelineRegistration<>(
      "kiln-training-pipeline",
      "Every Kiln phase in order: kiln (cleanup), autodiff, optimizer",
      [](OpPassManager &pm) { (void)buildTrainingPipeline(pm); });
}

void registerKilnPasses() {
  detail::registerKilnPasses();
  registerKilnPipelines();
}

} // namespace mlir::kiln
