//===- SimCublasLtGemm.cpp - What the simulated cublasLtMatmul computes --===//
//
// Test-only: see SimCublasLtGemm.h. The element formats (fp32, bf16 as the
// upper half of an fp32, TF32 rounding), the epilogues' formulas, the
// documented refusals and the GEMM itself, accumulated in double in order of
// k and rounded once (deterministic; a GPU's summation order is not
// modelled).
//
//===----------------------------------------------------------------------===//

#include "test/sim/SimCublasLtGemm.h"

#include "test/sim/SimDevice.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

namespace kiln::sim::cublaslt {

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

namespace {

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

// A bf16 store rounds to nearest even; any NaN becomes the canonical NaN
// 0x7fff (the device's cvt.rn.bf16.f32).
void store(void *base, uint32_t type, int64_t index, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (type != CUDA_R_16BF)
    static_cast<uint32_t *>(base)[index] = bits;
  else if ((bits & 0x7fffffffu) > 0x7f800000u)
    static_cast<uint16_t *>(base)[index] = uint16_t(0x7fffu);
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

Verdict notSupported(std::string why) {
  return {CUBLAS_STATUS_NOT_SUPPORTED, std::move(why)};
}
Verdict invalid(std::string why) {
  return {CUBLAS_STATUS_INVALID_VALUE, std::move(why)};
}

} // namespace

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

} // namespace kiln::sim::cublaslt
