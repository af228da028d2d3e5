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
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

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

// The update formulas of kiln.adam / kiln.sgd / kiln.sgd_momentum, one text
// for the CPU and CUDA kernels (plain C, valid on both), in
// CpuOptimizerKernels.cpp. The scalars read once per kernel: `lr`, and the
// bias corrections `bc1`, `bc2` (adam) or the first-step flag `first`
// (sgd_momentum).
// `name`, when given, names the pointer of each operand and result of `op`
// instead of `w.ptr` (the CUDA multi-tensor kernel's table-loaded pointers).
void emitUpdateScalarStatements(
    mlir::Operation *op, KernelSourceWriter &w,
    llvm::function_ref<std::string(mlir::Value)> name = nullptr);
// The statements updating element `index` (a C expression in scope, `i`
// by default). Expect in scope `scale`, the scalars above, `p` (the old
// parameter) and `float pn = p`; assign `pn` and store the new parameter
// and state at [index] (of `name`'s arrays: the CUDA kernel's register
// copies of a run of elements, read and stored at [j]).
void emitUpdateElementStatements(
    mlir::Operation *op, KernelSourceWriter &w,
    llvm::function_ref<std::string(mlir::Value)> name = nullptr,
    llvm::StringRef index = "i");
// The operands an update reads element by element (the parameter first,
// then its gradient and state) and the results it writes so (the new
// parameter and state): the buffers of the parameter's size.
llvm::SmallVector<mlir::Value> updateElementOperands(mlir::Operation *op);
llvm::SmallVector<mlir::Value> updateElementResults(mlir::Operation *op);
// "AdamW over 768 parameters, in place; weight decay 0.1f" (kernel comments).
std::string updateSummary(mlir::Operation *op);

// True for the ops with a bespoke emitter below (optimizer ops included).
bool hasBespokeCpuKernel(mlir::Operation *op);

// Writes the kernel body of `op`; emits an error on `op` on failure.
mlir::LogicalResult emitBespokeCpuKernel(mlir::Operation *op,
                                         KernelSourceWriter &w);

} // namespace kiln

#endif // KILN_CODEGEN_CPUBESPOKEKERNELS_H
