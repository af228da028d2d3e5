//===- CudaEmulationTest.cpp - CUDA kernels against the CPU kernels -------===//
//
// Runs the CUDA kernel of every op kind on the host (CudaHostEmulation.h:
// one host thread per CUDA thread, real barriers and warp shuffles, the
// launch configuration the emitter chose) and compares every output with the
// CPU kernel's on the same random inputs. The CPU kernels are checked against
// independent references in KernelTest.cpp / OptimizerKernelTest.cpp, so
// agreement here checks the CUDA kernels' indexing, reductions, masking,
// skipped steps and last-block combination without a GPU. Shapes are small
// (emulation is slow) but cover several blocks per grid reduction and rows
// narrower and wider than a warp.
//
// Tolerance: |cuda - cpu| <= 2e-5 * max(1, |cpu|). The CPU sums in double,
// the GPU in float in another order: over the <= 5000 terms of these tests
// float rounding stays below ~1e-6 relative to the sum of magnitudes, and
// CUDA's tanhf/expf differ from the CPU prelude's by a few ulp. Integer
// outputs, NaN and infinities must match exactly.
//
//===----------------------------------------------------------------------===//

#include "EmulationChecks.h"
#include "KernelRunner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

using kiln::test::HostTensor;
using kiln::test::KernelBackend;
using kiln::test::KernelRunner;

using kiln::test::expectClose;
using kiln::test::randomFloats;

// Runs `module` on both backends and compares every result.
void expectSameResults(const std::string &module,
                       const std::vector<HostTensor> &args) {
  KernelRunner cpu(module, KernelBackend::Cpu);
  KernelRunner cuda(module, KernelBackend::CudaEmulated);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  std::vector<HostTensor> expected = cpu.run(args);
  std::vector<HostTensor> actual = cuda.run(args);
  ASSERT_EQ(actual.size(), expected.size()) << cuda.error();
  expectClose(actual, expected);
}

TEST(CudaKernelsEmulated, Pointwise) {
  expectSameResults(R"mlir(
    func.func @step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %row: tensor<8xf32>, %s: tensor<2x3x5xf32>)
        -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3x5xf32>, tensor<5xi32>, tensor<2x3xf32>) {
      %0 = kiln.broadcast %row dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
      %1 = kiln.add %a, %0 : tensor<4x8xf32>
      %2 = kiln.gelu %1 : tensor<4x8xf32>
      %3 = kiln.gelu_grad %a, %b : tensor<4x8xf32>
      %4 = kiln.div %a, %b : tensor<4x8xf32>
      %5 = kiln.causal_mask %s fill = 0xFF800000 : tensor<2x3x5xf32>
      %6 = kiln.iota : tensor<5xi32>
      %7 = kiln.constant dense<-1.5> : tensor<2x3xf32>
      return %2, %3, %4, %5, %6, %7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x3x5xf32>, tensor<5xi32>, tensor<2x3xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(32, 1, -3, 3)),
                     HostTensor::floats(randomFloats(32, 2, 0.5f, 2)),
                     HostTensor::floats(randomFloats(8, 3)),
                     HostTensor::floats(randomFloats(30, 4))});
}

// Element counts that are whole runs of 8 take 8 consecutive elements per
// thread (the plain reads and the stores on register copies): ops that
// compute with the element index itself (causal_mask, iota, a broadcast),
// bf16 and i32 buffers, and a count over several blocks' worth of runs.
TEST(CudaKernelsEmulated, LaneStagedPointwise) {
  expectSameResults(R"mlir(
    func.func @step(%s: tensor<2x4x8xf32>, %a: tensor<40x128xf32>, %row: tensor<128xf32>)
        -> (tensor<2x4x8xf32>, tensor<16xi32>, tensor<40x128xf32>, tensor<40x128xf32>) {
      %0 = kiln.causal_mask %s fill = 0xFF800000 : tensor<2x4x8xf32>
      %1 = kiln.iota : tensor<16xi32>
      %ab = kiln.convert %a : tensor<40x128xf32> -> tensor<40x128xbf16>
      %e = kiln.exp %ab : tensor<40x128xbf16>
      %ef = kiln.convert %e : tensor<40x128xbf16> -> tensor<40x128xf32>
      %rb = kiln.broadcast %row dims = [1] : tensor<128xf32> -> tensor<40x128xf32>
      %m = kiln.mul %a, %rb : tensor<40x128xf32>
      return %0, %1, %ef, %m : tensor<2x4x8xf32>, tensor<16xi32>, tensor<40x128xf32>, tensor<40x128xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(64, 11)),
                     HostTensor::floats(randomFloats(5120, 12, -3, 3)),
                     HostTensor::floats(randomFloats(128, 13))});
}

