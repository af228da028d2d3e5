//===- KernelTest.cpp - Numerics of every generated CPU kernel ------------===//
//
// Each test writes a small @step in the kiln dialect, runs its generated
// kernels (compiled by the host compiler) and compares every result with a
// straightforward double-precision reference written here.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "codegen/ScalarExprEmitter.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <functional>

using namespace kiln;
using namespace kiln::test;

namespace {

// Deterministic values in [lo, hi).
std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -2.0f,
                                float hi = 2.0f) {
  std::vector<float> v(n);
  uint64_t s = seed * 2654435761u + 12345;
  for (float &x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>((s >> 40) & 0xFFFFFF) / 16777216.0f;
  }
  return v;
}

std::vector<int32_t> randomInts(size_t n, uint32_t seed, int32_t bound) {
  std::vector<int32_t> v(n);
  uint64_t s = seed * 2654435761u + 7;
  for (int32_t &x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((s >> 33) % bound);
  }
  return v;
}

void expectClose(const std::vector<float> &actual,
                 const std::vector<double> &expected, double rtol = 1e-5,
                 double atol = 1e-6, const std::string &what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << what << " element " << i;
      continue;
    }
    EXPECT_NEAR(actual[i], expected[i], atol + rtol * std::fabs(expected[i]))
        << what << " element " << i;
  }
}

std::vector<double> map(const std::vector<float> &a,
                        const std::function<double(double)> &f) {
  std::vector<double> r;
  for (float x : a)
    r.push_back(f(x));
  return r;
}

std::vector<double> zip(const std::vector<float> &a, const std::vector<float> &b,
                        const std::function<double(double, double)> &f) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i)
    r.push_back(f(a[i], b[i]));
  return r;
}

double gelu(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

#define RUNNER(name, text)                                                     \
  KernelRunner name(text);                                                     \
  ASSERT_TRUE(name.ok()) << name.error()

TEST(CpuKernels, Elementwise) {
  RUNNER(r, R"mlir(
    func.func @step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
      %0 = kiln.add %a, %b : tensor<4x8xf32>
      %1 = kiln.sub %a, %b : tensor<4x8xf32>
      %2 = kiln.mul %a, %b : tensor<4x8xf32>
      %3 = kiln.div %a, %b : tensor<4x8xf32>
      %4 = kiln.neg %a : tensor<4x8xf32>
      %5 = kiln.exp %a : tensor<4x8xf32>
      %6 = kiln.log %b : tensor<4x8xf32>
      %7 = kiln.tanh %a : tensor<4x8xf32>
      %8 = kiln.sqrt %b : tensor<4x8xf32>
      %9 = kiln.gelu %a : tensor<4x8xf32>
      %10 = kiln.gelu_grad %a, %b : tensor<4x8xf32>
      return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
    })mlir");
  auto a = randomFloats(32, 1, -3, 3), b = randomFloats(32, 2, 0.5f, 3);
  auto out = r.run({HostTensor::floats(a), HostTensor::floats(b)});
  ASSERT_EQ(out.size(), 11u);
  expectClose(out[0].f, zip(a, b, [](double x, double y) { return x + y; }));
  expectClose(out[1].f, zip(a, b, [](double x, double y) { return x - y; }));
  expectClose(out[2].f, zip(a, b, [](double x, double y) { return x * y; }));
  expectClose(out[3].f, zip(a, b, [](double x, double y) { return x / y; }));
  expectClose(out[4].f, map(a, [](double x) { return -x; }));
  expectClose(out[5].f, map(a, [](double x) { return std::exp(x); }));
  expectClose(out[6].f, map(b, [](double x) { return std::log(x); }));
  expectClose(out[7].f, map(a, [](double x) { return std::tanh(x); }));
  expectClose(out[8].f, map(b, [](double x) { return std::sqrt(x); }));
  expectClose(out[9].f, map(a, gelu));
  // d gelu / dx by central differences in double.
  expectClose(out[10].f, zip(a, b, [](double x, double g) {
                return (gelu(x + 1e-6) - gelu(x - 1e-6)) / 2e-6 * g;
              }),
              1e-4, 1e-5);
}

