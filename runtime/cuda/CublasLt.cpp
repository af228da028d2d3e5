//===- CublasLt.cpp - cuBLASLt loaded at run time, one plan per GemmCall --===//

#include "runtime/cuda/CublasLt.h"

#include <algorithm>
#include <cstdio>

namespace kiln::rt::cuda {

#define KILN_STRINGIZE_EXPANDED(x) KILN_STRINGIZE(x)
#define KILN_STRINGIZE(x) #x

StatusOr<std::unique_ptr<CublasLt>> CublasLt::load() {
  std::unique_ptr<CublasLt> lt(new CublasLt());
  KILN_ASSIGN_OR_RETURN(lt->library_,
                        DynamicLibrary::open("cuBLASLt", {"libcublasLt.so.13",
                                                          "libcublasLt.so.12",
                                                          "libcublasLt.so"}));
#define KILN_RESOLVE_CUBLASLT_FN(name)                                         \
  KILN_RETURN_IF_ERROR(                                                        \
      lt->library_->resolve(KILN_STRINGIZE_EXPANDED(name), lt->name));
  KILN_CUBLASLT_FUNCTIONS(KILN_RESOLVE_CUBLASLT_FN)
#undef KILN_RESOLVE_CUBLASLT_FN
  KILN_RETURN_IF_ERROR(lt->check(lt->cublasLtCreate(&lt->handle_),
                                 "cublasLtCreate"));
  return lt;
}

CublasLt::~CublasLt() {
  if (handle_)
    cublasLtDestroy(handle_);
}

Status CublasLt::check(cublasStatus_t status, const char *call,
                       const std::string &context) const {
  if (status == CUBLAS_STATUS_SUCCESS)
    return okStatus();
  const char *name = cublasLtGetStatusName ? cublasLtGetStatusName(status) : nullptr;
  const char *text =
      cublasLtGetStatusString ? cublasLtGetStatusString(status) : nullptr;
  return unavailable(context, context.empty() ? "" : ": ", call, ": ",
                     name ? name : "cuBLAS error", " (",
                     text ? text : std::to_string(static_cast<int>(status)), ")");
}

namespace {

// A column-major stored matrix of fp32 or bf16 with strided batching. The
// compute type stays 32F either way: bf16 operands are multiplied on tensor
// cores with fp32 accumulation, and a bf16 D is the fp32 result rounded.
Status createLayout(const CublasLt &lt, const ColumnMajorMatrix &m,
                    int64_t batch, const std::string &where,
                    cublasLtMatrixLayout_t &layout) {
  KILN_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatrixLayoutCreate(&layout, m.bf16 ? CUDA_R_16BF : CUDA_R_32F,
                                    m.rows, m.cols, m.ld),
      "cublasLtMatrixLayoutCreate", where));
  if (batch == 1)
    return okStatus();
  int32_t count = static_cast<int32_t>(batch);
  int64_t stride = m.stride;
  KILN_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", where));
  return lt.check(lt.cublasLtMatrixLayoutSetAttribute(
                      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                      &stride, sizeof(stride)),
                  "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)",
                  where);
}

} // namespace

const char *ltEpilogueName(LtEpilogue kind) {
  switch (kind) {
  case LtEpilogue::Default: return "DEFAULT";
  case LtEpilogue::Bias: return "BIAS";
  case LtEpilogue::Gelu: return "GELU";
  case LtEpilogue::GeluAux: return "GELU_AUX";
  case LtEpilogue::GeluBias: return "GELU_BIAS";
  case LtEpilogue::GeluAuxBias: return "GELU_AUX_BIAS";
  case LtEpilogue::Dgelu: return "DGELU";
  case LtEpilogue::DgeluBgrad: return "DGELU_BGRAD";
  case LtEpilogue::BgradA: return "BGRADA";
  case LtEpilogue::BgradB: return "BGRADB";
  }
  return "?";
}

