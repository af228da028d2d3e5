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
//===----------------------------------------------------------------------===//

#include "test/sim/SimDevice.h"

#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

// The entry points keep default visibility under any -fvisibility: kiln-run
// resolves them with dlsym.
#define KILN_SIM_EXPORT extern "C" __attribute__((visibility("default")))

// cublasLt.h leaves the handle's struct incomplete; this library defines it.
struct cublasLtContext {
  uint64_t tag;
};

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

// cublasLtMatrixLayoutAttribute_t's values, each field of the attribute's
// documented type (its size is what SetAttribute accepts). ORDER,
// PLANE_OFFSET and BATCH_MODE are not modelled (see setUnmodelled).
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

// Preferences only filter algorithms, and the simulator's one algorithm
// passes every filter: they are checked for size and dropped.
struct Preference {};

Layout &layout(cublasLtMatrixLayout_t l) {
  return *reinterpret_cast<Layout *>(l);
}

void report(const char *call, const std::string &why) {
  std::fprintf(stderr, "kiln device simulator: %s: %s\n", call, why.c_str());
}

std::string format(const char *fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return text;
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

const char *typeName(int32_t t) {
  return t == CUDA_R_32F ? "fp32" : t == CUDA_R_16BF ? "bf16" : "other";
}

size_t elementBytes(uint32_t type) { return type == CUDA_R_16BF ? 2 : 4; }

// CUBLAS_COMPUTE_32F_FAST_TF32: an fp32 input keeps 10 explicit mantissa
// bits (round to nearest even) before it is multiplied, the precision of a
// tensor core's TF32 operand; infinities and NaNs pass unchanged.
float roundToTf32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u)
    return f;
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element `index` of an fp32 or bf16 array; bf16 is the upper half of an
// fp32.
float load(const void *base, uint32_t type, int64_t index) {
  const uint32_t bits =
      type == CUDA_R_16BF
          ? uint32_t(static_cast<const uint16_t *>(base)[index]) << 16
          : static_cast<const uint32_t *>(base)[index];
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A bf16 store rounds to nearest even; a NaN stays a quiet NaN of its sign.
void store(void *base, uint32_t type, int64_t index, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (type != CUDA_R_16BF)
    static_cast<uint32_t *>(base)[index] = bits;
  else if ((bits & 0x7fffffffu) > 0x7f800000u)
    static_cast<uint16_t *>(base)[index] = uint16_t((bits >> 16) | 0x40u);
  else
    static_cast<uint16_t *>(base)[index] =
        uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

template <typename P> P *advance(P *base, int64_t elements, uint32_t type) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P *>(reinterpret_cast<Byte *>(base) +
                               elements * int64_t(elementBytes(type)));
}

// cublasLtEpilogue_t's note: GELU is approximated by
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). It and its derivative are
// evaluated in double and rounded once: the formula's value, not the bits of
// any GPU kernel.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
float gelu(float x) {
  const double v = x;
  return float(0.5 * v *
               (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))));
}
float geluGrad(float x) {
  const double v = x;
  const double t = std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v));
  return float(0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kSqrt2OverPi *
                                     (1.0 + 3.0 * 0.044715 * v * v));
}

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

