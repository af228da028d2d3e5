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
//    The backward runs on the CPU forward's out and lse on both backends:
//    the capture gradients sum dS dscore/dslope over ~3000 pairs with
//    weights |i - j| up to 50, so a bf16-rounding difference in out (through
//    D_i = dO . out) would be amplified far past the per-pair error. The
//    capture pass itself uses the fp32 dS.
//  Non-finite values (lse = -inf) must match exactly.
//
// Dropout (p = 0.2, RNG state as the last capture): the same comparisons,
// same tolerances (both backends draw the same Philox mask, so only the
// summation order differs), and the CPU mask follows the micro-step offset
// (same offset: same bits, with 1 or 2 threads; another offset: another
// output; lse unchanged).
//
//===----------------------------------------------------------------------===//

#include "CudaAttentionEmulation.h"
#include "EmulationChecks.h"
#include "KernelRunner.h"

#include "codegen/CudaAttentionKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <omp.h>
#include <random>

namespace {

using kiln::test::HostTensor;
using kiln::test::KernelBackend;
using kiln::test::KernelRunner;

using kiln::test::randomFloats;
using kiln::test::attentionModule;
using kiln::test::expectSame;
using kiln::test::replaceAll;

void expectAttentionMatches(int d, const std::string &elem, double tolerance,
                            int64_t sharedBudget = -1,
                            const std::string &scoreBody = "") {
  std::vector<HostTensor> args = {
      HostTensor::floats(randomFloats(2 * 4 * 37 * d, 1, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 2, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 3)),
      HostTensor::floats({0.05f, 0.2f, 0.0f, 0.5f}),
      HostTensor::floats(randomFloats(53, 5)),
      // sample 0 sees 40 keys (its last key tile is skipped), sample 1 11.
      HostTensor::ints({40, 11})};
  std::vector<HostTensor> fwd = expectSame(attentionModule(d, elem, false, scoreBody), args,
                                           tolerance, {"out", "lse"},
                                           sharedBudget);
  ASSERT_EQ(fwd.size(), 2u);
  // The shifted band leaves rows 0..2 without a key: out 0, lse -inf.
  for (int bh = 0; bh < 8; ++bh)
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(fwd[1].f[bh * 37 + i], -INFINITY);
      for (int c = 0; c < d; ++c)
        EXPECT_EQ(fwd[0].f[(bh * 37 + i) * d + c], 0.0f);
    }

  // The backward of the CPU forward's out and lse on both backends.
  KernelRunner cpuForward(attentionModule(d, elem, false, scoreBody), KernelBackend::Cpu);
  ASSERT_TRUE(cpuForward.ok()) << cpuForward.error();
  std::vector<HostTensor> cpuOut = cpuForward.run(args);
  args.push_back(cpuOut[0]);
  args.push_back(cpuOut[1]);
  args.push_back(HostTensor::floats(randomFloats(2 * 4 * 37 * d, 4)));
  std::vector<HostTensor> bwd =
      expectSame(attentionModule(d, elem, true, scoreBody), args, tolerance,
                 {"dq", "dk", "dv", "dslope", "dbias"}, sharedBudget);
  ASSERT_EQ(bwd.size(), 5u);
  // Rows without a key get zero dq.
  for (int bh = 0; bh < 8; ++bh)
    for (int i = 0; i < 3; ++i)
      for (int c = 0; c < d; ++c)
        EXPECT_EQ(bwd[0].f[(bh * 37 + i) * d + c], 0.0f);
  // The learned slope and the bias get non-zero gradients (the comparison
  // would pass vacuously if both backends dropped them).
  double slopeNorm = 0.0, biasNorm = 0.0;
  for (float g : bwd[3].f)
    slopeNorm += std::fabs(g);
  for (float g : bwd[4].f)
    biasNorm += std::fabs(g);
  EXPECT_GT(slopeNorm, 1e-3);
  EXPECT_GT(biasNorm, 1e-3);
}

TEST(CudaAttentionEmulated, Fp32HeadDim80) { expectAttentionMatches(80, "f32", 5e-5); }