// f32 -> bf16 -> f32: round to nearest, ties to even; any NaN becomes the
// canonical NaN (not rounded into infinity), infinities and signed zeros survive, values past
// bf16's largest finite value round to infinity, bf16 -> f32 is exact.
TEST(CpuKernels, ConvertBf16RoundsToNearestEven) {
  RUNNER(r, R"mlir(
    func.func @step(%a: tensor<10xf32>) -> tensor<10xf32> {
      %0 = kiln.convert %a : tensor<10xf32> -> tensor<10xbf16>
      %1 = kiln.convert %0 : tensor<10xbf16> -> tensor<10xf32>
      return %1 : tensor<10xf32>
    })mlir");
  const float ulp = std::ldexp(1.0f, -7); // bf16's spacing in [1, 2)
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {
      1.0f + ulp / 2,      // tie: down to the even 1.0
      1.0f + 3 * ulp / 2,  // tie: up to the even 1 + 2 ulp
      1.0f + ulp / 2 + std::ldexp(1.0f, -20), // past the tie: up
      -(1.0f + ulp / 4),   // below the tie: down in magnitude
      -std::numeric_limits<float>::quiet_NaN(), // sign and payload dropped
      inf,
      -0.0f,
      std::numeric_limits<float>::max(), // past bf16's max: infinity
      3.0e-39f,            // a subnormal keeps its top bits
      123.456f};
  auto out = r.run({HostTensor::floats(in)});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> &y = out[0].f;
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f + 2 * ulp);
  EXPECT_EQ(y[2], 1.0f + ulp);
  EXPECT_EQ(y[3], -1.0f);
  uint32_t nanBits;
  std::memcpy(&nanBits, &y[4], sizeof nanBits);
  EXPECT_EQ(nanBits, 0x7fff0000u); // the canonical NaN, as cvt.rn.bf16.f32
  EXPECT_EQ(y[5], inf);
  EXPECT_TRUE(y[6] == 0.0f && std::signbit(y[6]));
  EXPECT_EQ(y[7], inf);
  EXPECT_NEAR(y[8], 3.0e-39f, 3.0e-39f / 64);
  EXPECT_EQ(y[9], 123.5f); // 123.456 = 1.929 * 2^6; bf16 spacing there is 0.5
}

// bf16 buffers in a non-convert kernel: every load widens, the op computes
// in float, and the bf16 store rounds to nearest even (NaN stays NaN).
// Computing on the raw bits instead would give unrelated numbers.
TEST(CpuKernels, Bf16PointwiseLoadsWidenAndStoresRound) {
  RUNNER(r, R"mlir(
    func.func @step(%a: tensor<6xf32>, %b: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
      %ab = kiln.convert %a : tensor<6xf32> -> tensor<6xbf16>
      %bb = kiln.convert %b : tensor<6xf32> -> tensor<6xbf16>
      %s = kiln.add %ab, %bb : tensor<6xbf16>
      %p = kiln.mul %ab, %bb : tensor<6xbf16>
      %sf = kiln.convert %s : tensor<6xbf16> -> tensor<6xf32>
      %pf = kiln.convert %p : tensor<6xbf16> -> tensor<6xf32>
      return %sf, %pf : tensor<6xf32>, tensor<6xf32>
    })mlir");
  const float ulp = std::ldexp(1.0f, -7); // bf16's spacing in [1, 2)
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Every input is a bf16 number, so only the result is rounded.
  std::vector<float> a = {1.0f, 1.0f + ulp, 1.0f + ulp, 3.0f, nan, -2.0f};
  std::vector<float> b = {ulp / 2, ulp / 2, 1.0f + ulp, 0.25f, 1.0f, 0.5f};
  auto out = r.run({HostTensor::floats(a), HostTensor::floats(b)});
  ASSERT_EQ(out.size(), 2u);
  const std::vector<float> &sum = out[0].f, &product = out[1].f;
  EXPECT_EQ(sum[0], 1.0f);             // 1 + ulp/2: a tie, down to even
  EXPECT_EQ(sum[1], 1.0f + 2 * ulp);   // 1 + 3 ulp/2: a tie, up to even
  EXPECT_EQ(sum[3], 3.25f);            // exact
  EXPECT_TRUE(std::isnan(sum[4]));     // NaN is not rounded into infinity
  EXPECT_EQ(sum[5], -1.5f);
  // (1 + ulp)^2 = 1 + 2 ulp + ulp^2: just above 1 + 2 ulp, rounds down.
  EXPECT_EQ(product[2], 1.0f + 2 * ulp);
  EXPECT_EQ(product[3], 0.75f);
  EXPECT_TRUE(std::isnan(product[4]));
  EXPECT_EQ(product[5], -1.0f);
}

