//===- Codegen.h - Entry points of Kiln's code generator ------------------===//
//
// Turns the training-step module (after the "optimizer" phase: func.func
// @step with forward and backward, @update with the gradient norm, clipping
// and optimizer updates, and @eval, in the kiln dialect) into a `.kart`
// artifact (runtime/schema/artifact.fbs, version 4): generated kernels (C++
// for the CPU target, CUDA for the cuda target), GEMM calls, buffers shared
// by the programs, and one Program per function.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CODEGEN_H
#define KILN_CODEGEN_CODEGEN_H

#include "codegen/CpuKernelEmitter.h"

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

// One generated kernel, as stored in Artifact.kernels.
struct EmittedKernel {
  std::string entry;    // exported symbol (the target's kernel ABI)
  std::string source;   // C++ or CUDA source, compiled after the prelude
  std::string location; // "file:line:col" of the first op it implements
  std::string ops;      // the kiln ops it implements ("kiln.gelu")
  bool elementwise = false; // Kernel.elementwise (see isElementwiseGroup)
  // CUDA only (Kernel.launch; grid 0 on the CPU): blocks, threads per
  // block, dynamic shared bytes of every call.
  uint32_t grid = 0, block = 0, sharedBytes = 0;
  // Scratch arguments after the outputs (codegen/CpuKernelEmitter.h's
  // KernelScratch): each call gets planned Workspace / WorkspaceCounter
  // buffers for them.
  std::vector<KernelScratch> scratch;
  // For kernel dumps only: whether cuDNN may replace it, and why not
  // (CudnnAttention.h; CUDA attention kernels).
  std::string note;
};

// The artifact and the reports of its memory plan (codegen/MemoryPlan.h).
struct CompiledArtifact {
  std::string bytes;         // the .kart file
  std::string memorySummary; // peak, breakdown, largest tensors at the peak
  std::string memoryPlan;    // every buffer: offset, bytes, live range
};

// Emits the artifact bytes for a module after the "optimizer" phase. Emits
// diagnostics and fails on unsupported ops.
mlir::FailureOr<std::string> emitArtifact(mlir::ModuleOp module,
                                          const CodegenOptions &options = {});
// The same, with the memory plan's reports (for kilnc).
mlir::FailureOr<CompiledArtifact>
compileArtifact(mlir::ModuleOp module, const CodegenOptions &options = {});

// The memory plan alone, for planners that try several versions of a
// module (--kiln-remat's budget search): the arena's bytes and kilnc's
// summary of it.
struct PlannedMemory {
  int64_t arenaBytes = 0;
  std::string summary;
};
mlir::FailureOr<PlannedMemory> planMemory(mlir::ModuleOp module,
                                          const CodegenOptions &options = {});

// The kernels alone, each once (for --dump-phases-to and tests).
mlir::FailureOr<std::vector<EmittedKernel>>
emitKernels(mlir::ModuleOp module, const CodegenOptions &options = {});

// The prelude every kernel of `target` is compiled after (Artifact.prelude).
const char *kernelPrelude(const std::string &target = "cpu");

} // namespace kiln

#endif // KILN_CODEGEN_CODEGEN_H