// Every loop shape of reduce_sum: one output over several blocks, trailing
// dims (a warp per output), leading dims and a middle dim (a thread per
// output); and a transpose.
// bf16 loads and stores come from the shared pointwise generator: the CUDA
// kernels widen and round exactly as the CPU ones do (same bits).
TEST(CudaKernelsEmulated, Bf16Pointwise) {
  expectSameResults(R"mlir(
    func.func @step(%a: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
      %ab = kiln.convert %a : tensor<64xf32> -> tensor<64xbf16>
      %bb = kiln.convert %b : tensor<64xf32> -> tensor<64xbf16>
      %s = kiln.mul %ab, %bb : tensor<64xbf16>
      %g = kiln.gelu %s : tensor<64xbf16>
      %sf = kiln.convert %s : tensor<64xbf16> -> tensor<64xf32>
      %gf = kiln.convert %g : tensor<64xbf16> -> tensor<64xf32>
      return %sf, %gf : tensor<64xf32>, tensor<64xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(64, 7, -3, 3)),
                     HostTensor::floats(randomFloats(64, 8, -3, 3))});
}

TEST(CudaKernelsEmulated, ReductionsAndTranspose) {
  expectSameResults(R"mlir(
    func.func @step(%a: tensor<2x3x70xf32>, %big: tensor<700xf32>)
        -> (tensor<f32>, tensor<2x3xf32>, tensor<70xf32>, tensor<2x70xf32>, tensor<70x2x3xf32>) {
      %0 = kiln.reduce_sum %big dims = [0] : tensor<700xf32> -> tensor<f32>
      %1 = kiln.reduce_sum %a dims = [2] : tensor<2x3x70xf32> -> tensor<2x3xf32>
      %2 = kiln.reduce_sum %a dims = [0, 1] : tensor<2x3x70xf32> -> tensor<70xf32>
      %3 = kiln.reduce_sum %a dims = [1] : tensor<2x3x70xf32> -> tensor<2x70xf32>
      %4 = kiln.transpose %a permutation = [2, 0, 1] : tensor<2x3x70xf32> -> tensor<70x2x3xf32>
      return %0, %1, %2, %3, %4 : tensor<f32>, tensor<2x3xf32>, tensor<70xf32>, tensor<2x70xf32>, tensor<70x2x3xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(420, 5)),
                     HostTensor::floats(randomFloats(700, 6))});
}

// Transposes that keep the innermost dim (q, k, v's head split) move 16
// bytes at a time: f32 (4 per chunk) and bf16 (8), against the CPU's
// element loops, same bits.
TEST(CudaKernelsEmulated, HeadSplitTransposeChunks) {
  expectSameResults(R"mlir(
    func.func @step(%a: tensor<2x5x3x8xf32>) -> (tensor<2x3x5x8xf32>, tensor<3x2x5x8xf32>) {
      %0 = kiln.transpose %a permutation = [0, 2, 1, 3] : tensor<2x5x3x8xf32> -> tensor<2x3x5x8xf32>
      %ab = kiln.convert %a : tensor<2x5x3x8xf32> -> tensor<2x5x3x8xbf16>
      %1 = kiln.transpose %ab permutation = [2, 0, 1, 3] : tensor<2x5x3x8xbf16> -> tensor<3x2x5x8xbf16>
      %2 = kiln.convert %1 : tensor<3x2x5x8xbf16> -> tensor<3x2x5x8xf32>
      return %0, %2 : tensor<2x3x5x8xf32>, tensor<3x2x5x8xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(240, 13, -3, 3))});
}

