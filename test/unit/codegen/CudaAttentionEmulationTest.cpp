//===- CudaAttentionEmulationTest.cpp - CUDA attention vs CPU attention ---===//
//
// Runs the CUDA kernels of kiln.attention / kiln.attention_grad on the host
// (CudaHostEmulation.h: a thread per CUDA thread, real barriers, shuffles,
// __syncthreads_or, and a test-only nvcuda::wmma stand-in for the bf16
// tensor-core path) and compares out, lse, dq, dk, dv and the capture
// gradients with the CPU attention kernels (which the e2e attention oracle
// checks against float64 PyTorch). Shapes are small and odd: T = 37 and
// S = 53 (not multiples of any tile), head dim 80 (padded to 80, a multiple
// of 16) or 72 (padded to 80), GQA (4 query heads on 2 kv heads), a mask with
// per-sample lengths and a shifted causal band (rows 0..2 keep no key: out 0,
// lse -inf, zero gradients; key tiles past a sample's length are skipped),
// and a score with a learned per-head slope times |i - j| plus a per-key bias
// (two floating captures with gradients, one integer capture without).
//
// Tolerances:
//  - fp32: |cuda - cpu| <= 5e-5 * max(1, |cpu|). Both compute in float; the
//    CUDA kernel rescales its online softmax per 64-key tile, splits dq/dk/dv
//    over other tiles and reduces D_i across a warp, so sums are regrouped
//    (over <= 53 keys and <= 80 dims: rounding well below 1e-5 relative).
//  - bf16: |cuda - cpu| <= 3e-2 * max(1, |cpu|). The tensor-core path rounds
//    P and scale * dS to bf16 (8 significant bits: 2^-9 relative each) before
//    the P V, P^T dO, dS^T Q and dS K products, as FlashAttention does, and
//    the outputs are bf16 themselves (one more 2^-9); the CPU keeps P and dS
//    in float. Over <= 53 terms with |p| <= 1 that stays below ~1e-2.
//  Non-finite values (lse = -inf) must match exactly.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>

namespace {

using kiln::test::HostTensor;
using kiln::test::KernelBackend;
using kiln::test::KernelRunner;

std::vector<float> randomFloats(size_t n, unsigned seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

// Forward then backward of one attention op. q [2, 4, 37, D], k/v
// [2, 2, 53, D]; `elem` is f32 or bf16 (bf16: the f32 arguments are
// converted in and the results converted out, identically on both
// backends).
std::string attentionModule(int d, const std::string &elem) {
  std::string text = R"mlir(
func.func @step(%qf: tensor<2x4x37xDxf32>, %kf: tensor<2x2x53xDxf32>, %vf: tensor<2x2x53xDxf32>,
                %doutf: tensor<2x4x37xDxf32>, %slope: tensor<4xf32>, %bias: tensor<53xf32>,
                %len: tensor<2xi32>)
    -> (tensor<2x4x37xDxf32>, tensor<2x4x37xf32>, tensor<2x4x37xDxf32>, tensor<2x2x53xDxf32>,
        tensor<2x2x53xDxf32>, tensor<4xf32>, tensor<53xf32>) {
CONVERT_IN
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %bias, %len) {scale = 0.11 : f32}
      : (tensor<2x4x37xDxE>, tensor<2x2x53xDxE>, tensor<2x2x53xDxE>, tensor<4xf32>, tensor<53xf32>, tensor<2xi32>)
      -> (tensor<2x4x37xDxE>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
SCORE
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
MASK
    }
  %dq, %dk, %dv, %dslope, %dbias = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %bias, %len) {scale = 0.11 : f32}
      : (tensor<2x4x37xDxE>, tensor<2x2x53xDxE>, tensor<2x2x53xDxE>, tensor<2x4x37xDxE>, tensor<2x4x37xf32>, tensor<2x4x37xDxE>, tensor<4xf32>, tensor<53xf32>, tensor<2xi32>)
      -> (tensor<2x4x37xDxE>, tensor<2x2x53xDxE>, tensor<2x2x53xDxE>, tensor<4xf32>, tensor<53xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
SCORE
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<53xf32>, %c2: tensor<2xi32>) {
MASK
    }
CONVERT_OUT
  return %out_r, %lse, %dq_r, %dk_r, %dv_r, %dslope, %dbias
      : tensor<2x4x37xDxf32>, tensor<2x4x37xf32>, tensor<2x4x37xDxf32>, tensor<2x2x53xDxf32>,
        tensor<2x2x53xDxf32>, tensor<4xf32>, tensor<53xf32>
})mlir";
  // score = s - slope[h] * |i - j| + bias[j]
  const std::string score = R"(      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %bj = tensor.extract %c1[%j] : tensor<53xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %t = arith.subf %s, %pen : f32
      %r = arith.addf %t, %bj : f32
      kiln.yield %r : f32)";
  // keep = j < len[b] and j + 3 <= i
  const std::string mask = R"(      %n = tensor.extract %c2[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %c3 = arith.constant 3 : index
      %j3 = arith.addi %j, %c3 : index
      %band = arith.cmpi ule, %j3, %i : index
      %keep = arith.andi %inlen, %band : i1
      kiln.yield %keep : i1)";
  std::string in, out;
  auto shape = [&](const char *dims, const std::string &e) {
    return "tensor<" + std::string(dims) + "x" + std::to_string(d) + "x" + e +
           ">";
  };
  if (elem == "bf16") {
    for (auto [name, dims] : {std::pair<const char *, const char *>{"q", "2x4x37"},
                              {"k", "2x2x53"}, {"v", "2x2x53"}, {"dout", "2x4x37"}})
      in += "  %" + std::string(name) + " = kiln.convert %" + name + "f : " +
            shape(dims, "f32") + " -> " + shape(dims, "bf16") + "\n";
    for (auto [name, dims] : {std::pair<const char *, const char *>{"out", "2x4x37"},
                              {"dq", "2x4x37"}, {"dk", "2x2x53"}, {"dv", "2x2x53"}})
      out += "  %" + std::string(name) + "_r = kiln.convert %" + name + " : " +
             shape(dims, "bf16") + " -> " + shape(dims, "f32") + "\n";
  } else {
    // Aliases through a no-op multiply would change nothing; rename instead.
    for (const char *name : {"q", "k", "v", "dout"})
      text = std::regex_replace(text, std::regex("%" + std::string(name) + "f\\b"),
                                "%" + std::string(name));
    for (const char *name : {"out", "dq", "dk", "dv"})
      text = std::regex_replace(text, std::regex("%" + std::string(name) + "_r\\b"),
                                "%" + std::string(name));
  }
  text = std::regex_replace(text, std::regex("CONVERT_IN"), in);
  text = std::regex_replace(text, std::regex("CONVERT_OUT"), out);
  text = std::regex_replace(text, std::regex("SCORE"), score);
  text = std::regex_replace(text, std::regex("MASK"), mask);
  text = std::regex_replace(text, std::regex("xD"), "x" + std::to_string(d));
  text = std::regex_replace(text, std::regex("xE>"), "x" + elem + ">");
  return text;
}

