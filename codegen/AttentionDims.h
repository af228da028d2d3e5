//===- AttentionDims.h - Shapes and row addressing of attention ops -------===//
//
// Internal to codegen/: the dims of a kiln.attention / kiln.attention_grad
// and where a row of its per-head tensors lives in memory, for the CPU and
// CUDA kernels alike (the op's layout: bhtd [B, H, T, D] or bthd
// [B, T, H, D]).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ATTENTIONDIMS_H
#define KILN_CODEGEN_ATTENTIONDIMS_H

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <string>

namespace kiln {

// Shapes of an attention-like op: q [B, H, T, D], k [B, KVH, S, D],
// v [B, KVH, S, Dv]; G query heads per kv head. `tokensMajor`: the op's
// layout is bthd, so a per-head tensor is [B, T, H, width] in memory (a
// head's rows H * width elements apart) instead of [B, H, T, width]; lse is
// [B, H, T] either way. The kernels address rows through rowOffset and
// rowStride only.
struct AttentionDims {
  int64_t B, H, T, D, KVH, S, Dv, G;
  bool tokensMajor = false;

  // The element offset (C expression) of row `row` of head `head` of batch
  // `b` in a query-side tensor (q, out, dq, dout: H heads of T rows) or,
  // with `kv`, a key-side one (k, v, dk, dv: KVH heads of S rows), whose
  // rows have `width` elements.
  std::string rowOffset(bool kv, const std::string &b, const std::string &head,
                        const std::string &row, int64_t width) const;
  // The elements between consecutive rows of one head.
  int64_t rowStride(bool kv, int64_t width) const {
    return tokensMajor ? (kv ? KVH : H) * width : width;
  }
  // The offset of row 0 of head `head` of batch `b`.
  std::string headOffset(bool kv, const std::string &b,
                         const std::string &head, int64_t width) const {
    return rowOffset(kv, b, head, "0", width);
  }
};

// The dims of a kiln.attention or kiln.attention_grad.
AttentionDims attentionDims(mlir::Operation *op);

} // namespace kiln

#endif // KILN_CODEGEN_ATTENTIONDIMS_H