// Out-of-range indices gather zeros and scatter nothing; repeated indices
// accumulate.
TEST(CudaKernelsEmulated, EmbeddingAndGrad) {
  expectSameResults(R"mlir(
    func.func @step(%table: tensor<10x70xf32>, %idx: tensor<2x6xi32>, %g: tensor<2x6x70xf32>)
        -> (tensor<2x6x70xf32>, tensor<10x70xf32>) {
      %0 = kiln.embedding %table, %idx : tensor<10x70xf32>, tensor<2x6xi32> -> tensor<2x6x70xf32>
      %1 = kiln.embedding_grad %idx, %g : tensor<2x6xi32>, tensor<2x6x70xf32> -> tensor<10x70xf32>
      return %0, %1 : tensor<2x6x70xf32>, tensor<10x70xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(700, 7)),
                     HostTensor::ints({3, 0, 9, 3, -1, 10, 3, 7, 7, 0, 1, 2}),
                     HostTensor::floats(randomFloats(840, 8))});
}

// embedding_grad over 4500 indices (three tiles of 2048, the last partial)
// into 24 rows of 40 (24 blocks of one row each: the emulation runs every
// thread of every block): a hot row hit by every seventh index,
// out-of-range indices (-1, 24) that scatter nothing, rows never hit
// (zeros). Each element sums its rows in index order, as the CPU does: the
// same bits.
TEST(CudaKernelsEmulated, EmbeddingGradAcrossTiles) {
  std::vector<int32_t> idx(4500);
  for (int i = 0; i < 4500; ++i)
    idx[i] = i % 7 == 0 ? 5 : i % 11 == 0 ? (i % 2 ? -1 : 24) : (i * 37) % 20;
  const std::string module = R"mlir(
    func.func @step(%idx: tensor<4500xi32>, %g: tensor<4500x40xf32>) -> tensor<24x40xf32> {
      %0 = kiln.embedding_grad %idx, %g : tensor<4500xi32>, tensor<4500x40xf32> -> tensor<24x40xf32>
      return %0 : tensor<24x40xf32>
    })mlir";
  KernelRunner cpu(module, KernelBackend::Cpu);
  KernelRunner cuda(module, KernelBackend::CudaEmulated);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  std::vector<HostTensor> args = {HostTensor::ints(idx),
                                  HostTensor::floats(randomFloats(4500 * 40, 17))};
  std::vector<HostTensor> expected = cpu.run(args), actual = cuda.run(args);
  ASSERT_EQ(actual.size(), 1u);
  ASSERT_EQ(expected.size(), 1u);
  EXPECT_EQ(actual[0].f, expected[0].f);
  // Rows 20..23 are never hit: zero, though the arena held other values.
  for (int e = 20 * 40; e < 24 * 40; ++e)
    ASSERT_EQ(actual[0].f[e], 0.0f) << e;
  EXPECT_NE(actual[0].f[5 * 40], 0.0f);
}

TEST(CudaKernelsEmulated, LayerNormAndGrad) {
  expectSameResults(R"mlir(
    func.func @step(%x: tensor<2x3x80xf32>, %w: tensor<80xf32>, %b: tensor<80xf32>, %dy: tensor<2x3x80xf32>) -> (tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>) {
      %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
          : (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>)
          -> (tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
      %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %mean, %rstd, %dy
          : (tensor<2x3x80xf32>, tensor<80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>)
          -> (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>)
      return %y, %mean, %rstd, %dx, %dw, %db : tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(480, 9, -1, 3)),
                     HostTensor::floats(randomFloats(80, 10)),
                     HostTensor::floats(randomFloats(80, 11)),
                     HostTensor::floats(randomFloats(480, 12))});
}

// The launch in chunks of rows (at least 4: ceil(301 / 4) = 76 rows, the
// last chunk 73), each chunk's row blocks then its column blocks, whose
// partials the last block of each 32-column tile adds in chunk order; the
// last tile only partly used: RMS norm, [301, 40].
TEST(CudaKernelsEmulated, NormGradColumnChunks) {
  expectSameResults(R"mlir(
    func.func @step(%x: tensor<301x40xf32>, %w: tensor<40xf32>, %dy: tensor<301x40xf32>) -> (tensor<301x40xf32>, tensor<301xf32>, tensor<301x40xf32>, tensor<40xf32>) {
      %y, %rstd = kiln.rms_norm %x, %w : (tensor<301x40xf32>, tensor<40xf32>) -> (tensor<301x40xf32>, tensor<301xf32>)
      %dx, %dw = kiln.rms_norm_grad %x, %w, %rstd, %dy
          : (tensor<301x40xf32>, tensor<40xf32>, tensor<301xf32>, tensor<301x40xf32>)
          -> (tensor<301x40xf32>, tensor<40xf32>)
      return %y, %rstd, %dx, %dw : tensor<301x40xf32>, tensor<301xf32>, tensor<301x40xf32>, tensor<40xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(301 * 40, 30, -1, 3)),
                     HostTensor::floats(randomFloats(40, 31)),
                     HostTensor::floats(randomFloats(301 * 40, 32))});
}

