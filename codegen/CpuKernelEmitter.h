//===- CpuKernelEmitter.h - C++ CPU kernels for groups of kiln ops --------===//
//
// Turns a group of kiln ops into the C++ source of one kernel with the entry
// point `extern "C" void <entry>(void* const* buffers)`. The kernel's buffers
// are the group's inputs followed by its outputs; every shape is baked into
// the source.
//
// A group is an ordered list of ops. Pointwise ops (the elementwise ops of
// ScalarExprEmitter plus broadcast, splat constant, iota, causal_mask) may form
// groups of any length: they become one flat loop over the output with one
// scalar expression per op. A row op (norms, softmax, losses, reduce_sum
// over trailing dims) may share a kernel with pointwise ops before it
// (prologue) and after it (epilogue); several optimizer updates may share
// one (multi-tensor). Every other op is a group of its own with a bespoke
// loop nest. The artifact writer makes one group per op, or per kiln.fusion.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPUKERNELEMITTER_H
#define KILN_CODEGEN_CPUKERNELEMITTER_H

#include "codegen/program/StepProgram.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace kiln {

// The ops one kernel implements, with the values it exchanges with the
// rest of the step. The kernel's `buffers[]` are `inputs` then `outputs`.
struct KernelGroup {
  llvm::SmallVector<mlir::Operation *> ops; // in execution order
  llvm::SmallVector<mlir::Value> inputs;    // values read, defined outside `ops`
  llvm::SmallVector<mlir::Value> outputs;   // values written, results of `ops`

  // A group of one op: its (distinct) operands and all its results.
  static KernelGroup forOp(mlir::Operation *op);
};

// One generated kernel.
struct CpuKernel {
  std::string entry;  // k_<op names>_<hash of the source>
  std::string source; // the kernel's C++ source (compiled after the prelude)
  std::string ops;    // the kiln ops it implements, comma separated
  // Scratch buffers the kernel takes after its outputs (KernelSourceWriter::
  // scratch); the artifact writer gives each call planned buffers for them.
  std::vector<KernelScratch> scratch;
};

// True for a pointwise group whose every load and store is element i of
// buffers of the output's element count (no broadcast, iota or causal mask):
// an output may then share storage with an input whose last use is this call
// (Kernel.in_place, the memory plan's in-place reuse). Both the CPU loop
// and the CUDA grid-stride loop read every input of element i before writing
// it.
bool isElementwiseGroup(const KernelGroup &group);

// True when both targets' kernels of `group` (KernelTable asks once, for
// either target) write element i of each output
// only after their last read of element i of every input with as many
// elements (Kernel.in_place): an elementwise group, or a lone
// kiln.cross_entropy_grad of more than one class. That kernel reads a row's
// logits (and the target's logit, for the loss) before the barrier of its
// row statistics and then writes each gradient element where it read the
// logit, in the same thread; its loss is written after every block's reads.
// Then the logits' gradient may take the logits' bytes: at Llama-3's
// [4096, 2^17] bf16 classifier chunk, 1 GiB.
bool writesInPlace(const KernelGroup &group);

class CpuKernelEmitter {
public:
  // True if `op` can appear in a group handed to `emit`.
  static bool supports(mlir::Operation *op);

  // True for the ops that may share one pointwise loop nest with others.
  static bool isPointwise(mlir::Operation *op);

  // Emits the kernel of `group`. On failure (an unsupported op or a group
  // that cannot be one kernel) emits an error diagnostic on the offending op.
  static mlir::FailureOr<CpuKernel> emit(const KernelGroup &group);

  // A kernel copying one buffer of `type` into another (buffers: src, dst),
  // for step results that need a buffer of their own.
  static mlir::FailureOr<CpuKernel> emitCopy(mlir::RankedTensorType type);

  // Includes and helpers shared by every kernel (Artifact.prelude).
  static const char *prelude();
};

} // namespace kiln

#endif // KILN_CODEGEN_CPUKERNELEMITTER_H