// Capture reads of each kind the backward sums its own way
// (CudaAttentionBackward.cpp): slope[h] and bias[i / 3] do not depend on j
// (row sums, equal targets across rows: added one row after another),
// bias[j / 2] depends on j only (column sums, two columns per target), and
// bias[(i + j) % 53] on both, and bias[s > 0 ? 7 : 3] on the score, which
// varies with both (thread 0, pair by pair). The fp32 and the bf16 mma.sync
// backwards, against the CPU's pair-by-pair sums.
const char *kEveryCaptureReadScore = R"(      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %c53 = arith.constant 53 : index
      %ij = arith.addi %i, %j : index
      %p = arith.remui %ij, %c53 : index
      %bp = tensor.extract %c1[%p] : tensor<53xf32>
      %c2i = arith.constant 2 : index
      %jh = arith.divui %j, %c2i : index
      %bj = tensor.extract %c1[%jh] : tensor<53xf32>
      %c3i = arith.constant 3 : index
      %it = arith.divui %i, %c3i : index
      %bi = tensor.extract %c1[%it] : tensor<53xf32>
      %pen = arith.mulf %sl, %bp : f32
      %t = arith.subf %s, %pen : f32
      %t2 = arith.addf %t, %bj : f32
      %r = arith.subf %t2, %bi : f32
      %zero = arith.constant 0.0 : f32
      %pos = arith.cmpf ogt, %s, %zero : f32
      %c7 = arith.constant 7 : index
      %s3 = arith.select %pos, %c7, %c3i : index
      %bs = tensor.extract %c1[%s3] : tensor<53xf32>
      %r2 = arith.addf %r, %bs : f32
      kiln.yield %r2 : f32)";

TEST(CudaAttentionEmulated, CaptureReadsOfEveryKindFp32) {
  expectAttentionMatches(64, "f32", 5e-5, -1, kEveryCaptureReadScore);
}

TEST(CudaAttentionEmulated, CaptureReadsOfEveryKindBf16) {
  expectAttentionMatches(64, "bf16", 3e-2, -1, kEveryCaptureReadScore);
}

TEST(CudaAttentionEmulated, Fp32HeadDim72Padded) { expectAttentionMatches(72, "f32", 5e-5); }

TEST(CudaAttentionEmulated, Bf16TensorCoresHeadDim80) {
  expectAttentionMatches(80, "bf16", 3e-2);
}

// Head dim 20, not a multiple of 8: no row allows 16-byte copies, so every
// tile is stored element by element (at once) instead of by cp.async.
TEST(CudaAttentionEmulated, Bf16HeadDimNotAMultipleOf8) {
  expectAttentionMatches(20, "bf16", 3e-2);
}

// Head dim 256: the forward's 16-key steps (O takes the registers) and the
// backward's shared-memory roles (the mma.sync ones stop at 128).
TEST(CudaAttentionEmulated, Bf16HeadDim256) {
  expectAttentionMatches(256, "bf16", 3e-2);
}

// The tile plans of a 99 KiB part (sm_86/89/120): smaller tiles, same
// results within the same tolerances as the default plan.
TEST(CudaAttentionEmulated, SmallSharedMemoryPlans) {
  expectAttentionMatches(80, "f32", 5e-5, kiln::attentionSharedBudget({"sm_86"}));
  expectAttentionMatches(80, "bf16", 3e-2, kiln::attentionSharedBudget({"sm_86"}));
}

// A budget that holds the bf16 backward's tiles once but not twice (56 KiB
// at head dim 80 with this op's capture tiles: role A needs about 57 KiB
// with two stages and 40 with one, role B 61 and 51): each step's tiles
// are copied, then computed, with the same results. The forward keeps two
// stages.
TEST(CudaAttentionEmulated, Bf16OneStageBackward) {
  const int64_t budget = 56 * 1024;
  auto sources = [&](bool backward) {
    KernelRunner cuda(attentionModule(80, "bf16", backward), KernelBackend::CudaEmulated, false,
                      budget);
    EXPECT_TRUE(cuda.ok()) << cuda.error();
    std::string text;
    for (const auto &kernel : cuda.kernels())
      text += kernel.source;
    return text;
  };
  const std::string backward = sources(true), forward = sources(false);
  EXPECT_NE(backward.find("one stage: each tile copied, then computed"), std::string::npos);
  EXPECT_EQ(backward.find("software-pipelined over two stages"), std::string::npos);
  EXPECT_NE(forward.find("software-pipelined over two stages"), std::string::npos);
  expectAttentionMatches(80, "bf16", 3e-2, budget);
}

