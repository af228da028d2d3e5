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

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
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

void buildPadDimsPhase(OpPassManager &pm) {
  // Pad parameter dims (vocab 50257 -> 50304) to the tensor-core multiple
  // on the forward graph, so @eval and the backward are derived from the
  // padded step; padded logits are masked in cross_entropy. kilnc
  // --no-pad-dims skips this phase.
  pm.addPass(createKilnPadDims());
}

void buildAttentionMatchPhase(OpPassManager &pm) {
  // softmax(q @ kT * scale + bias) @ v -> kiln.attention (flash kernels),
  // before @eval and autodiff so both use it; refused softmaxes get
  // kiln.not_attention. kilnc --no-attention-match skips this phase.
  pm.addPass(createKilnAttentionMatch());
  // Fold the transposes it inserts into k's producers and drop the bias ops
  // the regions rebuilt from scalars.
  pm.addPass(createCanonicalizerPass());
}

void buildShardingPhase(OpPassManager &pm) {
  // Every value's sharding, from the model file's annotations along the
  // ops' sharding rules; an annotation the rules cannot honour is an error
  // at its line, never a silent replication.
  pm.addPass(createKilnPropagateSharding());
  // One rank's program: local types and the collectives the rules require,
  // before @eval is cloned (it is partitioned alike) and before autodiff
  // (the collectives' VJPs are the backward's collectives).
  pm.addPass(createKilnPartition());
}

void buildEvalPhase(OpPassManager &pm, const PhaseOptions &options) {
  // cross_entropy(x @ w^T) -> kiln.linear_cross_entropy (logits in chunks),
  // before @eval is cloned and autodiff runs, so both see it.
  if (options.fuseLinearCrossEntropy)
    pm.addPass(createKilnFuseLinearCrossEntropy(
        KilnFuseLinearCrossEntropyOptions{options.crossEntropyChunkRows}));
  // Clone the forward loss function into @eval (the "eval" program) before
  // autodiff extends it; metrics dropped, loss renamed eval_loss.
  pm.addPass(createKilnEvalFunction());
  // Remove the ops that only fed the dropped metrics.
  pm.addPass(createCanonicalizerPass());
}

void buildAutodiffPhase(OpPassManager &pm) {
  // Reverse mode over the loss function (@step only: @eval has no "loss"
  // result): appends one "grad" result per param; metrics get no cotangent.
  pm.addPass(createKilnAutodiff());
  // VJPs emit reshapes, splat constants and broadcasts that fold away
  // (e.g. the seed 1.0 broadcast into a reduce_sum's VJP).
  pm.addPass(createCanonicalizerPass());
  // Forward values recomputed by several VJPs (transposes, reshapes of the
  // same operand) are shared.
  pm.addPass(createCSEPass());
}

void buildGradAccumPhase(OpPassManager &pm) {
  // grad_accum = K > 1: loss and grads become in-place accumulators
  // (acc + value / K) of the micro-batches; K = 1 leaves @step as it is.
  pm.addPass(createKilnGradAccum());
}

void buildMixedPrecisionPhase(OpPassManager &pm) {
  // kiln.linear_cross_entropy and its gradient as chunks of plain GEMMs and
  // cross-entropy kernels, before the GEMMs get their bf16 operands.
  pm.addPass(createKilnExpandLinearCrossEntropy());
  // precision = bf16: GEMMs of the joint graph read bf16 copies of their
  // operands and accumulate in fp32; after autodiff so the backward GEMMs
  // are converted too and no mixed-type op needs a VJP.
  pm.addPass(createKilnMixedPrecision());
  // x + y @ w + b -> x + (y @ w + b): the GEMM can take the bias as an
  // epilogue; here, not in the fusion phase, so --no-fusion sums alike.
  pm.addPass(createKilnReassociateBias());
}

