//===- SimCublasLt.cpp - cuBLASLt's matmul on the simulated device --------===//
//
// Test-only: libcublasLt.so.13 of the device simulator (SimDevice.h). It
// exports, with cublasLt.h's signatures, the cuBLASLt functions Kiln's runtime
// resolves (runtime/cuda/CublasLt.h), and computes what the cuBLAS
// documentation says cublasLtMatmul computes,
//   D = epilogue(alpha * op(A) op(B) + beta * C)
// column-major with strided batches, as one more operation on the caller's
// stream: queued with kiln::sim::enqueue, so it runs when the stream runs and
// is captured into a graph like a kernel.
//
// Simulated: fp32 and bf16 matrices, CUBLAS_COMPUTE_32F and _32F_FAST_TF32,
// host alpha/beta, the epilogues DEFAULT, BIAS, GELU(_AUX)(_BIAS),
// DGELU(_BGRAD), BGRADA and BGRADB, the documented refusals (`plan`), and
// every operand in device memory (else INVALID_VALUE, naming it on stderr).
// KILN_SIM_CUBLASLT_NO_EPILOGUES=1 makes the heuristic refuse every
// epilogue (NOT_SUPPORTED), as a cuBLASLt without those kernels would.
// The heuristic offers kSimAlgorithms algorithms (KILN_SIM_CUBLASLT_ALGOS=N
// sets how many), all computing the same D; KILN_SIM_CUBLASLT_SLOW_ALGO=I
// makes the I-th (from 0) sleep kSlowAlgorithmMs per call, so a test can
// see the runtime time them and keep a faster one (--gemm-algos=timed).
// Not simulated, refused with NOT_SUPPORTED and a line on stderr where a real
// cuBLASLt might run them: other types, ReLU epilogues, device pointer modes,
// other orders and batch modes, FP8 scaling, fill modes. No alignment or
// workspace is needed, and a GPU's summation order is not modelled.
//
// This file holds the API (handles, descriptors and their attributes, the
// heuristic, the call); SimCublasLtGemm.cpp what a GEMM computes and the
// documented rules it must satisfy.
//
//===----------------------------------------------------------------------===//

#include "test/sim/SimCublasLtGemm.h"
#include "test/sim/SimDevice.h"

#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

// The entry points keep default visibility under any -fvisibility: kiln-run
// resolves them with dlsym.
#define KILN_SIM_EXPORT extern "C" __attribute__((visibility("default")))

// cublasLt.h leaves the handle's struct incomplete; this library defines it.
struct cublasLtContext {
  uint64_t tag;
};

using namespace kiln::sim::cublaslt;

namespace {

constexpr uint64_t kHandleTag = 0x4b696c6e53696d48ull; // "KilnSimH"
constexpr uint64_t kAlgoTag = 0x4b696c6e53696d41ull;   // "KilnSimA"
constexpr int kSimAlgorithms = 3;
constexpr int kSlowAlgorithmMs = 5;

// An integer environment variable, `fallback` when unset or not a number.
int envInt(const char *name, int fallback) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return fallback;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  return *end == '\0' ? static_cast<int>(value) : fallback;
}

// Preferences only filter algorithms, and the simulator's one algorithm
// passes every filter: they are checked for size and dropped.
struct Preference {};

Layout &layout(cublasLtMatrixLayout_t l) {
  return *reinterpret_cast<Layout *>(l);
}

