//===- CublasLt.h - cuBLASLt loaded at run time, one plan per GemmCall ----===//
//
// The artifact's fp32 GEMMs run through cuBLASLt (libcublasLt.so.13,
// dlopen'ed). A GemmPlan is made once per GemmCall at setup: descriptors for
// the column-major view (GemmLayout.h), strided batching, and the algorithm
// cuBLASLt's heuristic picks for the shared workspace, so a step only calls
// cublasLtMatmul (which a CUDA graph can capture); a GemmCall's epilogue
// (bias, GELU, their gradients) is a cuBLASLt epilogue of the same call.
// A plan may keep several of the heuristic's algorithms (its candidates,
// best first) so that kiln-run --gemm-algos=timed can time them on the
// device and keep the fastest (GemmTuning.cpp).
// Only runtime/cuda/*.cpp
// include this header: it pulls in cublasLt.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUBLASLT_H
#define KILN_RUNTIME_CUDA_CUBLASLT_H

#include "runtime/Status.h"
#include "runtime/cuda/DynamicLibrary.h"
#include "runtime/cuda/GemmLayout.h"

#include <cublasLt.h>
#include <cuda.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

class CublasLt {
public:
  static StatusOr<std::unique_ptr<CublasLt>> load();
  ~CublasLt();

  // OK for CUBLAS_STATUS_SUCCESS, else "<call>: <NAME> (<text>)<context>".
  Status check(cublasStatus_t status, const char *call,
               const std::string &context = "") const;

  cublasLtHandle_t handle() const { return handle_; }

#define KILN_CUBLASLT_FUNCTIONS(X)                                              \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtGetStatusName)                                                     \
  X(cublasLtGetStatusString)                                                   \
  X(cublasLtMatmul)                                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)
#define KILN_DECLARE_CUBLASLT_FN(name) decltype(&::name) name = nullptr;
  KILN_CUBLASLT_FUNCTIONS(KILN_DECLARE_CUBLASLT_FN)
#undef KILN_DECLARE_CUBLASLT_FN

private:
  CublasLt() = default;
  std::unique_ptr<DynamicLibrary> library_;
  cublasLtHandle_t handle_ = nullptr;
};

// CUBLASLT_EPILOGUE_<name> of `kind` ("GELU_AUX_BIAS"), for messages.
const char *ltEpilogueName(LtEpilogue kind);

// One GemmCall made ready to run: descriptors, the heuristic's candidate
// algorithms and the chosen one (the heuristic's first until choose()).
// create() fails with kUnavailable when cuBLASLt has no algorithm for it.
class GemmPlan {
public:
  // `where` ("step entry 3 at model.kiln:4:5") prefixes every error.
  // `workspaceBytes` is what the shared workspace holds; tf32 selects
  // CUBLAS_COMPUTE_32F_FAST_TF32 instead of full fp32.
  // `epilogue` (GemmLayout.h) with the device addresses of its bias and
  // aux buffers (0 when it has none): fixed for the arena's lifetime, so
  // they are descriptor attributes set here. `candidates` (>= 1): how many
  // of the heuristic's algorithms to keep, each within `workspaceBytes`.
  static StatusOr<std::unique_ptr<GemmPlan>>
  create(const CublasLt &lt, const ColumnMajorGemm &gemm, bool tf32,
         size_t workspaceBytes, std::string where,
         const ColumnMajorEpilogue &epilogue = {}, CUdeviceptr bias = 0,
         CUdeviceptr aux = 0, int candidates = 1);
  ~GemmPlan();

  // C = op(A) op(B) (C += it when the GEMM accumulates) on `stream` with the
  // chosen algorithm; pointers are the device addresses of the GemmCall's
  // a, b and c buffers.
  Status run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
             CUdeviceptr workspace, size_t workspaceBytes,
             CUstream stream) const {
    return runCandidate(chosen_, a, b, c, workspace, workspaceBytes, stream);
  }
  // The same with candidate `index` (< candidates()).
  Status runCandidate(size_t index, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                      CUdeviceptr workspace, size_t workspaceBytes,
                      CUstream stream) const;

  size_t candidates() const { return algos_.size(); }
  size_t chosen() const { return chosen_; }
  void choose(size_t index) { chosen_ = index; }
  // Candidate `index`'s opaque algorithm as hex (cublasLtMatmulAlgo_t's
  // words), and the index of a candidate with that text, if any: what the
  // tuning cache stores and finds again.
  std::string algorithmText(size_t index) const;
  std::optional<size_t> findAlgorithm(const std::string &text) const;
  bool accumulates() const { return beta_ != 0.0f; }
  // What makes two GEMMs alike for cuBLASLt (shapes, layouts, types,
  // transposes, epilogue, compute type), as text: the tuning cache's key.
  const std::string &signature() const { return signature_; }

private:
  explicit GemmPlan(const CublasLt &lt) : lt_(lt) {}
  const CublasLt &lt_;
  std::string where_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, result_ = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos_; // the heuristic's order
  size_t chosen_ = 0;
  std::string signature_;
  float beta_ = 0.0f; // 1 when the GEMM adds into C (accumulate)
};

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_CUBLASLT_H