void buildOptimizerPhase(OpPassManager &pm) {
  // Reads `kiln.train`: builds @update (grad norm, clipping/guard scale, one
  // update op per param with its weight decay, update and param norms).
  pm.addPass(createKilnOptimizer());
  // Fold the constants of the grad-norm sum.
  pm.addPass(createCanonicalizerPass());
  // Share the g*g products with anything else squaring the same gradient.
  pm.addPass(createCSEPass());
}

void buildDataParallelPhase(OpPassManager &pm, const PhaseOptions &options) {
  // kiln.mesh's data axis: @update first averages the gradients and the
  // loss over the ranks, in buckets, so norms, clipping and the update see
  // the global batch.
  KilnDataParallelOptions dataParallel;
  dataParallel.bucketBytes = options.bucketBytes;
  pm.addPass(createKilnDataParallel(dataParallel));
}

void buildRematPhase(OpPassManager &pm, const PhaseOptions &options) {
  // kiln.train's memory_budget and remat: keep or recompute each forward
  // value the backward reads, after @step is complete (mixed precision's
  // bf16 copies included) and before fusion groups the clones with their
  // backward consumers. No CSE after it: it would merge the clones back.
  KilnRematOptions remat;
  remat.sweep = options.rematSweep;
  pm.addPass(createKilnRemat(remat, options.lowerToStepProgram));
  buildRematFollowers(pm);
}

void buildRematFollowers(OpPassManager &pm) {
  // ZeRO-3: parameters are slices, gathered again where the forward and
  // the backward (its recomputes included) read them -- remat by
  // communication.
  pm.addPass(createKilnGatherParams());
  // Sequence parallelism: an activation gathered over a tensor axis in the
  // forward is gathered again for the backward, from the rank's part.
  pm.addPass(createKilnRegatherActivations());
}

void buildFusionPhase(OpPassManager &pm) {
  // Attention reads q, k, v where the projections wrote them ([B, T, H, D])
  // and writes what the output projection reads: no head transposes.
  pm.addPass(createKilnAttentionLayout());
  // RoPE takes over the transposes and casts around it (one pass over q
  // and k each way), including those the attention layout left after it.
  pm.addPass(createKilnFuseRope());
  // The backward's sums of input-gradient GEMMs (q/k/v, w1/w3) are added by
  // the GEMMs into one fp32 buffer (beta = 1).
  pm.addPass(createKilnAccumulateGemms());
  // GEMMs take their bias / GELU / bias-gradient epilogues first, so that
  // the pointwise and row groups below do not claim those ops.
  pm.addPass(createKilnFuseGemmEpilogue());
  // Group pointwise chains, row ops with their prologue/epilogue and the
  // optimizer updates into kiln.fusion kernels (kilnc --no-fusion skips it).
  pm.addPass(createKilnFusion());
  // Backward GEMMs run where their products are first read, not where
  // autodiff emitted them, so the products are not live in between.
  pm.addPass(createKilnSinkGemms());
}

/// A phase builder that has no options.
static std::function<void(OpPassManager &, const PhaseOptions &)>
ignoringOptions(void (*build)(OpPassManager &)) {
  return [build](OpPassManager &pm, const PhaseOptions &) { build(pm); };
}