// A budget too small for any tile with shared dK/dV accumulators (32 KiB at
// head dim 80 in fp32: 16 x 16 tiles need about 36 KiB with them, 31 KiB
// without) puts them in a workspace slice per block: same results (the
// same sums in the same order, only in global memory).
TEST(CudaAttentionEmulated, DkDvAccumulatorsInWorkspace) {
  KernelRunner cuda(attentionModule(80, "f32", true),
                    KernelBackend::CudaEmulated, false, 32 * 1024);
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  bool inWorkspace = false;
  for (const auto &kernel : cuda.kernels())
    inWorkspace |= kernel.source.find("dK/dV accumulators in the workspace") !=
                   std::string::npos;
  EXPECT_TRUE(inWorkspace);
  expectAttentionMatches(80, "f32", 5e-5, 32 * 1024);
}

// [B, H, T, D] -> [B, T, H, D] of a flat tensor (`back`: the inverse).
HostTensor swapHeadsAndTokens(const HostTensor &x, int b, int h, int t, int d,
                              bool back = false) {
  std::vector<float> y(x.f.size());
  for (int ib = 0; ib < b; ++ib)
    for (int ih = 0; ih < h; ++ih)
      for (int it = 0; it < t; ++it)
        for (int id = 0; id < d; ++id) {
          size_t bhtd = ((size_t(ib) * h + ih) * t + it) * d + id;
          size_t bthd = ((size_t(ib) * t + it) * h + ih) * d + id;
          y[back ? bhtd : bthd] = x.f[back ? bthd : bhtd];
        }
  return HostTensor::floats(std::move(y));
}

// attentionModule's op in layout bthd: q/out/dout [2, 37, 4, D], k/v
// [2, 53, 2, D]; lse stays [2, 4, 37].
std::string tokensMajorModule(int d, const std::string &elem, bool backward) {
  std::string text = attentionModule(d, elem, backward);
  std::string dd = std::to_string(d);
  replaceAll(text, "2x4x37x" + dd + "x", "2x37x4x" + dd + "x");
  replaceAll(text, "2x2x53x" + dd + "x", "2x53x2x" + dd + "x");
  replaceAll(text, "{scale = 0.11 : f32}",
             "{layout = #kiln<attention_layout bthd>, scale = 0.11 : f32}");
  return text;
}