// A causally masked softmax (the first row has one unmasked entry) and a
// fully masked row (all -inf: zeros), then the backward.
TEST(CudaKernelsEmulated, SoftmaxAndGrad) {
  std::vector<float> x = randomFloats(2 * 3 * 40, 13, -4, 4);
  for (int c = 0; c < 40; ++c)
    x[40 + c] = -INFINITY;
  expectSameResults(R"mlir(
    func.func @step(%x: tensor<2x3x40xf32>, %dy: tensor<2x3x40xf32>) -> (tensor<2x3x40xf32>, tensor<2x3x40xf32>) {
      %m = kiln.causal_mask %x fill = 0xFF800000 : tensor<2x3x40xf32>
      %p = kiln.softmax %m : tensor<2x3x40xf32>
      %d = kiln.softmax_grad %p, %dy : tensor<2x3x40xf32>
      return %p, %d : tensor<2x3x40xf32>, tensor<2x3x40xf32>
    })mlir",
                    {HostTensor::floats(x),
                     HostTensor::floats(randomFloats(240, 14))});
}

// 8 rows (8 blocks combined by the last one), one target out of range.
TEST(CudaKernelsEmulated, CrossEntropyAndGrad) {
  expectSameResults(R"mlir(
    func.func @step(%logits: tensor<2x4x33xf32>, %t: tensor<2x4xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x4x33xf32>) {
      %0 = kiln.cross_entropy %logits, %t : tensor<2x4x33xf32>, tensor<2x4xi32>
      %1 = kiln.cross_entropy_grad %logits, %t, %g : tensor<2x4x33xf32>, tensor<2x4xi32>
      return %0, %1 : tensor<f32>, tensor<2x4x33xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(264, 15, -5, 5)),
                     HostTensor::ints({0, 32, 5, -1, 7, 7, 12, 1}),
                     HostTensor::floats({0.75f})});
}

// Rows wider than 8192 (a vocabulary's logits) get 1024-thread blocks.
// Rows of whole runs of 8 columns are read 8 at a time (and the bf16
// gradient written so), with the padded classes (valid_classes = 50 of 64)
// left out of the softmax and given gradient 0, and a target among them
// ignored.
TEST(CudaKernelsEmulated, CrossEntropyPaddedClassesInRuns) {
  expectSameResults(R"mlir(
    func.func @step(%logits: tensor<3x64xf32>, %t: tensor<3xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<3x64xf32>) {
      %0 = kiln.cross_entropy %logits, %t {valid_classes = 50 : i64} : tensor<3x64xf32>, tensor<3xi32>
      %1 = kiln.cross_entropy_grad %logits, %t, %g {valid_classes = 50 : i64}
          : tensor<3x64xf32>, tensor<3xi32> -> tensor<3x64xbf16>
      %2 = kiln.convert %1 : tensor<3x64xbf16> -> tensor<3x64xf32>
      return %0, %2 : tensor<f32>, tensor<3x64xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(192, 34, -5, 5)),
                     HostTensor::ints({49, 3, 55}),
                     HostTensor::floats({0.5f})});
}

// The loss and gradient of [2, 4096] logits: 256 threads a row, two runs of
// 8 columns each.
const char *kCrossEntropy2x4096 = R"mlir(
  func.func @step(%logits: tensor<2x4096xf32>, %t: tensor<2xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x4096xf32>) {
    %0 = kiln.cross_entropy %logits, %t : tensor<2x4096xf32>, tensor<2xi32>
    %1 = kiln.cross_entropy_grad %logits, %t, %g : tensor<2x4096xf32>, tensor<2xi32>
    return %0, %1 : tensor<f32>, tensor<2x4096xf32>
  })mlir";

