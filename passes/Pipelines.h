//===- Pipelines.h - The Kiln pass pipeline, phase by phase ---------------===//
//
// The compiler pipeline is a list of named phases. kilnc runs them one at a
// time so that it can dump the IR after each (--dump-phases-to) and stop
// after any of them (--compile-to=PHASE); kiln-opt gets the whole list as the
// named pipeline `kiln-training-pipeline`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_PIPELINES_H
#define KILN_PASSES_PIPELINES_H

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <functional>

namespace mlir::kiln {

/// The compiler's choices that phases read (kilnc's flags).
struct PhaseOptions {
  /// --kiln-fuse-linear-cross-entropy: false skips it (kilnc
  /// --no-fused-cross-entropy); rows per chunk, 0 for its automatic rule.
  bool fuseLinearCrossEntropy = true;
  int64_t crossEntropyChunkRows = 0;
  /// --kiln-remat: plan every tier's peak too (kilnc
  /// --memory-budget-sweep), and the lowering it asks for the step program
  /// whose peak it plans against (kilnc's: fusion, then codegen's lowering;
  /// none in kiln-opt).
  bool rematSweep = false;
  StepProgramFn lowerToStepProgram;
  /// --kiln-data-parallel's bucket-bytes (kilnc --bucket-mib).
  int64_t bucketBytes = int64_t(25) << 20;
};

/// One named phase of the pipeline: `build` adds its passes to a pass manager
/// anchored on builtin.module.
struct CompilerPhase {
  llvm::StringRef name;    // --compile-to / --dump-phases-to name
  llvm::StringRef summary; // one line for --help
  std::function<void(OpPassManager &, const PhaseOptions &)> build;
};

/// "kiln": the frontend's output, verified and cleaned up.
void buildFrontendCleanupPhase(OpPassManager &pm);
/// "pad-dims": tensor-core-unfriendly param dims padded (kilnc can skip it).
constexpr llvm::StringLiteral kPadDimsPhaseName = "pad-dims";
void buildPadDimsPhase(OpPassManager &pm);
/// "attention-match": softmax(q @ kT * scale + bias) @ v -> kiln.attention
/// (kilnc can skip it; attention.txt is written after it).
constexpr llvm::StringLiteral kAttentionMatchPhaseName = "attention-match";
void buildAttentionMatchPhase(OpPassManager &pm);
/// "sharding": shardings propagated from the model file's annotations
/// and the forward graph partitioned into one rank's program (sharding.txt
/// is written after it).
constexpr llvm::StringLiteral kShardingPhaseName = "sharding";
void buildShardingPhase(OpPassManager &pm);
/// "autodiff": reverse-mode gradients appended to the loss function.
void buildEvalPhase(OpPassManager &pm, const PhaseOptions &options = {});
void buildAutodiffPhase(OpPassManager &pm);
void buildGradAccumPhase(OpPassManager &pm);
void buildMixedPrecisionPhase(OpPassManager &pm);
/// "optimizer": grad norm and the AdamW update appended.
void buildOptimizerPhase(OpPassManager &pm);
/// "remat": forward values recomputed in the backward to meet the memory
/// budget (--kiln-remat).
constexpr llvm::StringLiteral kRematPhaseName = "remat";
void buildRematPhase(OpPassManager &pm, const PhaseOptions &options = {});
/// "fusion": kiln.fusion kernels chosen (--kiln-fusion).
/// The remat phase's passes after --kiln-remat (ZeRO-3's parameter gathers,
/// sequence parallelism's activation regathers): also run on the copy the
/// remat pass plans a peak on, so that copy is the artifact's module.
void buildRematFollowers(OpPassManager &pm);

void buildFusionPhase(OpPassManager &pm);

/// Every phase, in pipeline order: "kiln", "autodiff", "optimizer".
llvm::ArrayRef<CompilerPhase> getCompilerPhases();

/// The phase called `name`, or nullptr.
const CompilerPhase *lookupCompilerPhase(llvm::StringRef name);

/// All phases up to and including `lastPhase` (all of them when empty) into
/// one pass manager. Returns failure for an unknown phase name.
LogicalResult buildTrainingPipeline(OpPassManager &pm,
                                    llvm::StringRef lastPhase = "",
                                    const PhaseOptions &options = {});

/// Registers `kiln-training-pipeline` (every phase) for kiln-opt.
void registerKilnPipelines();

} // namespace mlir::kiln

#endif // KILN_PASSES_PIPELINES_H