// Layout bthd computes what bhtd computes, in the same order: on each
// backend, the bthd op on the transposed inputs gives the bhtd op's results
// bit for bit, transposed (lse and the capture gradients as they are). With
// the CPU-vs-CUDA comparisons above, every kernel's bthd addressing (CPU,
// CUDA fp32, bf16 mma.sync; vector loads with rows H * D apart) is checked.
void expectTokensMajorSame(int d, const std::string &elem) {
  std::vector<HostTensor> args = {
      HostTensor::floats(randomFloats(2 * 4 * 37 * d, 31, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 32, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 33)),
      HostTensor::floats({0.05f, 0.2f, 0.0f, 0.5f}),
      HostTensor::floats(randomFloats(53, 35)),
      HostTensor::ints({40, 11})};
  auto query = [&](const HostTensor &x, bool back = false) {
    return swapHeadsAndTokens(x, 2, 4, 37, d, back);
  };
  auto key = [&](const HostTensor &x, bool back = false) {
    return swapHeadsAndTokens(x, 2, 2, 53, d, back);
  };
  for (KernelBackend backend : {KernelBackend::Cpu, KernelBackend::CudaEmulated}) {
    SCOPED_TRACE(backend == KernelBackend::Cpu ? "cpu" : "cuda");
    KernelRunner forward(attentionModule(d, elem, false), backend);
    KernelRunner forwardT(tokensMajorModule(d, elem, false), backend);
    ASSERT_TRUE(forward.ok()) << forward.error();
    ASSERT_TRUE(forwardT.ok()) << forwardT.error();
    std::vector<HostTensor> argsT = args;
    argsT[0] = query(args[0]);
    argsT[1] = key(args[1]);
    argsT[2] = key(args[2]);
    std::vector<HostTensor> out = forward.run(args), outT = forwardT.run(argsT);
    ASSERT_EQ(out.size(), 2u);
    ASSERT_EQ(outT.size(), 2u);
    EXPECT_EQ(query(outT[0], true).f, out[0].f) << "out";
    EXPECT_EQ(outT[1].f, out[1].f) << "lse"; // -inf == -inf: keyless rows

    std::vector<HostTensor> bargs = args, bargsT = argsT;
    HostTensor dout = HostTensor::floats(randomFloats(2 * 4 * 37 * d, 34));
    for (const HostTensor &x : {out[0], out[1], dout})
      bargs.push_back(x);
    for (const HostTensor &x : {outT[0], outT[1], query(dout)})
      bargsT.push_back(x);
    KernelRunner backward(attentionModule(d, elem, true), backend);
    KernelRunner backwardT(tokensMajorModule(d, elem, true), backend);
    ASSERT_TRUE(backward.ok()) << backward.error();
    ASSERT_TRUE(backwardT.ok()) << backwardT.error();
    std::vector<HostTensor> g = backward.run(bargs), gT = backwardT.run(bargsT);
    ASSERT_EQ(g.size(), 5u);
    ASSERT_EQ(gT.size(), 5u);
    EXPECT_EQ(query(gT[0], true).f, g[0].f) << "dq";
    EXPECT_EQ(key(gT[1], true).f, g[1].f) << "dk";
    EXPECT_EQ(key(gT[2], true).f, g[2].f) << "dv";
    EXPECT_EQ(gT[3].f, g[3].f) << "dslope";
    EXPECT_EQ(gT[4].f, g[4].f) << "dbias";
  }
}

TEST(CudaAttentionEmulated, TokensMajorLayoutFp32) { expectTokensMajorSame(80, "f32"); }

TEST(CudaAttentionEmulated, TokensMajorLayoutBf16) {
  expectTokensMajorSame(80, "bf16");
  expectTokensMajorSame(72, "bf16"); // padded head dim: partial 16-byte rows
}

// A TSP-like distance bias: score = s - slope[h] * |xy[b, i] - xy[b, j]|
// with city coordinates xy [B, 53, 2] (dim 0 indexed by b) and the per-head
// slope [H] (indexed by h), both learned, in attentionModule's op in fp32
// (xy in place of the bias). Each dQ block then keeps only its sample's
// [53, 2] and its head's single element of the partials, and the reduction
// sums per element only the blocks of that sample / head.
std::string tspModule(int d, bool backward) {
  std::string text = attentionModule(d, "f32", backward, R"(      %z = arith.constant 0 : index
      %o = arith.constant 1 : index
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %xi = tensor.extract %c1[%b, %i, %z] : tensor<53xf32>
      %xj = tensor.extract %c1[%b, %j, %z] : tensor<53xf32>
      %yi = tensor.extract %c1[%b, %i, %o] : tensor<53xf32>
      %yj = tensor.extract %c1[%b, %j, %o] : tensor<53xf32>
      %dx = arith.subf %xi, %xj : f32
      %dy = arith.subf %yi, %yj : f32
      %dx2 = arith.mulf %dx, %dx : f32
      %dy2 = arith.mulf %dy, %dy : f32
      %r2 = arith.addf %dx2, %dy2 : f32
      %eps = arith.constant 1.0e-06 : f32
      %r2e = arith.addf %r2, %eps : f32
      %dist = math.sqrt %r2e : f32
      %pen = arith.mulf %sl, %dist : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32)");
  replaceAll(text, "tensor<53xf32>", "tensor<2x53x2xf32>");
  replaceAll(text, "%bias", "%xy");
  return text;
}