// -inf logits (a masked class) and a thread's runs of 8 (rows of 4096: 256
// threads, each thread's runs at columns 8 k and 2048 + 8 k): in row 0 the
// first thread's first run is all -inf, so its max stays -inf until its
// second run; in row 1 -inf sits among finite values and a large logit in
// thread 0's second run rescales the sum it kept from its first.
TEST(CudaKernelsEmulated, CrossEntropyRunsWithInfiniteLogits) {
  const int columns = 4096;
  std::vector<float> logits = randomFloats(2 * columns, 35, -4, 4);
  for (int c = 0; c < 8; ++c)
    logits[c] = -INFINITY;
  for (int c = columns; c < 2 * columns; c += 3)
    logits[c] = -INFINITY;
  logits[columns + 2048 + 5] = 30.0f;
  expectSameResults(kCrossEntropy2x4096,
                    {HostTensor::floats(logits), HostTensor::ints({9, 2048 + 5}),
                     HostTensor::floats({1.0f})});
}

// A NaN logit makes its row's loss and gradient NaN, as on the CPU, even
// where the thread holding it has seen nothing but -inf and NaN: row 0's
// first run all NaN, then finite runs; row 1's first run a NaN and seven -inf.
TEST(CudaKernelsEmulated, CrossEntropyRunsKeepNaN) {
  const int columns = 4096;
  std::vector<float> logits = randomFloats(2 * columns, 36, -4, 4);
  for (int c = 0; c < 8; ++c) {
    logits[c] = NAN;
    logits[columns + c] = c == 0 ? NAN : -INFINITY;
  }
  expectSameResults(kCrossEntropy2x4096,
                    {HostTensor::floats(logits), HostTensor::ints({100, 2000}),
                     HostTensor::floats({1.0f})});
}

// bf16 logits (precision = bf16 rounds the head GEMM's result): both kernels
// widen each logit as they load it, one at a time where a row is not whole
// runs of 8 (33 columns), 16 bytes at a time where it is (64, with padded
// classes); the gradient written in bf16 too.
TEST(CudaKernelsEmulated, CrossEntropyBf16Logits) {
  expectSameResults(R"mlir(
    func.func @step(%a: tensor<3x33xf32>, %ta: tensor<3xi32>, %b: tensor<3x64xf32>, %tb: tensor<3xi32>, %g: tensor<f32>)
        -> (tensor<f32>, tensor<3x33xf32>, tensor<f32>, tensor<f32>, tensor<3x64xf32>) {
      %ah = kiln.convert %a : tensor<3x33xf32> -> tensor<3x33xbf16>
      %la = kiln.cross_entropy %ah, %ta : tensor<3x33xbf16>, tensor<3xi32>
      %da = kiln.cross_entropy_grad %ah, %ta, %g : tensor<3x33xbf16>, tensor<3xi32> -> tensor<3x33xf32>
      %bh = kiln.convert %b : tensor<3x64xf32> -> tensor<3x64xbf16>
      %lb = kiln.cross_entropy %bh, %tb {valid_classes = 50 : i64} : tensor<3x64xbf16>, tensor<3xi32>
      %db, %lb2 = kiln.cross_entropy_grad %bh, %tb, %g with loss tensor<f32> {valid_classes = 50 : i64}
          : tensor<3x64xbf16>, tensor<3xi32>
      %dbw = kiln.convert %db : tensor<3x64xbf16> -> tensor<3x64xf32>
      return %la, %da, %lb, %lb2, %dbw : tensor<f32>, tensor<3x33xf32>, tensor<f32>, tensor<f32>, tensor<3x64xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(99, 40, -5, 5)),
                     HostTensor::ints({0, 32, 17}),
                     HostTensor::floats(randomFloats(192, 41, -5, 5)),
                     HostTensor::ints({49, 3, 55}),
                     HostTensor::floats({0.5f})});
}