TEST(CpuKernels, BroadcastConstantIota) {
  RUNNER(r, R"mlir(
    func.func @step(%row: tensor<8xf32>, %col: tensor<4x1xf32>, %s: tensor<f32>, %c: tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3xf32>, tensor<3x2x4xf32>, tensor<2x3xf32>, tensor<5xi32>, tensor<6xi32>) {
      %0 = kiln.broadcast %row dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
      %1 = kiln.broadcast %col dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
      %2 = kiln.broadcast %s dims = [] : tensor<f32> -> tensor<2x3xf32>
      %3 = kiln.broadcast %c dims = [0] : tensor<3xf32> -> tensor<3x2x4xf32>
      %4 = kiln.constant dense<-1.5> : tensor<2x3xf32>
      %5 = kiln.iota : tensor<5xi32>
      %6 = kiln.constant dense<7> : tensor<6xi32>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3xf32>, tensor<3x2x4xf32>, tensor<2x3xf32>, tensor<5xi32>, tensor<6xi32>
    })mlir");
  auto row = randomFloats(8, 3), col = randomFloats(4, 4), c = randomFloats(3, 5);
  auto out = r.run({HostTensor::floats(row), HostTensor::floats(col),
                    HostTensor::floats({2.5f}), HostTensor::floats(c)});
  std::vector<double> e0, e1, e3;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      e0.push_back(row[j]);
      e1.push_back(col[i]);
    }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 8; ++j)
      e3.push_back(c[i]);
  expectClose(out[0].f, e0);
  expectClose(out[1].f, e1);
  expectClose(out[2].f, std::vector<double>(6, 2.5));
  expectClose(out[3].f, e3);
  expectClose(out[4].f, std::vector<double>(6, -1.5));
  EXPECT_EQ(out[5].i, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(out[6].i, std::vector<int32_t>(6, 7));
}

TEST(CpuKernels, ReduceSum) {
  RUNNER(r, R"mlir(
    func.func @step(%a: tensor<2x3x4xf32>, %big: tensor<200x250xf32>) -> (tensor<2x4xf32>, tensor<3xf32>, tensor<f32>, tensor<3x4xf32>, tensor<f32>, tensor<250xf32>) {
      %0 = kiln.reduce_sum %a dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
      %1 = kiln.reduce_sum %a dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
      %2 = kiln.reduce_sum %a dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
      %3 = kiln.reduce_sum %a dims = [0] : tensor<2x3x4xf32> -> tensor<3x4xf32>
      %4 = kiln.reduce_sum %big dims = [0, 1] : tensor<200x250xf32> -> tensor<f32>
      %5 = kiln.reduce_sum %big dims = [0] : tensor<200x250xf32> -> tensor<250xf32>
      return %0, %1, %2, %3, %4, %5 : tensor<2x4xf32>, tensor<3xf32>, tensor<f32>, tensor<3x4xf32>, tensor<f32>, tensor<250xf32>
    })mlir");
  auto a = randomFloats(24, 6), big = randomFloats(50000, 7);
  auto out = r.run({HostTensor::floats(a), HostTensor::floats(big)});
  auto at = [&](int i, int j, int k) { return (double)a[(i * 3 + j) * 4 + k]; };
  std::vector<double> e0(8, 0), e1(3, 0), e2(1, 0), e3(12, 0), e4(1, 0),
      e5(250, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        e0[i * 4 + k] += at(i, j, k);
        e1[j] += at(i, j, k);
        e2[0] += at(i, j, k);
        e3[j * 4 + k] += at(i, j, k);
      }
  for (int i = 0; i < 200; ++i)
    for (int j = 0; j < 250; ++j) {
      e4[0] += big[i * 250 + j];
      e5[j] += big[i * 250 + j];
    }
  expectClose(out[0].f, e0);
  expectClose(out[1].f, e1);
  expectClose(out[2].f, e2);
  expectClose(out[3].f, e3);
  expectClose(out[4].f, e4, 1e-6, 1e-4);
  expectClose(out[5].f, e5, 1e-6, 1e-5);
}