// Same gradients as the CPU kernel within the fp32 tolerance of the file
// comment (the per-sample and per-head sums regroup nothing: each element's
// blocks are summed in the same ascending order as before, the other
// blocks' partials were zeros). B = 2 and H = 4, so a wrong slot (sample 0's
// slice for sample 1, b for h) changes the sums; sample 1 keeps 11 keys, so
// most of its coordinates get gradient only as queries.
TEST(CudaAttentionEmulated, PerSampleAndPerHeadCapturePartials) {
  const int d = 16;
  KernelRunner cuda(tspModule(d, true), KernelBackend::CudaEmulated);
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  // The slices are in use: xy's partial index is relative to its sample's
  // [53, 2] sub-tensor (106 elements), slope's to its head's one element.
  bool perSample = false, perHead = false;
  for (const auto &kernel : cuda.kernels()) {
    perSample |= kernel.source.find(" - b * 106)") != std::string::npos;
    perHead |= kernel.source.find(" - h * 1)") != std::string::npos;
  }
  EXPECT_TRUE(perSample);
  EXPECT_TRUE(perHead);

  std::vector<HostTensor> args = {
      HostTensor::floats(randomFloats(2 * 4 * 37 * d, 21, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 22, -2, 2)),
      HostTensor::floats(randomFloats(2 * 2 * 53 * d, 23)),
      HostTensor::floats({0.05f, 0.2f, 0.0f, 0.5f}),
      HostTensor::floats(randomFloats(2 * 53 * 2, 25)),
      HostTensor::ints({40, 11})};
  // The backward of the CPU forward's out and lse (see the file comment).
  KernelRunner cpuForward(tspModule(d, false), KernelBackend::Cpu);
  ASSERT_TRUE(cpuForward.ok()) << cpuForward.error();
  std::vector<HostTensor> out = cpuForward.run(args);
  ASSERT_EQ(out.size(), 2u);
  args.push_back(out[0]);
  args.push_back(out[1]);
  args.push_back(HostTensor::floats(randomFloats(2 * 4 * 37 * d, 24)));
  std::vector<HostTensor> bwd = expectSame(
      tspModule(d, true), args, 5e-5, {"dq", "dk", "dv", "dslope", "dxy"});
  ASSERT_EQ(bwd.size(), 5u);
  // Both samples' coordinates and the slopes get gradients (the comparison
  // would pass vacuously if both backends dropped them).
  for (int b = 0; b < 2; ++b) {
    double norm = 0.0;
    for (int e = 0; e < 106; ++e)
      norm += std::fabs(bwd[4].f[b * 106 + e]);
    EXPECT_GT(norm, 1e-3) << "sample " << b;
  }
  double slopeNorm = 0.0;
  for (float g : bwd[3].f)
    slopeNorm += std::fabs(g);
  EXPECT_GT(slopeNorm, 1e-3);
}