namespace {

cublasLtEpilogue_t ltEpilogue(LtEpilogue kind) {
  switch (kind) {
  case LtEpilogue::Default:
    return CUBLASLT_EPILOGUE_DEFAULT;
  case LtEpilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case LtEpilogue::Gelu:
    return CUBLASLT_EPILOGUE_GELU;
  case LtEpilogue::GeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX;
  case LtEpilogue::GeluBias:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case LtEpilogue::GeluAuxBias:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case LtEpilogue::Dgelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case LtEpilogue::DgeluBgrad:
    return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  case LtEpilogue::BgradA:
    return CUBLASLT_EPILOGUE_BGRADA;
  case LtEpilogue::BgradB:
    return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// EPILOGUE, BIAS_POINTER + BIAS_DATA_TYPE (fp32, or bf16 with a bf16 D), EPILOGUE_AUX_POINTER +
// EPILOGUE_AUX_LD, as the epilogue uses them.
Status setEpilogue(const CublasLt &lt, cublasLtMatmulDesc_t desc,
                   const ColumnMajorEpilogue &e, CUdeviceptr bias,
                   CUdeviceptr aux, const std::string &where) {
  if (e.kind == LtEpilogue::Default)
    return okStatus();
  cublasLtEpilogue_t epilogue = ltEpilogue(e.kind);
  KILN_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                        &epilogue, sizeof(epilogue)),
      "cublasLtMatmulDescSetAttribute(EPILOGUE)", where));
  if (e.bias >= 0) {
    const void *pointer = reinterpret_cast<const void *>(bias);
    cudaDataType_t type = e.biasBf16 ? CUDA_R_16BF : CUDA_R_32F;
    KILN_RETURN_IF_ERROR(lt.check(
        lt.cublasLtMatmulDescSetAttribute(
            desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer, sizeof(pointer)),
        "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", where));
    KILN_RETURN_IF_ERROR(lt.check(
        lt.cublasLtMatmulDescSetAttribute(
            desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
        "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)", where));
  }
  if (e.aux >= 0) {
    const void *pointer = reinterpret_cast<const void *>(aux);
    int64_t ld = e.auxLd;
    KILN_RETURN_IF_ERROR(lt.check(
        lt.cublasLtMatmulDescSetAttribute(
            desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pointer,
            sizeof(pointer)),
        "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", where));
    KILN_RETURN_IF_ERROR(lt.check(
        lt.cublasLtMatmulDescSetAttribute(
            desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)),
        "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)", where));
  }
  return okStatus();
}

} // namespace

