//===- GemmEpilogue.cpp - A GemmCall's epilogue on the CPU, after sgemm ---===//

#include "runtime/cpu/GemmEpilogue.h"

#include <cmath>
#include <cstdint>

// Compiled with -ffp-contract=off (runtime/CMakeLists.txt), as the generated
// kernels are (KernelCompiler.cpp): no a * b + c of the GELU formulas is
// contracted into one FMA on either side, so fused and unfused artifacts
// agree to the bit (test/e2e/fusion_equivalence.test) on any CPU.

namespace kiln::rt::cpu {

namespace {

// kiln_tanh of the generated prelude: tanh through expf.
inline float tanhViaExp(float x) {
  const float a = std::fabs(x);
  if (a > 10.0f)
    return std::copysign(1.0f, x);
  const float e = std::exp(2.0f * a);
  return std::copysign(1.0f - 2.0f / (e + 1.0f), x);
}

// sum over rows of a row-major [rows, cols] matrix (stride `rowStride`
// between rows, `colStride` between columns) -> out[cols]; per output a
// double accumulator over the rows in order, as kiln.reduce_sum sums.
void sumRows(const float *in, int64_t rows, int64_t cols, int64_t rowStride,
             int64_t colStride, float *out) {
  for (int64_t j = 0; j < cols; ++j) {
    double acc = 0;
    for (int64_t r = 0; r < rows; ++r)
      acc += in[r * rowStride + j * colStride];
    out[j] = static_cast<float>(acc);
  }
}

inline float gelu(float x) {
  const float t = tanhViaExp(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

inline float geluGrad(float x, float g) {
  const float t = tanhViaExp(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return (0.5f * (1.0f + t) +
          0.5f * x * (1.0f - t * t) * 0.7978845608028654f *
              (1.0f + 3.0f * 0.044715f * x * x)) *
         g;
}

// C = gelu(C [+ bias]) over [m, n], the gelu input kept in aux when given.
void geluRows(float *c, const float *bias, float *aux, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float pre = bias ? c[i * n + j] + bias[j] : c[i * n + j];
      if (aux)
        aux[i * n + j] = pre;
      c[i * n + j] = gelu(pre);
    }
}

// C = gelu_grad(aux, C) over `count` elements.
void geluGradElements(float *c, const float *aux, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    c[i] = geluGrad(aux[i], c[i]);
}

} // namespace

float geluTanh(float x) { return gelu(x); }

float geluTanhGrad(float x, float g) {
  return geluGrad(x, g);
}

void applyGemmEpilogue(const GemmEpilogueArgs &e) {
  const int64_t m = e.m, n = e.n, k = e.k;
  float *c = e.c;
  switch (e.kind) {
  case schema::GemmEpilogue_None:
    return;
  case schema::GemmEpilogue_Bias:
    // kiln.add(P, broadcast(bias)): bias[j] added to column j of every row.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] = c[i * n + j] + e.bias[j];
    return;
  case schema::GemmEpilogue_Gelu:
  case schema::GemmEpilogue_BiasGelu:
    // kiln.gelu(P [+ bias]); aux: the backward's gelu input.
    geluRows(c, e.kind == schema::GemmEpilogue_BiasGelu ? e.bias : nullptr,
             e.aux, m, n);
    return;
  case schema::GemmEpilogue_Dgelu:
  case schema::GemmEpilogue_DgeluBgrad:
    // kiln.gelu_grad(aux, P)
    geluGradElements(c, e.aux, m * n);
    if (e.kind == schema::GemmEpilogue_DgeluBgrad)
      sumRows(c, m, n, n, 1, e.bias); // reduce_sum over the M rows
    return;
  case schema::GemmEpilogue_BgradA:
    // bias[i] = sum_k op(A)[i, k]: A stored [M, K] (or [K, M] transposed).
    if (e.transA)
      sumRows(e.a, k, m, m, 1, e.bias);
    else
      sumRows(e.a, k, m, 1, k, e.bias);
    return;
  case schema::GemmEpilogue_BgradB:
    // bias[j] = sum_k op(B)[k, j]: B stored [K, N] (or [N, K] transposed).
    if (e.transB)
      sumRows(e.b, k, n, 1, k, e.bias);
    else
      sumRows(e.b, k, n, n, 1, e.bias);
    return;
  }
}

} // namespace kiln::rt::cpu