void expectAttentionMatches(int d, const std::string &elem, double tolerance) {
  std::string module = attentionModule(d, elem);
  KernelRunner cpu(module, KernelBackend::Cpu);
  KernelRunner cuda(module, KernelBackend::CudaEmulated);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  std::vector<HostTensor> args = {
      HostTensor::floats(randomFloats(2 * 4 * 37 * d, 1, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 2, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 3)),
      HostTensor::floats(randomFloats(2 * 4 * 37 * d, 4)),
      HostTensor::floats({0.05f, 0.2f, 0.0f, 0.5f}),
      HostTensor::floats(randomFloats(53, 5)),
      // sample 0 sees 40 keys (the last key tile is skipped), sample 1 11.
      HostTensor::ints({40, 11})};
  std::vector<HostTensor> expected = cpu.run(args);
  std::vector<HostTensor> actual = cuda.run(args);
  ASSERT_EQ(actual.size(), expected.size());
  const char *names[] = {"out", "lse", "dq", "dk", "dv", "dslope", "dbias"};
  for (size_t r = 0; r < expected.size(); ++r) {
    SCOPED_TRACE(names[r]);
    ASSERT_EQ(actual[r].f.size(), expected[r].f.size());
    int mismatches = 0;
    for (size_t k = 0; k < expected[r].f.size() && mismatches < 10; ++k) {
      float e = expected[r].f[k], a = actual[r].f[k];
      if (!std::isfinite(e)) {
        EXPECT_TRUE(std::isnan(e) ? std::isnan(a) : a == e)
            << "element " << k << ": " << a << " vs " << e;
        mismatches += !(std::isnan(e) ? std::isnan(a) : a == e);
        continue;
      }
      bool near = std::fabs(a - e) <= tolerance * std::max(1.0f, std::fabs(e));
      EXPECT_TRUE(near) << "element " << k << ": " << a << " vs " << e;
      mismatches += !near;
    }
  }
  // The shifted band leaves rows 0..2 without a key: out 0, lse -inf, dq 0.
  for (int bh = 0; bh < 8; ++bh)
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(actual[1].f[bh * 37 + i], -INFINITY);
      for (int c = 0; c < d; ++c) {
        EXPECT_EQ(actual[0].f[(bh * 37 + i) * d + c], 0.0f);
        EXPECT_EQ(actual[2].f[(bh * 37 + i) * d + c], 0.0f);
      }
    }
  // The learned slope and the bias get non-zero gradients (the test would
  // pass vacuously if both backends dropped them).
  double slopeNorm = 0.0;
  for (float g : actual[5].f)
    slopeNorm += std::fabs(g);
  EXPECT_GT(slopeNorm, 1e-3);
}

TEST(CudaAttentionEmulated, Fp32HeadDim80) { expectAttentionMatches(80, "f32", 5e-5); }

TEST(CudaAttentionEmulated, Fp32HeadDim72Padded) { expectAttentionMatches(72, "f32", 5e-5); }

TEST(CudaAttentionEmulated, Bf16TensorCoresHeadDim80) {
  expectAttentionMatches(80, "bf16", 3e-2);
}

// The emitted kernels are deterministic by construction: no floating-point
// atomics anywhere in the source.
TEST(CudaAttentionEmulated, NoFloatAtomics) {
  KernelRunner cuda(attentionModule(80, "bf16"), KernelBackend::CudaEmulated);
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  for (const auto &kernel : cuda.kernels()) {
    if (kernel.ops.find("attention") == std::string::npos)
      continue;
    EXPECT_EQ(kernel.source.find("atomic"), std::string::npos) << kernel.source;
  }
}

} // namespace
