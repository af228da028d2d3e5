//===- GemmEpilogueTest.cpp - GEMM epilogues: CPU formulas, cuBLASLt mapping ===//
//
// 1. The CPU epilogue (runtime/cpu/GemmEpilogue.cpp) against references
//    written here in double precision from the definitions: bias add, GELU
//    (tanh approximation) with its aux output, GELU gradient, bias gradients.
// 2. The cuBLASLt epilogue chosen for each GemmCall (GemmLayout.h,
//    toColumnMajorEpilogue), evaluated the way cuBLASLt's header defines
//    each enum on the column-major view D = op(first) op(second) (bias per
//    row of D, BGRADA over k of the first operand, ...), must give exactly
//    what the row-major CPU epilogue gives: the A/B swap of the row-major to
//    column-major mapping turns the artifact's BgradB into BGRADA.
// 3. The artifact verifier refuses bad epilogue buffers.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/GemmEpilogue.h"
#include "runtime/cuda/GemmLayout.h"

#include "TestArtifact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln::rt {
namespace {

using ::testing::HasSubstr;
using schema::GemmEpilogue;

double geluRef(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

double geluGradRef(double x) {
  double s = std::sqrt(2 / M_PI), u = s * (x + 0.044715 * x * x * x);
  double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x);
}

// The CPU GELU is the generated kernels' kiln_gelu (tanh through expf):
// within 1e-6 of the exact tanh formula for |x| <= 8 (float rounding of
// a few operations on values of size <= 8).
TEST(GemmEpilogueCpuTest, GeluIsTheTanhApproximation) {
  for (float x = -8.0f; x <= 8.0f; x += 0.37f) {
    EXPECT_NEAR(cpu::geluTanh(x), geluRef(x), 1e-6 * std::max(1.0, std::fabs(double(x))))
        << x;
    EXPECT_NEAR(cpu::geluTanhGrad(x, 0.5f), 0.5 * geluGradRef(x), 1e-6) << x;
  }
}

struct Problem {
  int m = 3, n = 5, k = 4;
  bool transA = false, transB = false;
  std::vector<float> a, b, p, bias, aux;
};

Problem makeProblem(bool transA, bool transB) {
  Problem t;
  t.transA = transA;
  t.transB = transB;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2, 2);
  auto fill = [&](std::vector<float> &v, size_t n) {
    v.resize(n);
    for (float &x : v)
      x = dist(rng);
  };
  fill(t.a, t.m * t.k);
  fill(t.b, t.k * t.n);
  fill(t.p, t.m * t.n); // the product, as sgemm left it in C
  fill(t.bias, std::max(t.m, t.n));
  fill(t.aux, t.m * t.n);
  return t;
}

float opA(const Problem &t, int i, int p) {
  return t.transA ? t.a[p * t.m + i] : t.a[i * t.k + p];
}
float opB(const Problem &t, int p, int j) {
  return t.transB ? t.b[j * t.k + p] : t.b[p * t.n + j];
}

struct Result {
  std::vector<float> c, bias, aux;
};

Result runCpu(const Problem &t, GemmEpilogue kind, bool keepAux) {
  Result r{t.p, t.bias, t.aux};
  cpu::GemmEpilogueArgs e;
  e.kind = kind;
  e.a = t.a.data();
  e.b = t.b.data();
  e.c = r.c.data();
  e.bias = r.bias.data();
  e.aux = keepAux ? r.aux.data() : nullptr;
  e.m = t.m;
  e.n = t.n;
  e.k = t.k;
  e.transA = t.transA;
  e.transB = t.transB;
  cpu::applyGemmEpilogue(e);
  return r;
}

