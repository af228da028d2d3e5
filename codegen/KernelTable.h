//===- KernelTable.h - The step's kernels, each emitted once --------------===//
//
// The kernel-emission stage of the lowering: a group of kiln ops (or a copy
// of a tensor) becomes one kernel from the target's emitter (CPU C++ or
// CUDA), with its launch, scratch and in-place flag; a kernel whose
// entry (named after a hash of its source) is already in the table is
// reused, so identical ops share one kernel.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_KERNELTABLE_H
#define KILN_CODEGEN_KERNELTABLE_H

#include "codegen/Codegen.h"
#include "codegen/CpuKernelEmitter.h"
#include "codegen/program/StepProgram.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringMap.h"

#include <vector>

namespace kiln {

class KernelTable {
public:
  // Kernels are added to `kernels` (StepProgram::kernels).
  KernelTable(const CodegenOptions &options, std::vector<EmittedKernel> &kernels)
      : options(options), kernels(kernels) {}

  // The kernel of `group` / of a copy of `type`, from the target's emitter
  // (not yet in the table). Emits a diagnostic on an op the target cannot
  // run with these types.
  mlir::FailureOr<EmittedKernel> emitGroup(const KernelGroup &group) const;
  mlir::FailureOr<EmittedKernel> emitCopy(mlir::RankedTensorType type) const;
  // Index of the kernel with `kernel`'s entry, adding it (its location
  // `loc`, the first op it implements) if it is new.
  uint32_t add(EmittedKernel kernel, mlir::Location loc);

private:
  const CodegenOptions &options;
  std::vector<EmittedKernel> &kernels;
  llvm::StringMap<uint32_t> index; // entry -> its place in `kernels`
};

} // namespace kiln

#endif // KILN_CODEGEN_KERNELTABLE_H