// No score or mask region (plain softmax attention: no block-skip test, no
// capture gradients), Dv != D, 2 query heads on 1 kv head, bf16 tensor
// cores. Forward and backward in one step here: the backward has no capture
// gradients to amplify a difference in out.
TEST(CudaAttentionEmulated, Bf16PlainDvNotD) {
  const std::string module = R"mlir(
func.func @step(%qf: tensor<1x2x20x48xf32>, %kf: tensor<1x1x33x48xf32>, %vf: tensor<1x1x33x32xf32>,
                %doutf: tensor<1x2x20x32xf32>)
    -> (tensor<1x2x20x32xf32>, tensor<1x2x20xf32>, tensor<1x2x20x48xf32>, tensor<1x1x33x48xf32>, tensor<1x1x33x32xf32>) {
  %q = kiln.convert %qf : tensor<1x2x20x48xf32> -> tensor<1x2x20x48xbf16>
  %k = kiln.convert %kf : tensor<1x1x33x48xf32> -> tensor<1x1x33x48xbf16>
  %v = kiln.convert %vf : tensor<1x1x33x32xf32> -> tensor<1x1x33x32xbf16>
  %dout = kiln.convert %doutf : tensor<1x2x20x32xf32> -> tensor<1x2x20x32xbf16>
  %out, %lse = kiln.attention %q, %k, %v {scale = 0.144 : f32}
      : (tensor<1x2x20x48xbf16>, tensor<1x1x33x48xbf16>, tensor<1x1x33x32xbf16>)
      -> (tensor<1x2x20x32xbf16>, tensor<1x2x20xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %out, %lse, %dout {scale = 0.144 : f32}
      : (tensor<1x2x20x48xbf16>, tensor<1x1x33x48xbf16>, tensor<1x1x33x32xbf16>, tensor<1x2x20x32xbf16>, tensor<1x2x20xf32>, tensor<1x2x20x32xbf16>)
      -> (tensor<1x2x20x48xbf16>, tensor<1x1x33x48xbf16>, tensor<1x1x33x32xbf16>)
  %out_r = kiln.convert %out : tensor<1x2x20x32xbf16> -> tensor<1x2x20x32xf32>
  %dq_r = kiln.convert %dq : tensor<1x2x20x48xbf16> -> tensor<1x2x20x48xf32>
  %dk_r = kiln.convert %dk : tensor<1x1x33x48xbf16> -> tensor<1x1x33x48xf32>
  %dv_r = kiln.convert %dv : tensor<1x1x33x32xbf16> -> tensor<1x1x33x32xf32>
  return %out_r, %lse, %dq_r, %dk_r, %dv_r
      : tensor<1x2x20x32xf32>, tensor<1x2x20xf32>, tensor<1x2x20x48xf32>, tensor<1x1x33x48xf32>, tensor<1x1x33x32xf32>
})mlir";
  std::vector<HostTensor> results = expectSame(
      module,
      {HostTensor::floats(randomFloats(2 * 20 * 48, 11, -2, 2)),
       HostTensor::floats(randomFloats(33 * 48, 12, -2, 2)),
       HostTensor::floats(randomFloats(33 * 32, 13)),
       HostTensor::floats(randomFloats(2 * 20 * 32, 14))},
      3e-2, {"out", "lse", "dq", "dk", "dv"});
  ASSERT_EQ(results.size(), 5u);
  for (float l : results[1].f)
    EXPECT_TRUE(std::isfinite(l)); // every row keeps every key
}

// The emitted kernels are deterministic by construction: no floating-point
// atomics anywhere in the source.
TEST(CudaAttentionEmulated, NoFloatAtomics) {
  KernelRunner cuda(attentionModule(80, "bf16", true), KernelBackend::CudaEmulated);
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  for (const auto &kernel : cuda.kernels()) {
    if (kernel.ops.find("attention") == std::string::npos)
      continue;
    EXPECT_EQ(kernel.source.find("atomic"), std::string::npos) << kernel.source;
  }
}

// Dropout. The module of attentionModule with dropout 0.2 and the RNG state
// [seed, offset] (tensor<2xi64>) as the last capture.
std::string dropoutModule(int d, const std::string &elem, bool backward) {
  std::string text = attentionModule(d, elem, backward);
  replaceAll(text, "%len: tensor<2xi32>", "%len: tensor<2xi32>, %rng: tensor<2xi64>");
  replaceAll(text, "captures(%slope, %bias, %len)", "captures(%slope, %bias, %len, %rng)");
  replaceAll(text, "{scale = 0.11 : f32}", "{scale = 0.11 : f32, dropout = 0.2 : f32}");
  replaceAll(text, "%c2: tensor<2xi32>)", "%c2: tensor<2xi32>, %crng: tensor<2xi64>)");
  replaceAll(text, "tensor<53xf32>, tensor<2xi32>)", "tensor<53xf32>, tensor<2xi32>, tensor<2xi64>)");
  return text;
}