// Copies `buf` into `field` when `size` is the field's size.
template <typename T>
cublasStatus_t setField(T &field, const void *buf, size_t size) {
  if (!buf || size != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// Checks a value of `T` for size and ignores it.
template <typename T> cublasStatus_t ignoreField(const void *buf, size_t size) {
  T ignored;
  return setField(ignored, buf, size);
}

// An attribute of `T` the simulator does not model: its default (zero,
// NULL, CUBLAS_OP_N, CUBLASLT_POINTER_MODE_HOST, CUBLASLT_ORDER_COL, ...)
// is accepted, another value refused at once with NOT_SUPPORTED and a line
// on stderr, where a real cuBLASLt would take it and decide later.
template <typename T>
cublasStatus_t setUnmodelled(const char *call, int attr, const void *buf,
                             size_t size) {
  T value{};
  if (cublasStatus_t s = setField(value, buf, size))
    return s;
  const T zero{};
  if (std::memcmp(&value, &zero, sizeof(T)) == 0)
    return CUBLAS_STATUS_SUCCESS;
  report(call, format("attribute %d: a non-default value is not simulated "
                      "(pointer modes, TRANSC, orders, planar complex, batch "
                      "modes, FP8 scaling, amax, alpha vectors, emulation)",
                      attr));
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

// cublasLtGetStatusName (`name`) or cublasLtGetStatusString.
const char *statusText(cublasStatus_t status, bool name) {
#define KILN_STATUS(status, text)                                              \
  case status:                                                                 \
    return name ? #status : text;
  switch (status) {
    KILN_STATUS(CUBLAS_STATUS_SUCCESS, "success")
    KILN_STATUS(CUBLAS_STATUS_NOT_INITIALIZED, "library not initialized")
    KILN_STATUS(CUBLAS_STATUS_ALLOC_FAILED, "resource allocation failed")
    KILN_STATUS(CUBLAS_STATUS_INVALID_VALUE, "invalid value")
    KILN_STATUS(CUBLAS_STATUS_ARCH_MISMATCH, "device architecture mismatch")
    KILN_STATUS(CUBLAS_STATUS_MAPPING_ERROR, "GPU memory access failed")
    KILN_STATUS(CUBLAS_STATUS_EXECUTION_FAILED, "GPU program failed")
    KILN_STATUS(CUBLAS_STATUS_INTERNAL_ERROR, "internal operation failed")
    KILN_STATUS(CUBLAS_STATUS_NOT_SUPPORTED, "functionality not supported")
    KILN_STATUS(CUBLAS_STATUS_LICENSE_ERROR, "license check failed")
  }
#undef KILN_STATUS
  return name ? "CUBLAS_STATUS_UNKNOWN" : "unknown status";
}

// The GEMM a call describes; "If Cdesc is omitted", C has D's layout.
Gemm gemmOf(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
            cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
            cublasLtMatrixLayout_t d) {
  Gemm g;
  g.desc = *reinterpret_cast<MatmulDesc *>(desc);
  g.a = layout(a);
  g.b = layout(b);
  g.d = layout(d);
  g.c = c ? layout(c) : g.d;
  return g;
}

bool validHandle(cublasLtHandle_t handle) {
  return handle && handle->tag == kHandleTag;
}

} // namespace

//===----------------------------------------------------------------------===//
// The exported API, with cublasLt.h's signatures
//===----------------------------------------------------------------------===//

KILN_SIM_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  if (!lightHandle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext{kHandleTag};
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!validHandle(lightHandle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  lightHandle->tag = 0;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT const char *cublasLtGetStatusName(cublasStatus_t status) {
  return statusText(status, true);
}

KILN_SIM_EXPORT const char *cublasLtGetStatusString(cublasStatus_t status) {
  return statusText(status, false);
}

// The release of cublas_api.h, as cuBLASLt reports its version:
// major * 10000 + minor * 100 + patch.
KILN_SIM_EXPORT size_t cublasLtGetVersion(void) {
  return CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
}

KILN_SIM_EXPORT cublasStatus_t
cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                           uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout)
    return CUBLAS_STATUS_INVALID_VALUE;
  Layout *l = new Layout{uint32_t(type), rows, cols, ld};
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t
cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete reinterpret_cast<Layout *>(matLayout);
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
    const void *buf, size_t sizeInBytes) {
  if (!matLayout)
    return CUBLAS_STATUS_INVALID_VALUE;
  Layout &l = layout(matLayout);
  const char *call = "cublasLtMatrixLayoutSetAttribute";
#define KILN_FIELD(attr, field)                                                \
  case attr:                                                                   \
    return setField(l.field, buf, sizeInBytes);
  switch (attr) {
    KILN_FIELD(CUBLASLT_MATRIX_LAYOUT_TYPE, type)
    KILN_FIELD(CUBLASLT_MATRIX_LAYOUT_ROWS, rows)
    KILN_FIELD(CUBLASLT_MATRIX_LAYOUT_COLS, cols)
    KILN_FIELD(CUBLASLT_MATRIX_LAYOUT_LD, ld)
    KILN_FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batchCount)
    KILN_FIELD(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batchStride)
  case CUBLASLT_MATRIX_LAYOUT_ORDER: // CUBLASLT_ORDER_COL is 0
    return setUnmodelled<int32_t>(call, attr, buf, sizeInBytes);
  case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
    return setUnmodelled<int64_t>(call, attr, buf, sizeInBytes);
  case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: // CUBLASLT_BATCH_MODE_STRIDED is 0
    return setUnmodelled<uint32_t>(call, attr, buf, sizeInBytes);
  }
#undef KILN_FIELD
  return CUBLAS_STATUS_INVALID_VALUE;
}

KILN_SIM_EXPORT cublasStatus_t cublasLtMatmulDescCreate(
    cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
    cudaDataType_t scaleType) {
  if (!matmulDesc)
    return CUBLAS_STATUS_INVALID_VALUE;
  MatmulDesc *d = new MatmulDesc{int32_t(computeType), int32_t(scaleType)};
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t
cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete reinterpret_cast<MatmulDesc *>(matmulDesc);
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
    const void *buf, size_t sizeInBytes) {
  if (!matmulDesc)
    return CUBLAS_STATUS_INVALID_VALUE;
  MatmulDesc &d = *reinterpret_cast<MatmulDesc *>(matmulDesc);
  const char *call = "cublasLtMatmulDescSetAttribute";
#define KILN_FIELD(attr, field)                                                \
  case attr:                                                                   \
    return setField(d.field, buf, sizeInBytes);
  switch (attr) {
    KILN_FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_TRANSA, transA)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_TRANSB, transB)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_FILL_MODE, fillMode)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, biasBatchStride)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, auxLd)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, auxBatchStride)
    KILN_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, auxType)
  case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: // a scheduling hint
    return ignoreField<int32_t>(buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_FAST_ACCUM: // FP8 only
    return ignoreField<int8_t>(buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE:
    return setUnmodelled<int64_t>(call, attr, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER:
  case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
    return setUnmodelled<void *>(call, attr, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_POINTER_MODE: // CUBLASLT_POINTER_MODE_HOST is 0
  case CUBLASLT_MATMUL_DESC_TRANSC:       // "Currently only CUBLAS_OP_N" (0)
  case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
  case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
  case CUBLASLT_MATMUL_DESC_C_SCALE_MODE:
  case CUBLASLT_MATMUL_DESC_D_SCALE_MODE:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE:
  case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE:
    return setUnmodelled<int32_t>(call, attr, buf, sizeInBytes);
  }
#undef KILN_FIELD
  return CUBLAS_STATUS_INVALID_VALUE;
}

KILN_SIM_EXPORT cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference *>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

KILN_SIM_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t sizeInBytes) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
  case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return ignoreField<uint32_t>(buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
  case CUBLASLT_MATMUL_PREF_IMPL_MASK:
    return ignoreField<uint64_t>(buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
    return ignoreField<float>(buf, sizeInBytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// One algorithm for a supported configuration; none for the rest, with
// NOT_SUPPORTED (documented: "no heuristic function available for current
// configuration") or INVALID_VALUE, and the reason on stderr.
KILN_SIM_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int *returnAlgoCount) {
  if (!validHandle(lightHandle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!returnAlgoCount)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  if (!operationDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !preference ||
      requestedAlgoCount <= 0 || !heuristicResultsArray)
    return CUBLAS_STATUS_INVALID_VALUE;
  Gemm g = gemmOf(operationDesc, Adesc, Bdesc, Cdesc, Ddesc);
  if (Verdict v = plan(g); v.status) {
    report("cublasLtMatmulAlgoGetHeuristic", v.why);
    return v.status;
  }
  // KILN_SIM_CUBLASLT_NO_EPILOGUES=1: a cuBLASLt without epilogue kernels
  // for any of these GEMMs (as real ones lack them for some shapes, types
  // and archs), so the runtime's fallback runs. Silent, as cuBLASLt is.
  if (const char *none = std::getenv("KILN_SIM_CUBLASLT_NO_EPILOGUES");
      none && std::strcmp(none, "1") == 0 &&
      g.desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const int offered = std::max(1, envInt("KILN_SIM_CUBLASLT_ALGOS", kSimAlgorithms));
  const int count = std::min(requestedAlgoCount, offered);
  for (int i = 0; i < count; ++i) {
    cublasLtMatmulHeuristicResult_t &result = heuristicResultsArray[i];
    std::memset(&result, 0, sizeof(result));
    result.algo.data[0] = kAlgoTag; // every algorithm computes the same D
    result.algo.data[1] = static_cast<uint64_t>(i);
    result.workspaceSize = 0;
    result.state = CUBLAS_STATUS_SUCCESS;
    result.wavesCount = 1.0f;
  }
  *returnAlgoCount = count;
  return CUBLAS_STATUS_SUCCESS;
}

// Refuses what the heuristic refuses (a NULL algo is the documented
// implicit heuristic query; any other algo is taken as is) and operands
// outside device memory, then queues the GEMM on `stream`.
KILN_SIM_EXPORT cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
    const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
    const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
    const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
    void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!validHandle(lightHandle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!computeDesc || !Adesc || !Bdesc || !Ddesc || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  Gemm g = gemmOf(computeDesc, Adesc, Bdesc, Cdesc, Ddesc);
  if (Verdict v = plan(g); v.status) {
    report("cublasLtMatmul", v.why);
    return v.status;
  }
  // In place: "C == D and Cdesc == Ddesc".
  if (C == D && (g.c.ld != g.d.ld || g.c.batchStride != g.d.batchStride)) {
    report("cublasLtMatmul", "C == D with a layout other than D's");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // CUBLASLT_POINTER_MODE_HOST: alpha and beta are read at the call, not
  // when the stream runs (nor again when a captured graph replays).
  std::memcpy(&g.alpha, alpha, sizeof(float));
  std::memcpy(&g.beta, beta, sizeof(float));
  g.pa = A;
  g.pb = B;
  g.pc = C;
  g.pd = D;
  if (!operandsInDeviceMemory(g, workspace, workspaceSizeInBytes))
    return CUBLAS_STATUS_INVALID_VALUE;
  // Batch entries run in order: with a zero bias or aux batch stride the
  // last entry's outputs remain, where a GPU's order is unspecified.
  const bool slow = algo && algo->data[0] == kAlgoTag &&
                    static_cast<int64_t>(algo->data[1]) ==
                        envInt("KILN_SIM_CUBLASLT_SLOW_ALGO", -1);
  CUresult queued = kiln::sim::enqueue(
      stream,
      [g, slow] {
        if (slow)
          std::this_thread::sleep_for(std::chrono::milliseconds(kSlowAlgorithmMs));
        for (int32_t entry = 0; entry < g.d.batchCount; ++entry)
          runBatchEntry(g, entry);
      },
      "cublasLtMatmul");
  return queued == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                                : CUBLAS_STATUS_EXECUTION_FAILED;
}
