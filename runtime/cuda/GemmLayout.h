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
  bool accumulate = false; // beta = 1: D = product + C (GemmCall.accumulate)
};

inline ColumnMajorGemm toColumnMajor(const schema::GemmCall &g) {
  const int64_t M = g.m(), N = g.n(), K = g.k();
  ColumnMajorGemm cm;
  cm.m = N;
  cm.n = M;
  cm.k = K;
  cm.batch = g.batch();
  cm.accumulate = g.accumulate();
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

// cuBLASLt's epilogue (cublasLtEpilogue_t, CublasLt.cpp maps it), named
// without CUDA types.
enum class LtEpilogue {
  Default,     // CUBLASLT_EPILOGUE_DEFAULT
  Bias,        // _BIAS:          D += bias, bias[i] per row i of D
  Gelu,        // _GELU
  GeluAux,     // _GELU_AUX:      aux = the GELU input
  GeluBias,    // _GELU_BIAS
  GeluAuxBias, // _GELU_AUX_BIAS: aux = D + bias, the GELU input
  Dgelu,       // _DGELU:         D = gelu'(aux) * D
  DgeluBgrad,  // _DGELU_BGRAD:   + bias = sum of D over its columns
  BgradA,      // _BGRADA:        bias = sum over k of op(first), rows of D
  BgradB,      // _BGRADB:        bias = sum over k of op(second), cols of D
};

// A GemmCall's epilogue in the column-major view D = C^T [N, M] (ld N):
//  - the row-major bias over the N columns of C is a bias over the rows of
//    D: cuBLASLt's BIAS / GELU_BIAS / DGELU_BGRAD vector of length m = N;
//  - aux is stored like C: column-major [N, M] with ld N;
//  - the artifact's B is cuBLASLt's first operand ("A") and its A the second
//    ("B"): summing op(B) over k (the artifact's BgradB, a linear layer's
//    bias gradient from dY) is BGRADA, giving m = N values, and BgradA is
//    BGRADB, giving n = M values.
// cuBLASLt's GELU is the tanh approximation, like kiln.gelu (the same
// formula; not the same bits as the NVRTC kernels' tanhf).
struct ColumnMajorEpilogue {
  LtEpilogue kind = LtEpilogue::Default;
  int32_t bias = -1;       // buffer of CUBLASLT_MATMUL_DESC_BIAS_POINTER
  uint64_t biasLength = 0; // its elements (rows or columns of D, see above)
  bool biasWritten = false;
  int32_t aux = -1;        // buffer of CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
  int64_t auxLd = 0;       // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD (elements)
  // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: bf16 with a bf16 D (32F compute),
  // else fp32. cublasLt.h: bias elements have D's type (other types only
  // for IMMA and fp8 kernels). The GELU aux takes D's type by default
  // (EPILOGUE_AUX_DATA_TYPE is for fp8 only), so it is left unset.
  bool biasBf16 = false;
};

// `bf16D`: the GemmCall's C buffer is BF16 (the verifier then allows only
// Bias / BiasGelu, with bf16 bias and aux, and Dgelu, with a bf16 aux).
inline ColumnMajorEpilogue toColumnMajorEpilogue(const schema::GemmCall &g,
                                                 bool bf16D = false) {
  const uint64_t M = g.m(), N = g.n();
  ColumnMajorEpilogue e;
  e.biasBf16 = bf16D && g.bias() >= 0;
  e.bias = g.bias();
  e.aux = g.aux();
  e.auxLd = g.aux() >= 0 ? static_cast<int64_t>(N) : 0;
  switch (g.epilogue()) {
  case schema::GemmEpilogue_None:
    break;
  case schema::GemmEpilogue_Bias:
    e.kind = LtEpilogue::Bias;
    e.biasLength = N;
    break;
  case schema::GemmEpilogue_Gelu:
    e.kind = g.aux() >= 0 ? LtEpilogue::GeluAux : LtEpilogue::Gelu;
    break;
  case schema::GemmEpilogue_BiasGelu:
    e.kind = g.aux() >= 0 ? LtEpilogue::GeluAuxBias : LtEpilogue::GeluBias;
    e.biasLength = N;
    break;
  case schema::GemmEpilogue_Dgelu:
    e.kind = LtEpilogue::Dgelu;
    break;
  case schema::GemmEpilogue_DgeluBgrad:
    e.kind = LtEpilogue::DgeluBgrad;
    e.biasLength = N;
    e.biasWritten = true;
    break;
  case schema::GemmEpilogue_BgradA: // op(A) is cuBLASLt's second operand
    e.kind = LtEpilogue::BgradB;
    e.biasLength = M;
    e.biasWritten = true;
    break;
  case schema::GemmEpilogue_BgradB: // op(B) is cuBLASLt's first operand
    e.kind = LtEpilogue::BgradA;
    e.biasLength = N;
    e.biasWritten = true;
    break;
  }
  return e;
}

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_GEMMLAYOUT_H