// The i64 [seed, offset] as the four little-endian i32 words KernelRunner
// hands to the kernels (HostTensor has no i64 storage; only the bytes count).
HostTensor rngState(uint64_t seed, uint64_t offset) {
  return HostTensor::ints({static_cast<int32_t>(seed & 0xffffffffu),
                           static_cast<int32_t>(seed >> 32),
                           static_cast<int32_t>(offset & 0xffffffffu),
                           static_cast<int32_t>(offset >> 32)});
}

std::vector<HostTensor> dropoutArgs(int d, uint64_t offset) {
  return {HostTensor::floats(randomFloats(2 * 4 * 37 * d, 1, -2, 2)),
          HostTensor::floats(randomFloats(2 * 2 * 53 * d, 2, -2, 2)),
          HostTensor::floats(randomFloats(2 * 2 * 53 * d, 3)),
          HostTensor::floats({0.05f, 0.2f, 0.0f, 0.5f}),
          HostTensor::floats(randomFloats(53, 5)),
          HostTensor::ints({40, 11}),
          rngState(0x1234567890ull, offset)};
}

// CUDA equals CPU with dropout: the kernels draw the same Philox mask (same
// tolerances as without dropout, see the file comment), forward and the
// backward of the CPU forward.
void expectDropoutMatches(int d, const std::string &elem, double tolerance) {
  std::vector<HostTensor> args = dropoutArgs(d, 5);
  expectSame(dropoutModule(d, elem, false), args, tolerance, {"out", "lse"});
  KernelRunner cpuForward(dropoutModule(d, elem, false), KernelBackend::Cpu);
  ASSERT_TRUE(cpuForward.ok()) << cpuForward.error();
  std::vector<HostTensor> cpuOut = cpuForward.run(args);
  args.push_back(cpuOut[0]);
  args.push_back(cpuOut[1]);
  args.push_back(HostTensor::floats(randomFloats(2 * 4 * 37 * d, 4)));
  expectSame(dropoutModule(d, elem, true), args, tolerance,
             {"dq", "dk", "dv", "dslope", "dbias"});
}

TEST(CudaAttentionEmulated, DropoutFp32) { expectDropoutMatches(80, "f32", 5e-5); }

TEST(CudaAttentionEmulated, DropoutBf16TensorCores) {
  expectDropoutMatches(80, "bf16", 3e-2);
}

// The CPU kernel's mask depends on the micro-step offset only through the
// RNG state: the same offset gives the same bits, another offset another
// output; lse never depends on it (dropout acts after the softmax). Dropout
// changes out (else the tests above would pass with dropout ignored).
TEST(CudaAttentionEmulated, DropoutMaskFollowsTheStep) {
  KernelRunner withDrop(dropoutModule(80, "f32", false), KernelBackend::Cpu);
  KernelRunner plain(attentionModule(80, "f32", false), KernelBackend::Cpu);
  ASSERT_TRUE(withDrop.ok()) << withDrop.error();
  ASSERT_TRUE(plain.ok()) << plain.error();
  std::vector<HostTensor> a = withDrop.run(dropoutArgs(80, 5));
  std::vector<HostTensor> again = withDrop.run(dropoutArgs(80, 5));
  std::vector<HostTensor> next = withDrop.run(dropoutArgs(80, 6));
  std::vector<HostTensor> plainArgs = dropoutArgs(80, 5);
  plainArgs.pop_back();
  std::vector<HostTensor> none = plain.run(plainArgs);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(next.size(), 2u);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(a[0].f, again[0].f);
  EXPECT_NE(a[0].f, next[0].f);
  EXPECT_NE(a[0].f, none[0].f);
  EXPECT_EQ(a[1].f, none[1].f); // -inf == -inf for the keyless rows
  EXPECT_EQ(next[1].f, none[1].f);
  // One and two threads: the same bits (each element has its own counter).
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<HostTensor> one = withDrop.run(dropoutArgs(80, 5));
  omp_set_num_threads(2);
  std::vector<HostTensor> two = withDrop.run(dropoutArgs(80, 5));
  omp_set_num_threads(threads);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(one[0].f, a[0].f);
  EXPECT_EQ(two[0].f, a[0].f);
}

} // namespace