llvm::ArrayRef<CompilerPhase> getCompilerPhases() {
  static const CompilerPhase phases[] = {
      {"kiln", "frontend output, verified, canonicalized and CSE'd",
       ignoringOptions(buildFrontendCleanupPhase)},
      {kPadDimsPhaseName, "parameter dims padded to a multiple of 64, "
                          "padded logits masked (--kiln-pad-dims)",
       ignoringOptions(buildPadDimsPhase)},
      {kAttentionMatchPhaseName,
       "softmax(q @ kT * scale + bias) @ v as kiln.attention "
       "(--kiln-attention-match)",
       ignoringOptions(buildAttentionMatchPhase)},
      {kShardingPhaseName, "every value's sharding from the annotations "
                           "(--kiln-propagate-sharding), one rank's program "
                           "with its collectives (--kiln-partition)",
       ignoringOptions(buildShardingPhase)},
      {"eval", "cross_entropy(x @ w^T) fused into chunks "
               "(--kiln-fuse-linear-cross-entropy), forward-only @eval "
               "cloned (--kiln-eval-function)",
       buildEvalPhase},
      {"autodiff", "gradients of the loss appended (--kiln-autodiff)",
       ignoringOptions(buildAutodiffPhase)},
      {"grad-accum", "loss/grad accumulators for grad_accum > 1 "
                     "(--kiln-grad-accum)",
       ignoringOptions(buildGradAccumPhase)},
      {"mixed-precision", "linear cross-entropy in chunks "
                          "(--kiln-expand-linear-cross-entropy), bf16 GEMM "
                          "operands for precision = bf16 "
                          "(--kiln-mixed-precision)",
       ignoringOptions(buildMixedPrecisionPhase)},
      {"optimizer", "@update built: grad norm, clipping, optimizer step "
                    "(--kiln-optimizer)",
       ignoringOptions(buildOptimizerPhase)},
      {"data-parallel", "gradients and loss averaged over the mesh's data "
                        "axis in buckets, in @step as the backward finishes "
                        "them or at the top of @update (--kiln-data-parallel)",
       buildDataParallelPhase},
      {kRematPhaseName, "forward values recomputed in the backward to meet "
                        "the memory budget (--kiln-remat)",
       buildRematPhase},
      {"fusion", "attention on [B, T, H, D] without head transposes, RoPE "
                 "with its transposes and casts, sums of GEMMs accumulated by "
                 "the GEMMs, GEMM epilogues and ops grouped into kiln.fusion "
                 "kernels (--kiln-attention-layout, --kiln-fuse-rope, "
                 "--kiln-accumulate-gemms, --kiln-fuse-gemm-epilogue, "
                 "--kiln-fusion); backward GEMMs moved to their first "
                 "reader (--kiln-sink-gemms)",
       ignoringOptions(buildFusionPhase)},
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
                                    llvm::StringRef lastPhase,
                                    const PhaseOptions &options) {
  if (!lastPhase.empty() && !lookupCompilerPhase(lastPhase))
    return failure();
  for (const CompilerPhase &phase : getCompilerPhases()) {
    phase.build(pm, options);
    if (phase.name == lastPhase)
      break;
  }
  return success();
}

namespace {
// Stands in for the pipeline when its options are wrong: the registry's
// builder cannot fail, so the run does, with the reason on the module.
struct FailingPass : public PassWrapper<FailingPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FailingPass)
  explicit FailingPass(std::string reason) : reason(std::move(reason)) {}
  void runOnOperation() override {
    getOperation().emitError() << reason;
    signalPassFailure();
  }
  std::string reason;
};

// "kiln, pad-dims, ..., fusion": the phases, for messages.
std::string phaseList() {
  std::string text;
  for (const CompilerPhase &phase : getCompilerPhases())
    text += (text.empty() ? "" : ", ") + phase.name.str();
  return text;
}

struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> lastPhase{
      *this, "last-phase",
      llvm::cl::desc("Stop after this phase (default: run every phase)"),
      llvm::cl::init("")};
};
} // namespace

void registerKilnPipelines() {
  static const std::string description =
      "Every Kiln phase in order: " + phaseList() + " (last-phase=NAME stops early)";
  PassPipelineRegistration<TrainingPipelineOptions>(
      "kiln-training-pipeline", description,
      [](OpPassManager &pm, const TrainingPipelineOptions &options) {
        if (failed(buildTrainingPipeline(pm, options.lastPhase)))
          pm.addPass(std::make_unique<FailingPass>(
              "kiln-training-pipeline: unknown last-phase '" + options.lastPhase +
              "' (phases: " + phaseList() + ")"));
      });
}

void registerKilnPasses() {
  detail::registerKilnPasses();
  registerKilnPipelines();
}

} // namespace mlir::kiln