TEST(CpuKernels, TransposeAndReshape) {
  RUNNER(r, R"mlir(
    func.func @step(%a: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<6x4xf32>) {
      %0 = kiln.transpose %a permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
      %1 = kiln.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
      %2 = kiln.exp %1 : tensor<6x4xf32>
      return %0, %2 : tensor<4x2x3xf32>, tensor<6x4xf32>
    })mlir");
  auto a = randomFloats(24, 8);
  auto out = r.run({HostTensor::floats(a)});
  std::vector<double> e0;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        e0.push_back(a[(i * 3 + j) * 4 + k]);
  expectClose(out[0].f, e0);
  expectClose(out[1].f, map(a, [](double x) { return std::exp(x); }));
}

TEST(CpuKernels, EmbeddingAndGrad) {
  RUNNER(r, R"mlir(
    func.func @step(%table: tensor<10x70xf32>, %idx: tensor<2x6xi32>, %g: tensor<2x6x70xf32>) -> (tensor<2x6x70xf32>, tensor<10x70xf32>) {
      %0 = kiln.embedding %table, %idx : tensor<10x70xf32>, tensor<2x6xi32> -> tensor<2x6x70xf32>
      %1 = kiln.embedding_grad %idx, %g : tensor<2x6xi32>, tensor<2x6x70xf32> -> tensor<10x70xf32>
      return %0, %1 : tensor<2x6x70xf32>, tensor<10x70xf32>
    })mlir");
  auto table = randomFloats(700, 9), g = randomFloats(840, 10);
  std::vector<int32_t> idx = {3, 1, 3, 9, 0, 3, 1, 1, 7, 3, 2, 9};
  auto out = r.run({HostTensor::floats(table), HostTensor::ints(idx),
                    HostTensor::floats(g)});
  std::vector<double> e0, e1(700, 0.0);
  for (int n = 0; n < 12; ++n)
    for (int c = 0; c < 70; ++c) {
      e0.push_back(table[idx[n] * 70 + c]);
      e1[idx[n] * 70 + c] += g[n * 70 + c];
    }
  expectClose(out[0].f, e0);
  expectClose(out[1].f, e1);
}

TEST(CpuKernels, LayerNormAndGrad) {
  RUNNER(r, R"mlir(
    func.func @step(%x: tensor<2x3x80xf32>, %w: tensor<80xf32>, %b: tensor<80xf32>, %dy: tensor<2x3x80xf32>) -> (tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>) {
      %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
          : (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>)
          -> (tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
      %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %mean, %rstd, %dy
          : (tensor<2x3x80xf32>, tensor<80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>)
          -> (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>)
      return %y, %mean, %rstd, %dx, %dw, %db : tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>
    })mlir");
  const int R = 6, C = 80;
  auto x = randomFloats(R * C, 11, -1, 3), w = randomFloats(C, 12),
       b = randomFloats(C, 13), dy = randomFloats(R * C, 14);
  auto out = r.run({HostTensor::floats(x), HostTensor::floats(w),
                    HostTensor::floats(b), HostTensor::floats(dy)});
  std::vector<double> ey, em, es, edx(R * C, 0), edw(C, 0), edb(C, 0);
  for (int r0 = 0; r0 < R; ++r0) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c)
      m += x[r0 * C + c] / double(C);
    for (int c = 0; c < C; ++c)
      v += (x[r0 * C + c] - m) * (x[r0 * C + c] - m) / C;
    double s = 1 / std::sqrt(v + 1e-5);
    em.push_back(m);
    es.push_back(s);
    std::vector<double> xhat(C);
    for (int c = 0; c < C; ++c) {
      xhat[c] = (x[r0 * C + c] - m) * s;
      ey.push_back(xhat[c] * w[c] + b[c]);
      edw[c] += dy[r0 * C + c] * xhat[c];
      edb[c] += dy[r0 * C + c];
    }
    // dx_j = sum_i dy_i w_i dxhat_i/dx_j, the Jacobian of xhat written out.
    for (int j = 0; j < C; ++j)
      for (int i = 0; i < C; ++i)
        edx[r0 * C + j] += dy[r0 * C + i] * w[i] * s *
                           ((i == j) - 1.0 / C - xhat[i] * xhat[j] / C);
  }
  expectClose(out[0].f, ey, 1e-5, 1e-5, "y");
  expectClose(out[1].f, em, 1e-5, 1e-6, "mean");
  expectClose(out[2].f, es, 1e-5, 1e-6, "rstd");
  expectClose(out[3].f, edx, 1e-4, 1e-5, "dx");
  expectClose(out[4].f, edw, 1e-5, 1e-5, "dw");
  expectClose(out[5].f, edb, 1e-5, 1e-5, "db");
}