// cross_entropy_grad `with loss` (the fused classifier's chunks): the
// gradient as without it, and the loss of cross_entropy's kernel with its
// bits on either backend (same row statistics and sums), also with an
// ignored target and padded classes; CUDA against the CPU as above.
TEST(CudaKernelsEmulated, CrossEntropyGradWithLoss) {
  const std::string module = R"mlir(
    func.func @step(%logits: tensor<5x64xf32>, %t: tensor<5xi32>, %g: tensor<f32>)
        -> (tensor<f32>, tensor<f32>, tensor<5x64xf32>, tensor<5x64xf32>) {
      %l = kiln.cross_entropy %logits, %t {valid_classes = 60 : i64} : tensor<5x64xf32>, tensor<5xi32>
      %d, %lg = kiln.cross_entropy_grad %logits, %t, %g with loss tensor<f32> {valid_classes = 60 : i64}
          : tensor<5x64xf32>, tensor<5xi32>
      %d0 = kiln.cross_entropy_grad %logits, %t, %g {valid_classes = 60 : i64} : tensor<5x64xf32>, tensor<5xi32>
      return %l, %lg, %d, %d0 : tensor<f32>, tensor<f32>, tensor<5x64xf32>, tensor<5x64xf32>
    })mlir";
  const std::vector<HostTensor> args = {HostTensor::floats(randomFloats(320, 35, -5, 5)),
                                        HostTensor::ints({0, 59, 61, 7, 30}),
                                        HostTensor::floats({0.5f})};
  expectSameResults(module, args);
  for (KernelBackend backend : {KernelBackend::Cpu, KernelBackend::CudaEmulated}) {
    KernelRunner runner(module, backend);
    ASSERT_TRUE(runner.ok()) << runner.error();
    std::vector<HostTensor> out = runner.run(args);
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(out[1].f[0], out[0].f[0]); // bit for bit
    EXPECT_EQ(out[2].f, out[3].f);
  }
}

TEST(CudaKernelsEmulated, CrossEntropyWideRows) {
  expectSameResults(R"mlir(
    func.func @step(%logits: tensor<2x9000xf32>, %t: tensor<2xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x9000xf32>) {
      %0 = kiln.cross_entropy %logits, %t : tensor<2x9000xf32>, tensor<2xi32>
      %1 = kiln.cross_entropy_grad %logits, %t, %g : tensor<2x9000xf32>, tensor<2xi32>
      return %0, %1 : tensor<f32>, tensor<2x9000xf32>
    })mlir",
                    {HostTensor::floats(randomFloats(18000, 33, -5, 5)),
                     HostTensor::ints({8999, 17}),
                     HostTensor::floats({1.0f})});
}

const char *kOptimizerModule = R"mlir(
  func.func @step(%p: tensor<5000xf32>, %g: tensor<5000xf32>, %m: tensor<5000xf32>,
                  %v: tensor<5000xf32>, %lr: tensor<f32>, %t: tensor<f32>, %n: tensor<f32>,
                  %l: tensor<f32>, %q: tensor<5000xf32>, %b: tensor<5000xf32>, %acc: tensor<5000xf32>)
      -> (tensor<f32>, tensor<5000xf32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>,
          tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>, tensor<5000xf32>) {
    %s = kiln.grad_scale %n, %l {max_norm = 1.0 : f32}
    %p1, %m1, %v1, %du, %pp = kiln.adam %p, %g, %m, %v, %lr, %t, %s
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
         epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<5000xf32>
    %q1, %b1, %du2, %pp2 = kiln.sgd_momentum %q, %g, %b, %lr, %t, %s
        {dampening = 0.0 : f32, momentum = 0.9 : f32, nesterov = true,
         weight_decay = 0.01 : f32} : tensor<5000xf32>
    %a1 = kiln.accumulate %acc, %g {scale = 0.25 : f32} : tensor<5000xf32>
    return %s, %p1, %m1, %v1, %du, %pp, %q1, %b1, %du2, %pp2, %a1 : tensor<f32>, tensor<5000xf32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>, tensor<5000xf32>
  })mlir";

std::vector<HostTensor> optimizerArgs(float gradNorm) {
  return {HostTensor::floats(randomFloats(5000, 16)),
          HostTensor::floats(randomFloats(5000, 17)),
          HostTensor::floats(randomFloats(5000, 18, -0.1f, 0.1f)),
          HostTensor::floats(randomFloats(5000, 19, 0.0f, 0.01f)),
          HostTensor::floats({1e-3f}),
          HostTensor::floats({3.0f}),
          HostTensor::floats({gradNorm}),
          HostTensor::floats({2.5f}),
          HostTensor::floats(randomFloats(5000, 20)),
          HostTensor::floats(randomFloats(5000, 21)),
          HostTensor::floats(randomFloats(5000, 22))};
}

// 5000 parameters: 20 blocks whose norm partials the last block combines.
TEST(CudaKernelsEmulated, OptimizerUpdates) {
  expectSameResults(kOptimizerModule, optimizerArgs(4.0f));
}

// A non-finite gradient norm: the scale is NaN and every update is skipped.
TEST(CudaKernelsEmulated, OptimizerSkipsNonFiniteSteps) {
  expectSameResults(kOptimizerModule, optimizerArgs(INFINITY));
}

} // namespace