constexpr EpilogueUse kEpilogues[] = {
    // epilogue                 biasIn gelu auxOut auxIn rows  cols
    {CUBLASLT_EPILOGUE_DEFAULT, false, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_BIAS, true, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU, false, true, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU_AUX, false, true, true, false, false, false},
    {CUBLASLT_EPILOGUE_GELU_BIAS, true, true, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, true, true, true, false, false, false},
    {CUBLASLT_EPILOGUE_DGELU, false, false, false, true, false, false},
    {CUBLASLT_EPILOGUE_DGELU_BGRAD, false, false, false, true, true, false},
    {CUBLASLT_EPILOGUE_BGRADA, false, false, false, false, true, false},
    {CUBLASLT_EPILOGUE_BGRADB, false, false, false, false, false, true},
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
Verdict notSupported(std::string why) {
  return {CUBLAS_STATUS_NOT_SUPPORTED, std::move(why)};
}
Verdict invalid(std::string why) {
  return {CUBLAS_STATUS_INVALID_VALUE, std::move(why)};
}

// The rules the heuristic and cublasLtMatmul share, each from the cuBLAS
// documentation (cuBLAS 13, "cuBLASLt API Reference", and cublasLt.h's
// comments); on success fills in `g`'s shape and epilogue.
Verdict plan(Gemm &g) {
  const MatmulDesc &d = g.desc;
  const Layout *layouts[] = {&g.a, &g.b, &g.c, &g.d};
  for (int i = 0; i < 4; ++i) {
    const Layout &l = *layouts[i];
    if (l.type != CUDA_R_32F && l.type != CUDA_R_16BF)
      return notSupported(
          format("%c: cudaDataType %u is not simulated", "ABCD"[i], l.type));
    // CUBLASLT_MATRIX_LAYOUT_LD: non-negative, >= rows for column-major.
    if (l.ld < 0 || uint64_t(l.ld) < l.rows || l.batchCount < 1 ||
        l.batchStride < 0)
      return invalid(format("%c: ld %lld for %llu rows, batch %d, stride %lld",
                            "ABCD"[i], (long long)l.ld,
                            (unsigned long long)l.rows, l.batchCount,
                            (long long)l.batchStride));
  }
  g.tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  if ((d.compute != CUBLAS_COMPUTE_32F && !g.tf32) ||
      d.fillMode != CUBLAS_FILL_MODE_FULL)
    return notSupported(format("compute type %d, fill mode %d: not simulated",
                               d.compute, d.fillMode));
  // The datatypes table of cublasLtMatmul(): 32F compute types scale in
  // CUDA_R_32F.
  if (d.scale != CUDA_R_32F)
    return notSupported(format("scale type %d with a 32F compute", d.scale));
  auto isOp = [](int32_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
  };
  if (!isOp(d.transA) || !isOp(d.transB))
    return invalid("TRANSA or TRANSB is not a cublasOperation_t");

  // The datatypes table of cublasLtMatmul() ("regular data ordering"): A and
  // B have one type, C and D another ("Ctype"), and the rows are
  //   CUBLAS_COMPUTE_32F:           A/B 16BF, C/D 16BF or 32F; A/B 32F, C/D 32F
  //   CUBLAS_COMPUTE_32F_FAST_TF32: A/B 32F, C/D 32F.
  // So an fp32 A/B with a bf16 D, or TF32 with any bf16, has no algorithm.
  const bool bf16In = g.a.type == CUDA_R_16BF;
  const bool bf16Out = g.d.type == CUDA_R_16BF;
  if (g.a.type != g.b.type || g.c.type != g.d.type || (!bf16In && bf16Out) ||
      (g.tf32 && (bf16In || bf16Out)))
    return notSupported(format("A %s, B %s, C %s, D %s, compute type %d: not "
                               "a row of the datatypes table",
                               typeName(g.a.type), typeName(g.b.type),
                               typeName(g.c.type), typeName(g.d.type),
                               d.compute));

  // op(A) [m, k], op(B) [k, n], D [m, n]; C "must have the same ... number
  // of rows, number of columns, batch size" as D.
  const bool ta = d.transA != CUBLAS_OP_N, tb = d.transB != CUBLAS_OP_N;
  const uint64_t m = ta ? g.a.cols : g.a.rows, k = ta ? g.a.rows : g.a.cols;
  const uint64_t kb = tb ? g.b.cols : g.b.rows, n = tb ? g.b.rows : g.b.cols;
  if (k != kb || g.d.rows != m || g.d.cols != n || g.c.rows != m ||
      g.c.cols != n)
    return invalid(
        format("shapes disagree: op(A) %llux%llu, op(B) %llux%llu, "
               "C %llux%llu, D %llux%llu",
               (unsigned long long)m, (unsigned long long)k,
               (unsigned long long)kb, (unsigned long long)n,
               (unsigned long long)g.c.rows, (unsigned long long)g.c.cols,
               (unsigned long long)g.d.rows, (unsigned long long)g.d.cols));
  if (g.a.batchCount != g.d.batchCount || g.b.batchCount != g.d.batchCount ||
      g.c.batchCount != g.d.batchCount)
    return invalid("the batch counts of A, B, C and D differ");
  g.m = int64_t(m);
  g.n = int64_t(n);
  g.k = int64_t(k);

  const EpilogueUse *use = nullptr;
  for (const EpilogueUse &e : kEpilogues)
    if (e.epilogue == d.epilogue)
      use = &e;
  if (!use)
    return notSupported(format("epilogue %u: not simulated", d.epilogue));
  g.use = *use;
  // CUBLASLT_MATMUL_DESC_BIAS_POINTER and _BIAS_DATA_TYPE: bias and bias
  // gradient elements have D's type but for IMMA and FP8 kernels, and the
  // datatypes table's "Bias Type" is D's type in each row above: a bf16 D
  // takes a bf16 bias, an fp32 D an fp32 one.
  if (use->bias() && d.biasType != -1 && uint32_t(d.biasType) != g.d.type)
    return notSupported(format("a %s bias with a %s D", typeName(d.biasType),
                               typeName(g.d.type)));
  if (use->bias() && d.biasBatchStride < 0)
    return invalid("negative BIAS_BATCH_STRIDE");
  if (!use->aux())
    return {};
  // _EPILOGUE_AUX_DATA_TYPE: a non-default one only for FP8 outputs.
  if (d.auxType != -1 && uint32_t(d.auxType) != g.d.type)
    return notSupported(format("a %s aux with a %s D", typeName(d.auxType),
                               typeName(g.d.type)));
  // _EPILOGUE_AUX_LD: the GELU input matrix's ld "must be divisible by 8 and
  // be no less than the number of rows in the output matrix";
  // _AUX_BATCH_STRIDE "must be divisible by 8". The documentation names
  // GELU_AUX_BIAS, DGELU and DGELU_BGRAD; GELU_AUX writes the same matrix
  // and is held to the same rule.
  if (d.auxLd % 8 != 0 || d.auxLd < g.m || d.auxBatchStride % 8 != 0 ||
      d.auxBatchStride < 0)
    return notSupported(format("aux ld %lld for %lld rows, batch stride %lld: "
                               "multiples of 8 wanted, the ld >= rows",
                               (long long)d.auxLd, (long long)g.m,
                               (long long)d.auxBatchStride));
  return {};
}

// Whether every operand lies in device memory; names on stderr the first
// that does not.
bool operandsInDeviceMemory(const Gemm &g, const void *workspace,
                            size_t workspaceBytes) {
  auto inDevice = [](const char *operand, const void *p, int64_t bytes) {
    if (bytes <= 0 || kiln::sim::isDeviceRange(p, size_t(bytes)))
      return true;
    report("cublasLtMatmul", format("%s [%p, +%lld bytes) is not device memory",
                                    operand, p, (long long)bytes));
    return false;
  };
  // Bytes from a strided batch's first element to one past its last.
  auto span = [&](uint64_t rows, uint64_t cols, int64_t ld, int64_t stride,
                  uint32_t type) {
    return rows == 0 || cols == 0 ? 0
                                  : (int64_t(g.d.batchCount - 1) * stride +
                                     int64_t(cols - 1) * ld + int64_t(rows)) *
                                        int64_t(elementBytes(type));
  };
  auto matrix = [&](const char *name, const void *p, const Layout &l) {
    return inDevice(name, p, span(l.rows, l.cols, l.ld, l.batchStride, l.type));
  };
  const MatmulDesc &d = g.desc;
  const uint64_t biasLength = uint64_t(g.use.bgradCols ? g.n : g.m);
  // C is read only when beta != 0 (BLAS: else it need not be valid).
  return matrix("A", g.pa, g.a) && matrix("B", g.pb, g.b) &&
         matrix("D", g.pd, g.d) && (g.beta == 0.0f || matrix("C", g.pc, g.c)) &&
         (!g.use.bias() ||
          inDevice("bias (BIAS_POINTER)", d.bias,
                   span(biasLength, 1, 0, d.biasBatchStride, g.d.type))) &&
         (!g.use.aux() || inDevice("aux (EPILOGUE_AUX_POINTER)", d.aux,
                                   span(uint64_t(g.m), uint64_t(g.n), d.auxLd,
                                        d.auxBatchStride, g.d.type))) &&
         inDevice("workspace", workspace, int64_t(workspaceBytes));
}

// Batch entry `entry` of the GEMM and its epilogue; runs with the stream.
void runBatchEntry(const Gemm &g, int32_t entry) {
  const MatmulDesc &d = g.desc;
  const EpilogueUse &u = g.use;
  const int64_t m = g.m, n = g.n, k = g.k;
  const uint32_t dType = g.d.type; // also bias and aux elements
  const void *a = advance(g.pa, entry * g.a.batchStride, g.a.type);
  const void *b = advance(g.pb, entry * g.b.batchStride, g.b.type);
  const void *c = g.beta != 0.0f
                      ? advance(g.pc, entry * g.c.batchStride, g.c.type)
                      : nullptr;
  void *out = advance(g.pd, entry * g.d.batchStride, dType);
  void *bias =
      u.bias() ? advance(d.bias, entry * d.biasBatchStride, dType) : nullptr;
  void *aux =
      u.aux() ? advance(d.aux, entry * d.auxBatchStride, dType) : nullptr;
  const bool ta = d.transA != CUBLAS_OP_N, tb = d.transB != CUBLAS_OP_N;

  // Row i of op(A) and column j of op(B), k contiguous floats each:
  // opA [m, k], opB [n, k].
  std::vector<float> opA(size_t(m * k)), opB(size_t(n * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      opA[size_t(i * k + p)] =
          load(a, g.a.type, ta ? p + i * g.a.ld : i + p * g.a.ld);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p)
      opB[size_t(j * k + p)] =
          load(b, g.b.type, tb ? j + p * g.b.ld : p + j * g.b.ld);

  // BGRADA / BGRADB: sums over k of op(A)'s rows / op(B)'s columns, of the
  // values as stored: the documentation says neither that TF32 rounding nor
  // that alpha applies to them. Summed in double, rounded to the bias type.
  const bool fromA = d.epilogue == CUBLASLT_EPILOGUE_BGRADA;
  if (fromA || d.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    const std::vector<float> &src = fromA ? opA : opB;
    for (int64_t r = 0, length = fromA ? m : n; r < length; ++r) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += src[size_t(r * k + p)];
      store(bias, dType, r, float(sum));
    }
  }
  if (g.tf32) {
    for (float &x : opA)
      x = roundToTf32(x);
    for (float &x : opB)
      x = roundToTf32(x);
  }

  // DGELU_BGRAD's row sums of D, of the fp32 values before D is rounded to
  // its type: the documentation does not say, and a kernel would reduce its
  // fp32 registers.
  const bool rowSums = u.bgradRows && !fromA;
  std::vector<double> sums(rowSums ? size_t(m) : 0, 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      // CUBLAS_COMPUTE_32F accumulates in fp32; the simulator accumulates
      // in double (fp32 products are exact there) in order of k and rounds
      // once below: deterministic, and nearer the exact sum than a GPU,
      // whose kernel-dependent summation order moves it by a few ulp.
      const float *row = &opA[size_t(i * k)], *col = &opB[size_t(j * k)];
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(row[p]) * col[p];
      // alpha * acc + beta * C in the fp32 scale type, formed in double and
      // rounded once.
      double scaled = double(g.alpha) * acc;
      if (c)
        scaled += double(g.beta) * load(c, g.c.type, i + j * g.c.ld);
      float x = float(scaled);
      if (u.biasIn)
        x += load(bias, dType, i); // broadcast along row i
      if (u.auxOut)
        store(aux, dType, i + j * d.auxLd, x); // the GELU input
      if (u.gelu)
        x = gelu(x);
      if (u.auxIn)
        x = geluGrad(load(aux, dType, i + j * d.auxLd)) * x;
      if (rowSums)
        sums[size_t(i)] += x;
      store(out, dType, i + j * g.d.ld, x); // a bf16 D rounds here
    }
  for (int64_t i = 0; i < int64_t(sums.size()); ++i)
    store(bias, dType, i, float(sums[size_t(i)]));
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
