//===- SimCublasLtGemm.h - What the simulated cublasLtMatmul computes ----===//
//
// Test-only, part of the device simulator's libcublasLt (SimCublasLt.cpp
// exports the API): the descriptors' values as cublasLt.h types them, the
// documented rules a GEMM must satisfy (`plan`), and one batch entry of
//   D = epilogue(alpha * op(A) op(B) + beta * C)
// computed on the host, column-major.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_SIM_SIMCUBLASLTGEMM_H
#define KILN_TEST_SIM_SIMCUBLASLTGEMM_H

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::sim::cublaslt {

// cublasLtMatrixLayoutAttribute_t's values, each field of the attribute's
// documented type (its size is what SetAttribute accepts). ORDER,
// PLANE_OFFSET and BATCH_MODE are not modelled (SimCublasLt.cpp's
// setUnmodelled).
struct Layout {
  uint32_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batchCount = 1;
  int64_t batchStride = 0;
};

// cublasLtMatmulDescAttributes_t's values the simulator computes with, each
// of the attribute's type.
struct MatmulDesc {
  int32_t compute = CUBLAS_COMPUTE_32F;
  int32_t scale = CUDA_R_32F;
  int32_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  int32_t fillMode = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void *bias = nullptr;
  int64_t biasBatchStride = 0;
  int32_t biasType = -1; // -1: D's type
  void *aux = nullptr;
  int64_t auxLd = 0, auxBatchStride = 0;
  int32_t auxType = -1; // -1: D's type
};

// What an epilogue reads and writes (cublasLtEpilogue_t):
//  biasIn:    bias[i] added to row i of D (length rows of D), before GELU;
//  auxOut:    aux = the GELU input (D + bias for GELU_AUX_BIAS);
//  auxIn:     D = gelu'(aux) * D;
//  bgradRows: bias = a vector over the rows of D: DGELU_BGRAD's row sums of
//             D, or BGRADA's sums over k of op(A);
//  bgradCols: BGRADB's sums over k of op(B), over the columns of D.
struct EpilogueUse {
  uint32_t epilogue;
  bool biasIn, gelu, auxOut, auxIn, bgradRows, bgradCols;
  bool bias() const { return biasIn || bgradRows || bgradCols; }
  bool aux() const { return auxIn || auxOut; }
};

// A GEMM as cublasLtMatmul was called: copies of the descriptors (the
// caller may change or destroy them once the call returns), the pointers,
// and the shape `plan` derives.
struct Gemm {
  MatmulDesc desc;
  EpilogueUse use{};
  Layout a, b, c, d;
  int64_t m = 0, n = 0, k = 0;
  bool tf32 = false;
  float alpha = 1, beta = 0;
  const void *pa = nullptr, *pb = nullptr, *pc = nullptr;
  void *pd = nullptr;
};

// A refusal: NOT_SUPPORTED for what cuBLASLt (or the simulator) has no
// algorithm for, INVALID_VALUE for parameters in conflict.
struct Verdict {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::string why;
};

// The rules the heuristic and cublasLtMatmul share, each from the cuBLAS
// documentation (cuBLAS 13, "cuBLASLt API Reference", and cublasLt.h's
// comments); on success fills in `g`'s shape and epilogue.
Verdict plan(Gemm &g);

// Whether every operand lies in device memory; names on stderr the first
// that does not.
bool operandsInDeviceMemory(const Gemm &g, const void *workspace,
                            size_t workspaceBytes);

// Batch entry `entry` of the GEMM and its epilogue; runs with the stream.
void runBatchEntry(const Gemm &g, int32_t entry);

// "kiln device simulator: CALL: WHY" on stderr.
void report(const char *call, const std::string &why);

// printf into a std::string (at most 511 characters).
std::string format(const char *fmt, ...);

} // namespace kiln::sim::cublaslt

#endif // KILN_TEST_SIM_SIMCUBLASLTGEMM_H
