//===- Codegen.h - Entry points of Kiln's code generator ------------------===//
//
// Turns the training-step module (after the "optimizer" phase: func.func
// @step with forward and backward, @update with the gradient norm, clipping
// and optimizer updates, and @eval, in the kiln dialect) into a `.kart`
// artifact (runtime/schema/artifact.fbs) in three stages: lower to the step
// program (StepLowering.h; its kernels from KernelTable.h, C++ for the CPU
// target, CUDA for the cuda target), plan it (StepProgram.h: collective
// overlap, the memory plan), serialize it (ArtifactSerializer.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CODEGEN_H
#define KILN_CODEGEN_CODEGEN_H

#include "codegen/program/StepProgram.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace kiln {

// What the kernels are generated for.
struct CodegenOptions {
  std::string target = "cpu";         // "cpu" (C++ kernels) or "cuda"
  std::vector<std::string> cudaArchs; // cuda: Artifact.archs ("sm_80", ...)
};

// Checks `options` (a known target, known CUDA architectures, at least one
// for cuda); returns "" or the message of the first problem.
std::string checkCodegenOptions(const CodegenOptions &options);

// The module lowered to the step program (StepProgram.h): buffers, kernels,
// schedules, collective overlap and the memory plan, exactly what the
// artifact will hold. Planners that try several versions of a module
// (--kiln-remat's budget search) read its memory plan. Emits diagnostics
// and fails on unsupported ops.
mlir::FailureOr<StepProgram> lowerToStepProgram(mlir::ModuleOp module,
                                                const CodegenOptions &options = {});

// The artifact, its kernels and the reports of its memory plan
// (codegen/program/MemoryPlan.h).
struct CompiledArtifact {
  std::string bytes;         // the .kart file
  std::string memorySummary; // peak, breakdown, largest tensors at the peak
  int64_t peakBytes = 0;     // the arena: the memory plan's peak
  std::string memoryPlan;    // every buffer: offset, bytes, live range
  std::vector<EmittedKernel> kernels; // each once
};

// Emits the artifact bytes for a module after the "optimizer" phase. Emits
// diagnostics and fails on unsupported ops.
mlir::FailureOr<std::string> emitArtifact(mlir::ModuleOp module,
                                          const CodegenOptions &options = {});
// The same, with the memory plan's reports (for kilnc).
mlir::FailureOr<CompiledArtifact>
compileArtifact(mlir::ModuleOp module, const CodegenOptions &options = {});

// The kernels alone, each once (for --dump-phases-to and tests).
mlir::FailureOr<std::vector<EmittedKernel>>
emitKernels(mlir::ModuleOp module, const CodegenOptions &options = {});

// The prelude every kernel of `target` is compiled after (Artifact.prelude).
const char *kernelPrelude(const std::string &target = "cpu");

} // namespace kiln

#endif // KILN_CODEGEN_CODEGEN_H