StatusOr<std::unique_ptr<GemmPlan>>
GemmPlan::create(const CublasLt &lt, const ColumnMajorGemm &gemm, bool tf32,
                 size_t workspaceBytes, std::string where,
                 const ColumnMajorEpilogue &epilogue, CUdeviceptr bias,
                 CUdeviceptr aux, int candidates) {
  std::unique_ptr<GemmPlan> plan(new GemmPlan(lt));
  plan->where_ = std::move(where);
  plan->beta_ = gemm.accumulate ? 1.0f : 0.0f;
  auto matrix = [](const ColumnMajorMatrix &x) {
    return detail::concat(x.rows, "x", x.cols, x.bf16 ? " bf16" : " f32", " ld ", x.ld,
                          " stride ", x.stride);
  };
  plan->signature_ = detail::concat(
      "m ", gemm.m, " n ", gemm.n, " k ", gemm.k, " batch ", gemm.batch, " op ",
      gemm.transFirst ? "T" : "N", gemm.transSecond ? "T" : "N", " a ", matrix(gemm.first),
      " b ", matrix(gemm.second), " c ", matrix(gemm.result), " beta ", plan->beta_,
      " epilogue ", ltEpilogueName(epilogue.kind), epilogue.biasBf16 ? " bf16 bias" : "",
      tf32 ? " tf32" : " fp32-compute");
  const std::string &w = plan->where_;
  if (gemm.batch > INT32_MAX)
    return invalidArgument(w, ": GEMM batch ", gemm.batch,
                           " exceeds cuBLASLt's 32-bit batch count");
  KILN_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatmulDescCreate(
          &plan->desc_, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
          CUDA_R_32F),
      "cublasLtMatmulDescCreate", w));
  cublasOperation_t transA = gemm.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t transB = gemm.transSecond ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatmulDescSetAttribute(plan->desc_, CUBLASLT_MATMUL_DESC_TRANSA,
                                        &transA, sizeof(transA)),
      "cublasLtMatmulDescSetAttribute(TRANSA)", w));
  KILN_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatmulDescSetAttribute(plan->desc_, CUBLASLT_MATMUL_DESC_TRANSB,
                                        &transB, sizeof(transB)),
      "cublasLtMatmulDescSetAttribute(TRANSB)", w));
  KILN_RETURN_IF_ERROR(setEpilogue(lt, plan->desc_, epilogue, bias, aux, w));
  KILN_RETURN_IF_ERROR(createLayout(lt, gemm.first, gemm.batch, w, plan->first_));
  KILN_RETURN_IF_ERROR(createLayout(lt, gemm.second, gemm.batch, w, plan->second_));
  KILN_RETURN_IF_ERROR(createLayout(lt, gemm.result, gemm.batch, w, plan->result_));

  cublasLtMatmulPreference_t preference = nullptr;
  KILN_RETURN_IF_ERROR(lt.check(lt.cublasLtMatmulPreferenceCreate(&preference),
                                "cublasLtMatmulPreferenceCreate", w));
  uint64_t maxWorkspace = workspaceBytes;
  cublasStatus_t set = lt.cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
      sizeof(maxWorkspace));
  const int requested = std::max(candidates, 1);
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(requested));
  int found = 0;
  cublasStatus_t heuristic =
      set != CUBLAS_STATUS_SUCCESS
          ? set
          : lt.cublasLtMatmulAlgoGetHeuristic(
                lt.handle(), plan->desc_, plan->first_, plan->second_,
                plan->result_, plan->result_, preference, requested,
                results.data(), &found);
  lt.cublasLtMatmulPreferenceDestroy(preference);
  if (heuristic == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < std::min(found, requested); ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS &&
          results[i].workspaceSize <= workspaceBytes)
        plan->algos_.push_back(results[i].algo);
  // No algorithm: NOT_SUPPORTED from the heuristic (what cuBLASLt returns
  // for a combination it has no kernel for) or an empty result. Unavailable,
  // so that the caller may plan the GEMM without its epilogue instead.
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED ||
      (heuristic == CUBLAS_STATUS_SUCCESS && plan->algos_.empty()))
    return unavailable(w, ": cuBLASLt has no algorithm for this GEMM (m=",
                       gemm.m, " n=", gemm.n, " k=", gemm.k, " batch=",
                       gemm.batch, ", column-major view, epilogue ",
                       ltEpilogueName(epilogue.kind), ")");
  KILN_RETURN_IF_ERROR(lt.check(heuristic, "cublasLtMatmulAlgoGetHeuristic", w));
  return plan;
}

std::string GemmPlan::algorithmText(size_t index) const {
  std::string text;
  char word[17];
  for (uint64_t value : algos_[index].data) {
    std::snprintf(word, sizeof(word), "%016llx", static_cast<unsigned long long>(value));
    text += word;
  }
  return text;
}

std::optional<size_t> GemmPlan::findAlgorithm(const std::string &text) const {
  for (size_t i = 0; i < algos_.size(); ++i)
    if (algorithmText(i) == text)
      return i;
  return std::nullopt;
}

GemmPlan::~GemmPlan() {
  if (result_)
    lt_.cublasLtMatrixLayoutDestroy(result_);
  if (second_)
    lt_.cublasLtMatrixLayoutDestroy(second_);
  if (first_)
    lt_.cublasLtMatrixLayoutDestroy(first_);
  if (desc_)
    lt_.cublasLtMatmulDescDestroy(desc_);
}

Status GemmPlan::runCandidate(size_t index, CUdeviceptr a, CUdeviceptr b,
                              CUdeviceptr c, CUdeviceptr workspace,
                              size_t workspaceBytes, CUstream stream) const {
  const float alpha = 1.0f;
  // cuBLAS' first operand is the artifact's B, its second the artifact's A
  // (GemmLayout.h); C is both the input (read only when beta = 1) and the
  // output.
  return lt_.check(
      lt_.cublasLtMatmul(lt_.handle(), desc_, &alpha,
                         reinterpret_cast<const void *>(b), first_,
                         reinterpret_cast<const void *>(a), second_, &beta_,
                         reinterpret_cast<const void *>(c), result_,
                         reinterpret_cast<void *>(c), result_, &algos_[index],
                         reinterpret_cast<void *>(workspace), workspaceBytes,
                         stream),
      "cublasLtMatmul", where_);
}

} // namespace kiln::rt::cuda
