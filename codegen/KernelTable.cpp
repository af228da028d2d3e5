//===- KernelTable.cpp - The step's kernels, each emitted once ------------===//

#include "codegen/KernelTable.h"

#include "codegen/CudaAttentionKernels.h"
#include "codegen/CudaKernelEmitter.h"
#include "codegen/CudnnAttention.h"
#include "codegen/DataMovement.h"
#include "codegen/PointwiseBody.h"
#include "codegen/StepLowering.h"
#include "ir/KilnOps.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

FailureOr<EmittedKernel> KernelTable::emitGroup(const KernelGroup &group) const {
  // bf16 buffers hold raw bits. Pointwise ops (kiln.convert included) read
  // and write them through the shared statement generator, which widens
  // every load and rounds every store (PointwiseStatements); GEMMs are not
  // kernels. The bespoke loop nests (norms, softmax, losses, reductions,
  // transpose, embeddings, optimizers) index float buffers directly, so a
  // bf16 operand or result there would be computed on the bits: refused.
  // The mixed-precision pass keeps them fp32 (their reads of a bf16
  // activation go through a kiln.convert that fuses into their prologue).
  // The attention kernels (CPU and CUDA) read and write bf16 q/k/v/out
  // themselves, and so does kiln.rope (through KernelSourceWriter::load /
  // store, after --kiln-fuse-rope folds the casts around it), and
  // kiln.cross_entropy and kiln.cross_entropy_grad read f32 or bf16 logits
  // (loadElement) and the gradient writes f32 or bf16 (step 7 of
  // --kiln-mixed-precision) through storeElement. A transpose,
  // slice, pad or concat only moves elements (`out[i] = in[j]`,
  // DataMovement.h), so a bf16 one copies the bits.
  for (Operation *op : group.ops) {
    if (PointwiseBody::isPointwise(op) ||
        isa<k::AttentionOp, k::AttentionGradOp, k::RopeOp, k::CrossEntropyOp,
            k::CrossEntropyGradOp>(op))
      continue;
    if (isDataMovement(op) &&
        getElementTypeOrSelf(op->getOperand(0).getType()) ==
            getElementTypeOrSelf(op->getResult(0).getType()))
      continue;
    auto isBf16 = [](Type t) {
      auto tensor = dyn_cast<RankedTensorType>(t);
      return tensor && tensor.getElementType().isBF16();
    };
    if (llvm::any_of(op->getOperandTypes(), isBf16) ||
        llvm::any_of(op->getResultTypes(), isBf16))
      return op->emitError()
             << "the " << (options.target == "cuda" ? "CUDA" : "CPU")
             << " backend does not support element type 'bf16' in '"
             << op->getName()
             << "' (bf16 tensors are read and written by pointwise ops and "
                "GEMMs only)";
  }
  if (options.target == "cuda") {
    FailureOr<CudaKernel> k = CudaKernelEmitter::emit(
        group, attentionSharedBudget(options.cudaArchs));
    if (failed(k))
      return failure();
    EmittedKernel kernel{k->entry,
                         k->source,
                         "",
                         k->ops,
                         writesInPlace(group),
                         k->launch.grid,
                         k->launch.block,
                         k->launch.sharedBytes,
                         k->scratch};
    if (group.ops.size() == 1 &&
        isa<k::AttentionOp, k::AttentionGradOp>(group.ops.front()))
      kernel.note = describeCudnnAttention(group.ops.front());
    return kernel;
  }
  FailureOr<CpuKernel> k = CpuKernelEmitter::emit(group);
  if (failed(k))
    return failure();
  EmittedKernel kernel{k->entry, k->source, "", k->ops, writesInPlace(group)};
  kernel.scratch = k->scratch;
  return kernel;
}

FailureOr<EmittedKernel> KernelTable::emitCopy(RankedTensorType type) const {
  if (options.target == "cuda") {
    FailureOr<CudaKernel> k = CudaKernelEmitter::emitCopy(type);
    if (failed(k))
      return failure();
    return EmittedKernel{k->entry,       k->source,      "",
                         k->ops,         false,          k->launch.grid,
                         k->launch.block, k->launch.sharedBytes};
  }
  FailureOr<CpuKernel> k = CpuKernelEmitter::emitCopy(type);
  if (failed(k))
    return failure();
  return EmittedKernel{k->entry, k->source, "", k->ops};
}

uint32_t KernelTable::add(EmittedKernel kernel, Location loc) {
  auto it = index.find(kernel.entry);
  if (it != index.end())
    return it->second;
  kernel.location = locationString(loc);
  kernels.push_back(std::move(kernel));
  uint32_t added = kernels.size() - 1;
  index[kernels.back().entry] = added;
  return added;
}

} // namespace kiln