TEST(CpuKernels, SoftmaxMaskAndGrad) {
  RUNNER(r, R"mlir(
    func.func @step(%s: tensor<2x3x5xf32>, %dy: tensor<2x3x5xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
      %m = kiln.causal_mask %s fill = 0xFF800000 : tensor<2x3x5xf32>
      %p = kiln.softmax %m : tensor<2x3x5xf32>
      %dp = kiln.softmax_grad %p, %dy : tensor<2x3x5xf32>
      %dm = kiln.causal_mask %dp fill = 0.0 : tensor<2x3x5xf32>
      return %m, %p, %dm : tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>
    })mlir");
  const int T = 3, S = 5;
  auto s = randomFloats(30, 15, -4, 4), dy = randomFloats(30, 16);
  auto out = r.run({HostTensor::floats(s), HostTensor::floats(dy)});
  std::vector<double> em, ep, edm;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < T; ++i) {
      std::vector<double> row(S), p(S);
      for (int j = 0; j < S; ++j)
        row[j] = j > i + (S - T) ? -INFINITY : s[(b * T + i) * S + j];
      double mx = -INFINITY, sum = 0;
      for (double v : row)
        mx = std::max(mx, v);
      for (int j = 0; j < S; ++j)
        sum += std::exp(row[j] - mx);
      for (int j = 0; j < S; ++j)
        p[j] = std::exp(row[j] - mx) / sum;
      for (int j = 0; j < S; ++j) {
        em.push_back(row[j]);
        ep.push_back(p[j]);
        // dx_j = sum_k dy_k p_k (delta_kj - p_j)
        double d = 0;
        for (int k = 0; k < S; ++k)
          d += dy[(b * T + i) * S + k] * p[k] * ((k == j) - p[j]);
        edm.push_back(j > i + (S - T) ? 0.0 : d);
      }
    }
  expectClose(out[0].f, em);
  expectClose(out[1].f, ep);
  expectClose(out[2].f, edm);
}

TEST(CpuKernels, CrossEntropyAndGrad) {
  RUNNER(r, R"mlir(
    func.func @step(%logits: tensor<2x4x33xf32>, %t: tensor<2x4xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x4x33xf32>) {
      %loss = kiln.cross_entropy %logits, %t : tensor<2x4x33xf32>, tensor<2x4xi32>
      %d = kiln.cross_entropy_grad %logits, %t, %g : tensor<2x4x33xf32>, tensor<2x4xi32>
      return %loss, %d : tensor<f32>, tensor<2x4x33xf32>
    })mlir");
  const int N = 8, V = 33;
  auto logits = randomFloats(N * V, 17, -5, 5);
  auto t = randomInts(N, 18, V);
  // Targets outside [0, V) (an ignore index, one past the end) add a
  // constant 0 to the loss, so their rows' gradients are 0.
  t[1] = -100;
  t[5] = V;
  auto out = r.run({HostTensor::floats(logits), HostTensor::ints(t),
                    HostTensor::floats({0.75f})});
  double loss = 0;
  std::vector<double> ed;
  for (int n = 0; n < N; ++n) {
    if (t[n] < 0 || t[n] >= V) {
      ed.insert(ed.end(), V, 0.0);
      continue;
    }
    double sum = 0;
    for (int v = 0; v < V; ++v)
      sum += std::exp((double)logits[n * V + v]);
    loss += (std::log(sum) - logits[n * V + t[n]]) / N;
    for (int v = 0; v < V; ++v)
      ed.push_back((std::exp((double)logits[n * V + v]) / sum - (v == t[n])) *
                   0.75 / N);
  }
  expectClose(out[0].f, {loss}, 1e-6, 0);
  expectClose(out[1].f, ed, 1e-5, 1e-7);
}

// The optimizer kernels are tested in OptimizerKernelTest.cpp.