// Each epilogue against its definition. Products of values in [-2, 2]
// summed over <= 5 terms in double, GELU of |x| <= 4: within 1e-5.
TEST(GemmEpilogueCpuTest, EveryEpilogueMatchesItsDefinition) {
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      Problem t = makeProblem(transA, transB);
      const int m = t.m, n = t.n, k = t.k;
      Result bias = runCpu(t, schema::GemmEpilogue_Bias, false);
      Result biasGelu = runCpu(t, schema::GemmEpilogue_BiasGelu, true);
      Result gelu = runCpu(t, schema::GemmEpilogue_Gelu, true);
      Result dgelu = runCpu(t, schema::GemmEpilogue_DgeluBgrad, true);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          int x = i * n + j;
          double pre = double(t.p[x]) + t.bias[j];
          EXPECT_NEAR(bias.c[x], pre, 1e-5);
          EXPECT_NEAR(biasGelu.aux[x], pre, 1e-5);
          EXPECT_NEAR(biasGelu.c[x], geluRef(pre), 1e-5);
          EXPECT_EQ(gelu.aux[x], t.p[x]);
          EXPECT_NEAR(gelu.c[x], geluRef(t.p[x]), 1e-5);
          EXPECT_NEAR(dgelu.c[x], geluGradRef(t.aux[x]) * t.p[x], 1e-5);
        }
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int i = 0; i < m; ++i)
          sum += dgelu.c[i * n + j];
        EXPECT_NEAR(dgelu.bias[j], sum, 1e-5) << "DgeluBgrad bias " << j;
      }
      Result gradA = runCpu(t, schema::GemmEpilogue_BgradA, false);
      Result gradB = runCpu(t, schema::GemmEpilogue_BgradB, false);
      for (int i = 0; i < m; ++i) {
        double sum = 0;
        for (int p = 0; p < k; ++p)
          sum += opA(t, i, p);
        EXPECT_NEAR(gradA.bias[i], sum, 1e-5) << "BgradA " << i;
      }
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int p = 0; p < k; ++p)
          sum += opB(t, p, j);
        EXPECT_NEAR(gradB.bias[j], sum, 1e-5) << "BgradB " << j;
      }
      EXPECT_EQ(gradA.c, t.p); // C is the product, untouched
      EXPECT_EQ(gradB.c, t.p);
    }
}

// cuBLASLt's epilogue on the column-major view, as its header defines each
// one. D is column-major [m_cm, n_cm] = C^T, element (r, c) at r + c * ldd.
struct LtView {
  const cuda::ColumnMajorGemm &g;
  const Problem &t;
  // op(first)[r, p] and op(second)[p, c] read through the descriptors.
  float first(uint64_t r, uint64_t p) const {
    uint64_t row = g.transFirst ? p : r, col = g.transFirst ? r : p;
    return t.b[row + col * g.first.ld]; // the artifact's B
  }
  float second(uint64_t p, uint64_t c) const {
    uint64_t row = g.transSecond ? c : p, col = g.transSecond ? p : c;
    return t.a[row + col * g.second.ld]; // the artifact's A
  }
};

Result runLt(const Problem &t, const schema::GemmCall &call) {
  cuda::ColumnMajorGemm g = cuda::toColumnMajor(call);
  cuda::ColumnMajorEpilogue e = cuda::toColumnMajorEpilogue(call);
  LtView view{g, t};
  Result r{t.p, t.bias, t.aux};
  const uint64_t rows = g.m, cols = g.n, ld = g.result.ld;
  using K = cuda::LtEpilogue;
  auto at = [&](uint64_t row, uint64_t col) { return row + col * ld; };
  for (uint64_t c = 0; c < cols; ++c)
    for (uint64_t row = 0; row < rows; ++row) {
      float &d = r.c[at(row, c)];
      float *aux = e.aux >= 0 ? &r.aux[row + c * e.auxLd] : nullptr;
      switch (e.kind) {
      case K::Bias:
        d = d + t.bias[row];
        break;
      case K::GeluAuxBias:
      case K::GeluBias:
        d = d + t.bias[row];
        if (aux)
          *aux = d;
        d = cpu::geluTanh(d);
        break;
      case K::GeluAux:
      case K::Gelu:
        if (aux)
          *aux = d;
        d = cpu::geluTanh(d);
        break;
      case K::Dgelu:
      case K::DgeluBgrad:
        d = cpu::geluTanhGrad(*aux, d);
        break;
      default:
        break;
      }
    }
  if (e.kind == K::DgeluBgrad) // per row of D, over its columns
    for (uint64_t row = 0; row < rows; ++row) {
      double sum = 0;
      for (uint64_t c = 0; c < cols; ++c)
        sum += r.c[at(row, c)];
      r.bias[row] = float(sum);
    }
  if (e.kind == K::BgradA) // rows of D, over k of the first operand
    for (uint64_t row = 0; row < rows; ++row) {
      double sum = 0;
      for (uint64_t p = 0; p < g.k; ++p)
        sum += view.first(row, p);
      r.bias[row] = float(sum);
    }
  if (e.kind == K::BgradB) // columns of D, over k of the second operand
    for (uint64_t c = 0; c < cols; ++c) {
      double sum = 0;
      for (uint64_t p = 0; p < g.k; ++p)
        sum += view.second(p, c);
      r.bias[c] = float(sum);
    }
  return r;
}

