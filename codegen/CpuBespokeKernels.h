//===- CpuBespokeKernels.h - Hand-shaped loop nests for non-pointwise ops -===//
//
// Internal to codegen/: one emitter per op that is not a flat pointwise loop
// (reductions, transposes, gathers, norms, softmax, losses, the optimizer).
// Each writes the body of a single-op kernel into a KernelSourceWriter whose
// buffers are the op's distinct operands followed by its results.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPUBESPOKEKERNELS_H
#define KILN_CODEGEN_CPUBESPOKEKERNELS_H

#include "ir/KilnOps.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace kiln {

class KernelSourceWriter;

// The optimizer ops (accumulate, grad_scale, adam, sgd, sgd_momentum), in
// CpuOptimizerKernels.cpp.
bool hasOptimizerCpuKernel(mlir::Operation *op);
mlir::LogicalResult emitOptimizerCpuKernel(mlir::Operation *op,
                                           KernelSourceWriter &w);

// kiln.attention / kiln.attention_grad (flash-style, score and mask regions
// inlined), in CpuAttentionKernels.cpp.
bool hasAttentionCpuKernel(mlir::Operation *op);
mlir::LogicalResult emitAttentionCpuKernel(mlir::Operation *op,
                                           KernelSourceWriter &w);

// The scalar statements of kiln.grad_scale (the non-finite guard and the
// clip_grad_norm_ factor into the result's element 0): plain C valid on both
// targets, so the CUDA kernel runs them on one thread.
void emitGradScaleStatements(mlir::kiln::GradScaleOp op,
                             KernelSourceWriter &w);

// True for the ops with a bespoke emitter below (optimizer ops included).
bool hasBespokeCpuKernel(mlir::Operation *op);

// Writes the kernel body of `op`; emits an error on `op` on failure.
mlir::LogicalResult emitBespokeCpuKernel(mlir::Operation *op,
                                         KernelSourceWriter &w);

} // namespace kiln

#endif // KILN_CODEGEN_CPUBESPOKEKERNELS_H