// A fused pointwise group: bias broadcast, add, gelu and scale in one loop.
TEST(CpuKernels, FusedPointwiseGroup) {
  auto context = makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @step(%x: tensor<3x40xf32>, %bias: tensor<40xf32>, %s: tensor<3x40xf32>) -> tensor<3x40xf32> {
      %0 = kiln.broadcast %bias dims = [1] : tensor<40xf32> -> tensor<3x40xf32>
      %1 = kiln.add %x, %0 : tensor<3x40xf32>
      %2 = kiln.gelu %1 : tensor<3x40xf32>
      %3 = kiln.mul %2, %s : tensor<3x40xf32>
      return %3 : tensor<3x40xf32>
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  auto step = module->lookupSymbol<mlir::func::FuncOp>("step");
  KernelGroup group;
  for (mlir::Operation &op : step.getBody().front())
    if (!mlir::isa<mlir::func::ReturnOp>(op))
      group.ops.push_back(&op);
  group.inputs = {step.getArgument(0), step.getArgument(1),
                  step.getArgument(2)};
  group.outputs = {group.ops.back()->getResult(0)};
  mlir::FailureOr<CpuKernel> kernel = CpuKernelEmitter::emit(group);
  ASSERT_TRUE(mlir::succeeded(kernel));
  EXPECT_EQ(kernel->ops, "kiln.broadcast,kiln.add,kiln.gelu,kiln.mul");
  EXPECT_EQ(kernel->entry.rfind("k_broadcast_add_gelu_", 0), 0u)
      << kernel->entry;
  // One loop nest for the whole group.
  size_t loops = 0;
  for (size_t pos = 0; (pos = kernel->source.find("for (", pos)) !=
                       std::string::npos;
       ++pos)
    ++loops;
  EXPECT_EQ(loops, 1u) << kernel->source;

  std::string error;
  void *handle = compileKernels({kernel->source}, error);
  ASSERT_TRUE(handle) << error;
  auto entry = reinterpret_cast<void (*)(void *const *)>(
      dlsym(handle, kernel->entry.c_str()));
  ASSERT_TRUE(entry);
  auto x = randomFloats(120, 23), bias = randomFloats(40, 24),
       s = randomFloats(120, 25);
  std::vector<float> y(120);
  void *buffers[] = {x.data(), bias.data(), s.data(), y.data()};
  entry(buffers);
  std::vector<double> expected;
  for (int i = 0; i < 120; ++i)
    expected.push_back(gelu((double)x[i] + bias[i % 40]) * s[i]);
  expectClose(y, expected);
}

// Large shapes take the OpenMP paths; results must not depend on threads.
TEST(CpuKernels, LargeShapesAreDeterministic) {
  RUNNER(r, R"mlir(
    func.func @step(%table: tensor<50x256xf32>, %idx: tensor<600xi32>, %g: tensor<600x256xf32>) -> (tensor<50x256xf32>, tensor<f32>) {
      %0 = kiln.embedding_grad %idx, %g : tensor<600xi32>, tensor<600x256xf32> -> tensor<50x256xf32>
      %1 = kiln.cross_entropy %g, %idx : tensor<600x256xf32>, tensor<600xi32>
      return %0, %1 : tensor<50x256xf32>, tensor<f32>
    })mlir");
  auto table = randomFloats(50 * 256, 26);
  auto idx = randomInts(600, 27, 50);
  auto g = randomFloats(600 * 256, 28);
  auto first = r.run({HostTensor::floats(table), HostTensor::ints(idx),
                      HostTensor::floats(g)});
  for (int rep = 0; rep < 3; ++rep) {
    auto again = r.run({HostTensor::floats(table), HostTensor::ints(idx),
                        HostTensor::floats(g)});
    EXPECT_EQ(again[0].f, first[0].f);
    EXPECT_EQ(again[1].f, first[1].f);
  }
  std::vector<double> e(50 * 256, 0);
  for (int n = 0; n < 600; ++n)
    for (int c = 0; c < 256; ++c)
      e[idx[n] * 256 + c] += g[n * 256 + c];
  expectClose(first[0].f, e, 1e-5, 1e-5);
}

TEST(ScalarExprEmitter, FloatLiterals) {
  EXPECT_EQ(ScalarExprEmitter::floatLiteral(1.0), "1.0f");
  EXPECT_EQ(ScalarExprEmitter::floatLiteral(0.5), "0.5f");
  EXPECT_EQ(ScalarExprEmitter::floatLiteral(1e-5), "1e-05f");
  EXPECT_EQ(ScalarExprEmitter::floatLiteral(-INFINITY), "(-INFINITY)");
  EXPECT_EQ(ScalarExprEmitter::floatLiteral(-2.0), "(-2.0f)");
}

} // namespace
