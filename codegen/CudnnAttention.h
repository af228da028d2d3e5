//===- CudnnAttention.h - Which attention ops cuDNN's fused SDPA can run --===//
//
// Internal to codegen/. A kiln.attention / kiln.attention_grad that cuDNN's
// fused scaled-dot-product attention computes exactly (same out, same lse,
// same gradients) gets, next to its generated kernel's KernelCall, a
// CudnnAttention table (runtime/schema/artifact.fbs); the runtime may run
// cuDNN instead of the kernel where it is faster. The generated kernel stays
// the fallback and stays correct for the same case.
//
// Eligible (everything else is refused, with the reason):
//   - q, k, v (and out, dout, dq, dk, dv for the backward) bf16;
//   - score region absent or the identity (yields s);
//   - mask region absent, or a conjunction of at most one of
//       causal   j <= i + (S - T) with T <= S (Kiln's causal is aligned
//                bottom-right; the cuDNN graphs offset the row index by
//                S - T, as cudnn-frontend's bottom-right causal mask does;
//                T > S is refused: rows i < T - S would keep no key),
//       padding  j < len[b] with len a rank-1 i32 capture of B elements
//                (cuDNN's seq_len_kv; seq_len_q is T for every sample),
//     and both together (each mask built as its own node chain, so the
//     pair is exactly Kiln's: the causal offset is the static S - T, not
//     the frontend's per-sample seq_len_kv - seq_len_q; a sample with
//     len[b] <= 0 gets Kiln's result from the runtime's fix-up kernel),
//     recognised by value, not by spelling: any arith form (index_cast,
//     extsi, addi, subi, muli by a constant, slt / sle / sgt / sge) that
//     reduces to one of those linear inequalities;
//   - no capture but that length tensor, and no attribute but `scale`
//     (dropout or anything added later is refused until it is mapped);
//   - head dims D and Dv multiples of 8 and <= 128 (the cuDNN 9 support
//     matrix for the backward on Ampere; the artifact may run on sm_80);
//   - grouped-query heads (H % KVH == 0, checked by the op verifier).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CUDNNATTENTION_H
#define KILN_CODEGEN_CUDNNATTENTION_H

#include "codegen/program/StepProgram.h"
#include "runtime/schema/CudnnWorkspace.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

// What the mask region of an eligible op is.
struct CudnnAttentionMask {
  bool causal = false;
  std::optional<unsigned> lengthsCapture; // index into the op's captures
};

// The mask of `op` (kiln.attention or kiln.attention_grad) when cuDNN can
// run it; otherwise nullopt and `whyNot` says which condition failed.
std::optional<CudnnAttentionMask> matchCudnnAttention(mlir::Operation *op,
                                                      std::string &whyNot);

// The CudnnAttention of `op`, its buffers from `bufferOf` (every operand and
// result must have one), or nullopt with the reason.
std::optional<CudnnAttentionCall>
planCudnnAttention(mlir::Operation *op,
                   llvm::function_ref<uint32_t(mlir::Value)> bufferOf,
                   std::string &whyNot);

// One line for kernel dumps: "cudnn: causal" / "cudnn: no (<why>)".
std::string describeCudnnAttention(mlir::Operation *op);

} // namespace kiln

#endif // KILN_CODEGEN_CUDNNATTENTION_H
