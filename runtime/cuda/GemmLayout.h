//===- GemmLayout.h - A row-major GemmCall as a column-major cuBLASLt call ===//
//
// cuBLASLt is column-major; the artifact's GEMMs are row-major
//   C[M,N] = op(A) op(B).
// A row-major matrix is the column-major transpose of itself, so
//   C^T[N,M] = op(B)^T op(A)^T
// is the same memory computed column-major: swap the operands, swap M and N,
// keep each operand's transpose flag, and describe every stored matrix with
// rows/cols swapped. No data moves. Kept free of CUDA types so the mapping
// is unit-tested on the CPU against a row-major reference.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_GEMMLAYOUT_H
#define KILN_RUNTIME_CUDA_GEMMLAYOUT_H

#include "runtime/Artifact.h"

#include <cstdint>

namespace kiln::rt::cuda {

// One stored matrix, column-major: element (r, c) of batch b is at
// b * stride + r + c * ld.
struct ColumnMajorMatrix {
  uint32_t buffer = 0; // artifact buffer index
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int64_t stride = 0;  // elements between batch entries (0: shared)
  bool bf16 = false;   // elements are bf16 (else fp32); set from the buffer
};

// cuBLASLt's D = op(first) op(second) with D [m, n] column-major.
struct ColumnMajorGemm {
  ColumnMajorMatrix first, second, result;
  bool transFirst = false, transSecond = false; // CUBLASLT_MATMUL_DESC_TRANSA/B
  uint64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
};

inline ColumnMajorGemm toColumnMajor(const schema::GemmCall &g) {
  const int64_t M = g.m(), N = g.n(), K = g.k();
  ColumnMajorGemm cm;
  cm.m = N;
  cm.n = M;
  cm.k = K;
  cm.batch = g.batch();
  // First operand: the artifact's B, stored row-major [K,N] (or [N,K] when
  // trans_b): column-major [N,K] with ld N (or [K,N] with ld K).
  cm.transFirst = g.trans_b();
  cm.first = g.trans_b() ? ColumnMajorMatrix{g.b(), uint64_t(K), uint64_t(N), K,
                                             g.stride_b()}
                         : ColumnMajorMatrix{g.b(), uint64_t(N), uint64_t(K), N,
                                             g.stride_b()};
  // Second operand: the artifact's A, stored [M,K] (or [K,M] when trans_a).
  cm.transSecond = g.trans_a();
  cm.second = g.trans_a() ? ColumnMajorMatrix{g.a(), uint64_t(M), uint64_t(K),
                                              M, g.stride_a()}
                          : ColumnMajorMatrix{g.a(), uint64_t(K), uint64_t(M),
                                              K, g.stride_a()};
  // Result: C stored [M,N] row-major = column-major [N,M] with ld N.
  cm.result = ColumnMajorMatrix{g.c(), uint64_t(N), uint64_t(M), N, g.stride_c()};
  return cm;
}

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_GEMMLAYOUT_H