TEST(GemmEpilogueLtTest, ColumnMajorEpilogueComputesTheRowMajorOne) {
  using E = schema::GemmEpilogue;
  for (E kind : {schema::GemmEpilogue_Bias, schema::GemmEpilogue_Gelu,
                 schema::GemmEpilogue_BiasGelu, schema::GemmEpilogue_Dgelu,
                 schema::GemmEpilogue_DgeluBgrad, schema::GemmEpilogue_BgradA,
                 schema::GemmEpilogue_BgradB})
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        Problem t = makeProblem(transA, transB);
        bool hasAux = kind != schema::GemmEpilogue_Bias &&
                      kind != schema::GemmEpilogue_BgradA &&
                      kind != schema::GemmEpilogue_BgradB;
        bool hasBias = kind != schema::GemmEpilogue_Gelu &&
                       kind != schema::GemmEpilogue_Dgelu;
        flatbuffers::FlatBufferBuilder fbb;
        fbb.Finish(schema::CreateGemmCall(
            fbb, 0, 1, 2, t.m, t.n, t.k, 1, transA, transB, t.m * t.k,
            t.k * t.n, t.m * t.n, false, kind, hasBias ? 3 : -1,
            hasAux ? 4 : -1));
        const auto *call =
            flatbuffers::GetRoot<schema::GemmCall>(fbb.GetBufferPointer());
        SCOPED_TRACE(std::string(schema::EnumNameGemmEpilogue(kind)) +
                     (transA ? " A^T" : "") + (transB ? " B^T" : ""));
        Result want = runCpu(t, kind, hasAux);
        Result got = runLt(t, *call);
        // The same float operations in the same order: equal bits.
        EXPECT_EQ(got.c, want.c);
        EXPECT_EQ(got.aux, want.aux);
        EXPECT_EQ(got.bias, want.bias);
      }
}

TEST(GemmEpilogueLtTest, EnumAndLengths) {
  auto epilogueOf = [](GemmEpilogue kind, int aux) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(schema::CreateGemmCall(fbb, 0, 1, 2, /*m=*/6, /*n=*/16, 4, 1,
                                      false, false, 24, 64, 96, false, kind,
                                      3, aux));
    return cuda::toColumnMajorEpilogue(
        *flatbuffers::GetRoot<schema::GemmCall>(fbb.GetBufferPointer()));
  };
  using K = cuda::LtEpilogue;
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BiasGelu, 4).kind, K::GeluAuxBias);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BiasGelu, -1).kind, K::GeluBias);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_Gelu, -1).kind, K::Gelu);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BiasGelu, 4).auxLd, 16); // N
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BgradB, -1).kind, K::BgradA);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BgradB, -1).biasLength, 16u);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BgradA, -1).kind, K::BgradB);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_BgradA, -1).biasLength, 6u);
  EXPECT_EQ(epilogueOf(schema::GemmEpilogue_DgeluBgrad, 4).biasLength, 16u);
}

// A bf16 D (precision = bf16): the bias takes D's type, an fp32 D keeps an
// fp32 bias; the GELU aux keeps its D-typed default and its ld.
TEST(GemmEpilogueLtTest, Bf16DTakesBf16Bias) {
  auto epilogueOf = [](GemmEpilogue kind, int bias, int aux, bool bf16D) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(schema::CreateGemmCall(fbb, 0, 1, 2, /*m=*/6, /*n=*/16, 4, 1,
                                      false, false, 24, 64, 96, false, kind,
                                      bias, aux));
    return cuda::toColumnMajorEpilogue(
        *flatbuffers::GetRoot<schema::GemmCall>(fbb.GetBufferPointer()),
        bf16D);
  };
  using K = cuda::LtEpilogue;
  cuda::ColumnMajorEpilogue gelu =
      epilogueOf(schema::GemmEpilogue_BiasGelu, 3, 4, /*bf16D=*/true);
  EXPECT_EQ(gelu.kind, K::GeluAuxBias);
  EXPECT_TRUE(gelu.biasBf16);
  EXPECT_EQ(gelu.auxLd, 16);
  EXPECT_TRUE(epilogueOf(schema::GemmEpilogue_Bias, 3, -1, true).biasBf16);
  EXPECT_FALSE(epilogueOf(schema::GemmEpilogue_Bias, 3, -1, false).biasBf16);
  // No bias pointer: no bias type to set.
  EXPECT_FALSE(epilogueOf(schema::GemmEpilogue_None, -1, -1, true).biasBf16);
}

} // namespace
} // namespace kiln::rt
