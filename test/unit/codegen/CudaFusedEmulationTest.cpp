//===- CudaFusedEmulationTest.cpp - Fused CUDA kernels against the CPU ----===//
//
// The kiln.fusion kinds that run as one CUDA kernel besides pointwise
// groups: a row op with its pointwise prologue and epilogue, and several
// optimizer updates in one launch. Each test writes the unfused ops, lets
// --kiln-fusion group them (as kilnc does), checks that the expected
// regions formed (the kernel count), runs the fused CUDA kernels on the host
// (CudaHostEmulation.h: one host thread per CUDA thread, real barriers) and
// compares every result with the CPU kernels of the *unfused* ops, an
// independent path (no fused code on that side); the CPU's fused kernels
// are compared with the same reference.
//
// Tolerance: |got - want| <= 2e-5 * max(1, |want|), as in
// CudaEmulationTest.cpp: the CPU row kernels sum in double, the GPU ones in
// float in another order (< ~1e-6 relative over these <= 5000-term sums),
// and CUDA's expf/tanhf differ from the CPU prelude's by a few ulp. Integer
// results, NaN and infinities must match exactly.
//
//===----------------------------------------------------------------------===//

#include "EmulationChecks.h"
#include "KernelRunner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

namespace {

using kiln::test::HostTensor;
using kiln::test::KernelBackend;
using kiln::test::KernelRunner;

using kiln::test::expectClose;
using kiln::test::randomFloats;

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// Fuses `module`, checks it became `fusedKernels` kernels (each group one
// kernel), runs the fused CUDA kernels (emulated) and the fused CPU kernels,
// and compares both with the unfused CPU kernels.
// `cudaSource`, when given, checks the text of the fused CUDA kernels.
void expectFusedMatchesUnfused(
    const std::string &module, const std::vector<HostTensor> &args,
    size_t fusedKernels,
    std::function<void(const std::string &)> cudaSource = nullptr) {
  KernelRunner reference(module, KernelBackend::Cpu);
  KernelRunner cuda(module, KernelBackend::CudaEmulated, /*fuse=*/true);
  KernelRunner cpu(module, KernelBackend::Cpu, /*fuse=*/true);
  ASSERT_TRUE(reference.ok()) << reference.error();
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  ASSERT_EQ(cuda.kernels().size(), fusedKernels);
  ASSERT_LT(cuda.kernels().size(), reference.kernels().size());
  if (cudaSource) {
    std::string text;
    for (const auto &kernel : cuda.kernels())
      text += kernel.source;
    cudaSource(text);
  }
  std::vector<HostTensor> expected = reference.run(args);
  {
    SCOPED_TRACE("CUDA fused");
    expectClose(cuda.run(args), expected);
  }
  {
    SCOPED_TRACE("CPU fused");
    expectClose(cpu.run(args), expected);
  }
}

// The residual add of a block feeding layer_norm (prologue; the sum is also
// a result, so the kernel writes it), and GELU on the normalized row
// (epilogue): one kernel.
TEST(CudaFusedKernelsEmulated, ResidualAddLayerNormGelu) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%x: tensor<2x3x80xf32>, %r: tensor<2x3x80xf32>, %bias: tensor<80xf32>,
                    %w: tensor<80xf32>, %b: tensor<80xf32>)
        -> (tensor<2x3x80xf32>, tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
      %s = kiln.add %x, %r : tensor<2x3x80xf32>
      %bb = kiln.broadcast %bias dims = [2] : tensor<80xf32> -> tensor<2x3x80xf32>
      %s2 = kiln.add %s, %bb : tensor<2x3x80xf32>
      %y, %mean, %rstd = kiln.layer_norm %s2, %w, %b {epsilon = 1.0e-05 : f32}
          : (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>)
          -> (tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
      %g = kiln.gelu %y : tensor<2x3x80xf32>
      return %s2, %g, %mean, %rstd : tensor<2x3x80xf32>, tensor<2x3x80xf32>, tensor<2x3xf32>, tensor<2x3xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(480, 1, -2, 2)),
                             HostTensor::floats(randomFloats(480, 2)),
                             HostTensor::floats(randomFloats(80, 3)),
                             HostTensor::floats(randomFloats(80, 4)),
                             HostTensor::floats(randomFloats(80, 5))},
                            1);
}

// Attention's scale and causal mask before softmax (prologue) and a scaling
// after it (epilogue); then the backward with its mask and scale after
// softmax_grad (epilogue). Row 1 is fully masked by its input (all -inf).
// Thirteen inputs summed by one pointwise kernel: too many buffers for
// register copies of 8 elements each, so the kernel keeps one element per
// thread (two inputs get the copies); the same sums either way.
TEST(CudaFusedKernelsEmulated, PointwiseOfManyBuffers) {
  std::vector<HostTensor> args;
  std::string params;
  for (int i = 0; i < 13; ++i) {
    params += std::string(i ? ", " : "") + "%x" + std::to_string(i) + ": tensor<4x64xf32>";
    args.push_back(HostTensor::floats(randomFloats(256, 40 + i)));
  }
  std::string many = "func.func @step(" + params + ") -> tensor<4x64xf32> {\n" +
                     "  %s0 = kiln.add %x0, %x0 : tensor<4x64xf32>\n";
  for (int i = 1; i < 13; ++i)
    many += "  %s" + std::to_string(i) + " = kiln.add %s" + std::to_string(i - 1) +
            ", %x" + std::to_string(i) + " : tensor<4x64xf32>\n";
  many += "  return %s12 : tensor<4x64xf32>\n}";
  expectFusedMatchesUnfused(many, args, 1);
  KernelRunner fused(many, KernelBackend::CudaEmulated, /*fuse=*/true);
  ASSERT_TRUE(fused.ok()) << fused.error();
  EXPECT_EQ(fused.kernels().front().source.find("kiln_load_lanes8"), std::string::npos);
  KernelRunner two("func.func @step(" + params + R"mlir() -> tensor<4x64xf32> {
      %s = kiln.add %x0, %x1 : tensor<4x64xf32>
      return %s : tensor<4x64xf32>
    })mlir",
                   KernelBackend::CudaEmulated);
  ASSERT_TRUE(two.ok()) << two.error();
  EXPECT_NE(two.kernels().front().source.find("kiln_load_lanes8"), std::string::npos);
}

// Two kernels: the two row kernels; --kiln-fusion folds the splat constants
// into them as literals (a splat constant is never a buffer).
TEST(CudaFusedKernelsEmulated, SoftmaxWithPrologueAndEpilogue) {
  std::vector<float> x = randomFloats(2 * 3 * 40, 6, -4, 4);
  for (int c = 0; c < 40; ++c)
    x[40 + c] = -INFINITY;
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%x: tensor<2x3x40xf32>, %dy: tensor<2x3x40xf32>)
        -> (tensor<2x3x40xf32>, tensor<2x3x40xf32>, tensor<2x3x40xf32>) {
      %c = kiln.constant dense<0.5> : tensor<2x3x40xf32>
      %d = kiln.div %x, %c : tensor<2x3x40xf32>
      %m = kiln.causal_mask %d fill = 0xFF800000 : tensor<2x3x40xf32>
      %p = kiln.softmax %m : tensor<2x3x40xf32>
      %k = kiln.constant dense<3.0> : tensor<2x3x40xf32>
      %e = kiln.mul %p, %k : tensor<2x3x40xf32>
      %g = kiln.softmax_grad %p, %dy : tensor<2x3x40xf32>
      %gm = kiln.causal_mask %g fill = 0x00000000 : tensor<2x3x40xf32>
      %c2 = kiln.constant dense<0.5> : tensor<2x3x40xf32>
      %gd = kiln.div %gm, %c2 : tensor<2x3x40xf32>
      return %p, %e, %gd : tensor<2x3x40xf32>, tensor<2x3x40xf32>, tensor<2x3x40xf32>
    })mlir",
                            {HostTensor::floats(x),
                             HostTensor::floats(randomFloats(240, 7))},
                            2);
}

// A bias added to the logits before cross_entropy and its gradient
// (prologue; the biased logits are a result of the first kernel, which the
// second reads), and a scaling of the gradient (epilogue). One target is out
// of range (zero loss and gradient for its row). Two kernels: the two row
// kernels, the epilogue's constant folded in as a literal (see above).
TEST(CudaFusedKernelsEmulated, CrossEntropyWithPrologue) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%logits: tensor<2x4x33xf32>, %bias: tensor<33xf32>, %t: tensor<2x4xi32>, %g: tensor<f32>)
        -> (tensor<f32>, tensor<2x4x33xf32>) {
      %bb = kiln.broadcast %bias dims = [2] : tensor<33xf32> -> tensor<2x4x33xf32>
      %l = kiln.add %logits, %bb : tensor<2x4x33xf32>
      %loss = kiln.cross_entropy %l, %t : tensor<2x4x33xf32>, tensor<2x4xi32>
      %dl = kiln.cross_entropy_grad %l, %t, %g : tensor<2x4x33xf32>, tensor<2x4xi32>
      %k = kiln.constant dense<0.25> : tensor<2x4x33xf32>
      %ds = kiln.mul %dl, %k : tensor<2x4x33xf32>
      return %loss, %ds : tensor<f32>, tensor<2x4x33xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(264, 8, -5, 5)),
                             HostTensor::floats(randomFloats(33, 9)),
                             HostTensor::ints({0, 32, 5, -1, 7, 7, 12, 1}),
                             HostTensor::floats({0.75f})},
                            2);
}

// The backward of a pre-LN block: the incoming gradient is the sum of the
// residual paths (prologue), the input gradient joins the residual stream
// (epilogue). The weight and bias sums run in other blocks than the rows and
// recompute the prologue's sum.
TEST(CudaFusedKernelsEmulated, LayerNormGradWithPrologueAndEpilogue) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%x: tensor<2x3x80xf32>, %w: tensor<80xf32>, %mean: tensor<2x3xf32>,
                    %rstd: tensor<2x3xf32>, %ga: tensor<2x3x80xf32>, %gb: tensor<2x3x80xf32>,
                    %gc: tensor<2x3x80xf32>, %res: tensor<2x3x80xf32>)
        -> (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>) {
      %g1 = kiln.add %ga, %gb : tensor<2x3x80xf32>
      %g2 = kiln.add %g1, %gc : tensor<2x3x80xf32>
      %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %mean, %rstd, %g2
          : (tensor<2x3x80xf32>, tensor<80xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x80xf32>)
          -> (tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>)
      %out = kiln.add %dx, %res : tensor<2x3x80xf32>
      return %out, %dw, %db : tensor<2x3x80xf32>, tensor<80xf32>, tensor<80xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(480, 10, -1, 3)),
                             HostTensor::floats(randomFloats(80, 11)),
                             HostTensor::floats(randomFloats(6, 12)),
                             HostTensor::floats(randomFloats(6, 13, 0.5f, 2)),
                             HostTensor::floats(randomFloats(480, 14)),
                             HostTensor::floats(randomFloats(480, 15)),
                             HostTensor::floats(randomFloats(480, 16)),
                             HostTensor::floats(randomFloats(480, 17))},
                            1);
}

// A Llama block's RMS norm (256 columns: 32 threads of 8 registers, none
// idle): the residual add of a bf16 branch (prologue; the sum is a result,
// so the kernel writes it) and the bf16 rounding of the normalized row
// (epilogue). The fp32 normalized row is read by the epilogue only: the
// kernel keeps it in registers and writes no buffer for it.
TEST(CudaFusedKernelsEmulated, RmsNormRowInRegistersWithBf16Epilogue) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%x: tensor<2x3x256xf32>, %h: tensor<2x3x256xf32>, %w: tensor<256xf32>)
        -> (tensor<2x3x256xf32>, tensor<2x3x256xf32>, tensor<2x3xf32>) {
      %hb = kiln.convert %h : tensor<2x3x256xf32> -> tensor<2x3x256xbf16>
      %hw = kiln.convert %hb : tensor<2x3x256xbf16> -> tensor<2x3x256xf32>
      %s = kiln.add %x, %hw : tensor<2x3x256xf32>
      %y, %rstd = kiln.rms_norm %s, %w {epsilon = 1.0e-05 : f32}
          : (tensor<2x3x256xf32>, tensor<256xf32>) -> (tensor<2x3x256xf32>, tensor<2x3xf32>)
      %yb = kiln.convert %y : tensor<2x3x256xf32> -> tensor<2x3x256xbf16>
      %yw = kiln.convert %yb : tensor<2x3x256xbf16> -> tensor<2x3x256xf32>
      return %s, %yw, %rstd : tensor<2x3x256xf32>, tensor<2x3x256xf32>, tensor<2x3xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(1536, 60, -2, 2)),
                             HostTensor::floats(randomFloats(1536, 61, -1, 1)),
                             HostTensor::floats(randomFloats(256, 62))},
                            2, [](const std::string &cuda) {
                              EXPECT_EQ(occurrences(cuda, "8 columns a thread in registers"), 1u);
                              // Written: the residual sum, the bf16-rounded row and rstd;
                              // not the fp32 normalized row.
                              EXPECT_EQ(occurrences(cuda, "float* out"), 3u) << cuda;
                              EXPECT_EQ(occurrences(cuda, "kiln_no_contract("), 1u);
                            });
}

// The RMS norm backward of a Llama-width row (2048 columns, 256 threads of
// 8 registers): two gradient paths summed (prologue), dx joining the
// residual gradient and its bf16 copy for the next GEMM (epilogue); dx
// itself stays in registers. The weight gradient's column blocks
// recompute the prologue.
TEST(CudaFusedKernelsEmulated, RmsNormGradRowInRegisters) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%x: tensor<3x2048xf32>, %w: tensor<2048xf32>, %rstd: tensor<3xf32>,
                    %ga: tensor<3x2048xf32>, %gb: tensor<3x2048xf32>, %res: tensor<3x2048xf32>)
        -> (tensor<3x2048xf32>, tensor<3x2048xf32>, tensor<2048xf32>) {
      %g = kiln.add %ga, %gb : tensor<3x2048xf32>
      %dx, %dw = kiln.rms_norm_grad %x, %w, %rstd, %g
          : (tensor<3x2048xf32>, tensor<2048xf32>, tensor<3xf32>, tensor<3x2048xf32>)
          -> (tensor<3x2048xf32>, tensor<2048xf32>)
      %o = kiln.add %dx, %res : tensor<3x2048xf32>
      %ob = kiln.convert %o : tensor<3x2048xf32> -> tensor<3x2048xbf16>
      %ow = kiln.convert %ob : tensor<3x2048xbf16> -> tensor<3x2048xf32>
      return %o, %ow, %dw : tensor<3x2048xf32>, tensor<3x2048xf32>, tensor<2048xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(6144, 63, -2, 2)),
                             HostTensor::floats(randomFloats(2048, 64)),
                             HostTensor::floats(randomFloats(3, 65, 0.5f, 2)),
                             HostTensor::floats(randomFloats(6144, 66)),
                             HostTensor::floats(randomFloats(6144, 67)),
                             HostTensor::floats(randomFloats(6144, 68))},
                            1, [](const std::string &cuda) {
                              EXPECT_EQ(occurrences(cuda, "8 columns a thread in registers"), 1u);
                              // Written: the prologue's sum (the norm reads it), the
                              // residual sum, its bf16-rounded copy and dw; not dx.
                              EXPECT_EQ(occurrences(cuda, "float* out"), 4u) << cuda;
                              EXPECT_EQ(occurrences(cuda, "the fused prologue, recomputed"), 1u);
                            });
}

// Rows of 70 columns (not whole runs of 8: one column per thread, rows
// reread from memory): the epilogues still read the norms' rows from
// registers. The forward's normalized row is also a result, so the kernel
// writes it as well.
TEST(CudaFusedKernelsEmulated, LayerNormColumnsWithElementEpilogues) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%x: tensor<4x70xf32>, %w: tensor<70xf32>, %b: tensor<70xf32>,
                    %dy: tensor<4x70xf32>, %res: tensor<4x70xf32>)
        -> (tensor<4x70xf32>, tensor<4x70xf32>, tensor<4x70xf32>, tensor<70xf32>, tensor<70xf32>) {
      %y, %mean, %rstd = kiln.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32}
          : (tensor<4x70xf32>, tensor<70xf32>, tensor<70xf32>)
          -> (tensor<4x70xf32>, tensor<4xf32>, tensor<4xf32>)
      %g = kiln.gelu %y : tensor<4x70xf32>
      %dx, %dw, %db = kiln.layer_norm_grad %x, %w, %mean, %rstd, %dy
          : (tensor<4x70xf32>, tensor<70xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x70xf32>)
          -> (tensor<4x70xf32>, tensor<70xf32>, tensor<70xf32>)
      %o = kiln.add %dx, %res : tensor<4x70xf32>
      return %y, %g, %o, %dw, %db : tensor<4x70xf32>, tensor<4x70xf32>, tensor<4x70xf32>, tensor<70xf32>, tensor<70xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(280, 69, -1, 3)),
                             HostTensor::floats(randomFloats(70, 70)),
                             HostTensor::floats(randomFloats(70, 71)),
                             HostTensor::floats(randomFloats(280, 72)),
                             HostTensor::floats(randomFloats(280, 73))},
                            2, [](const std::string &cuda) {
                              EXPECT_EQ(occurrences(cuda, "in registers"), 0u);
                              EXPECT_EQ(occurrences(cuda, "kiln_no_contract("), 2u);
                              // Written: y, mean, rstd, gelu(y); dw, db and the sum,
                              // not dx.
                              EXPECT_EQ(occurrences(cuda, "float* out"), 7u) << cuda;
                            });
}

// A product summed over the trailing dim: the warp-per-row reduce_sum with
// the product as its prologue (rows of 70: lanes wrap around the warp).
TEST(CudaFusedKernelsEmulated, TrailingReduceSumWithPrologue) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%a: tensor<2x3x70xf32>, %b: tensor<2x3x70xf32>) -> tensor<2x3xf32> {
      %p = kiln.mul %a, %b : tensor<2x3x70xf32>
      %s = kiln.reduce_sum %p dims = [2] : tensor<2x3x70xf32> -> tensor<2x3xf32>
      return %s : tensor<2x3xf32>
    })mlir",
                            {HostTensor::floats(randomFloats(420, 18)),
                             HostTensor::floats(randomFloats(420, 19))},
                            1);
}

// A whole-tensor sum of squares of a value the kernel also stores (the
// kiln.fusion "sum" of an activation-RMS metric): 8 elements per thread for
// [40, 64], one per thread for [3, 5]; the same sums as the CPU's.
TEST(CudaFusedKernelsEmulated, WholeTensorSumStoringItsOperand) {
  for (const char *shape : {"40x64", "3x5"}) {
    SCOPED_TRACE(shape);
    const int elements = std::string(shape) == "40x64" ? 2560 : 15;
    std::string t = std::string("tensor<") + shape + "xf32>";
    std::string module = "func.func @step(%a: " + t + ", %b: " + t + ") -> (" + t +
                         ", tensor<f32>) {\n"
                         "  %s = kiln.add %a, %b : " + t + "\n"
                         "  %q = kiln.mul %s, %s : " + t + "\n"
                         "  %r = kiln.reduce_sum %q dims = [0, 1] : " + t +
                         " -> tensor<f32>\n"
                         "  return %s, %r : " + t + ", tensor<f32>\n}";
    expectFusedMatchesUnfused(module,
                              {HostTensor::floats(randomFloats(elements, 60)),
                               HostTensor::floats(randomFloats(elements, 61))},
                              1);
    KernelRunner fused(module, KernelBackend::CudaEmulated, /*fuse=*/true);
    ASSERT_TRUE(fused.ok()) << fused.error();
    EXPECT_EQ(fused.kernels().front().source.find("kiln_load_lanes8") != std::string::npos,
              elements % 8 == 0);
  }
}

// The global norm's sums of squares of four arguments (5000 elements in
// runs of 8 over several blocks; 300 and 7, one element per thread; and an
// exp instead of a square: a second formula) share one multi-tensor
// kernel, a segment of the grid each; the CPU runs them one after the other.
TEST(CudaFusedKernelsEmulated, WholeTensorSumsOfArgumentsInOneLaunch) {
  expectFusedMatchesUnfused(R"mlir(
    func.func @step(%a: tensor<5000xf32>, %b: tensor<4x75xf32>, %c: tensor<7xf32>,
                    %d: tensor<40x64xf32>)
        -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
      %qa = kiln.mul %a, %a : tensor<5000xf32>
      %sa = kiln.reduce_sum %qa dims = [0] : tensor<5000xf32> -> tensor<f32>
      %qb = kiln.mul %b, %b : tensor<4x75xf32>
      %sb = kiln.reduce_sum %qb dims = [0, 1] : tensor<4x75xf32> -> tensor<f32>
      %qc = kiln.mul %c, %c : tensor<7xf32>
      %sc = kiln.reduce_sum %qc dims = [0] : tensor<7xf32> -> tensor<f32>
      %ed = kiln.exp %d : tensor<40x64xf32>
      %sd = kiln.reduce_sum %ed dims = [0, 1] : tensor<40x64xf32> -> tensor<f32>
      return %sa, %sb, %sc, %sd : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
    })mlir",
                            {HostTensor::floats(randomFloats(5000, 74)),
                             HostTensor::floats(randomFloats(300, 75)),
                             HostTensor::floats(randomFloats(7, 76)),
                             HostTensor::floats(randomFloats(2560, 77))},
                            1, [](const std::string &cuda) {
                              EXPECT_EQ(occurrences(cuda, "4 whole-tensor sums in one launch"), 1u);
                              // Two formulas (squares in runs of 8 or one element per
                              // thread; exp in runs of 8).
                              EXPECT_EQ(occurrences(cuda, "    case "), 3u) << cuda;
                            });
}

// Three AdamW updates of different sizes (20, 2 and 1 blocks; weight decay
// on one only) after the clipping scale: the updates become one launch.
const char *kMultiTensorAdamW = R"mlir(
  func.func @step(%p0: tensor<5000xf32>, %g0: tensor<5000xf32>, %m0: tensor<5000xf32>, %v0: tensor<5000xf32>,
                  %p1: tensor<4x75xf32>, %g1: tensor<4x75xf32>, %m1: tensor<4x75xf32>, %v1: tensor<4x75xf32>,
                  %p2: tensor<7xf32>, %g2: tensor<7xf32>, %m2: tensor<7xf32>, %v2: tensor<7xf32>,
                  %lr: tensor<f32>, %t: tensor<f32>, %n: tensor<f32>, %l: tensor<f32>)
      -> (tensor<5000xf32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>,
          tensor<4x75xf32>, tensor<4x75xf32>, tensor<4x75xf32>, tensor<f32>, tensor<f32>,
          tensor<7xf32>, tensor<7xf32>, tensor<7xf32>, tensor<f32>, tensor<f32>) {
    %s = kiln.grad_scale %n, %l {max_norm = 1.0 : f32}
    %a0, %am0, %av0, %du0, %pp0 = kiln.adam %p0, %g0, %m0, %v0, %lr, %t, %s
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
         epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<5000xf32>
    %a1, %am1, %av1, %du1, %pp1 = kiln.adam %p1, %g1, %m1, %v1, %lr, %t, %s
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
         epsilon = 1.0e-08 : f32, weight_decay = 0.0 : f32} : tensor<4x75xf32>
    %a2, %am2, %av2, %du2, %pp2 = kiln.adam %p2, %g2, %m2, %v2, %lr, %t, %s
        {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true,
         epsilon = 1.0e-08 : f32, weight_decay = 0.0 : f32} : tensor<7xf32>
    return %a0, %am0, %av0, %du0, %pp0, %a1, %am1, %av1, %du1, %pp1, %a2, %am2, %av2, %du2, %pp2
        : tensor<5000xf32>, tensor<5000xf32>, tensor<5000xf32>, tensor<f32>, tensor<f32>,
          tensor<4x75xf32>, tensor<4x75xf32>, tensor<4x75xf32>, tensor<f32>, tensor<f32>,
          tensor<7xf32>, tensor<7xf32>, tensor<7xf32>, tensor<f32>, tensor<f32>
  })mlir";

std::vector<HostTensor> adamWArgs(float gradNorm) {
  std::vector<HostTensor> args;
  unsigned seed = 20;
  for (int n : {5000, 300, 7}) {
    args.push_back(HostTensor::floats(randomFloats(n, seed++)));
    args.push_back(HostTensor::floats(randomFloats(n, seed++)));
    args.push_back(HostTensor::floats(randomFloats(n, seed++, -0.1f, 0.1f)));
    args.push_back(HostTensor::floats(randomFloats(n, seed++, 0.0f, 0.01f)));
  }
  args.push_back(HostTensor::floats({1e-3f}));
  args.push_back(HostTensor::floats({3.0f}));
  args.push_back(HostTensor::floats({gradNorm}));
  args.push_back(HostTensor::floats({2.5f}));
  return args;
}

// RoPE where q is produced and where its gradient leaves (--kiln-fuse-rope):
// forward transpose -> rope -> round to bf16 is one kernel reading the
// GEMM layout; backward widen -> inverse rope -> round -> transpose is one
// kernel writing it. (The outer converts make the bf16 values f32 results
// the test can read.) Unfused: 10 kernels; fused: the 2 ropes and the 3
// converts around them. q is [batch, 6, heads, D] in the GEMM's layout, with
// D / 2 frequencies `invFreq`.
void expectRopeFusionMatches(int64_t d, const std::string &invFreq,
                             std::function<void(const std::string &)> cudaSource = nullptr,
                             int64_t heads = 3, int64_t batch = 2) {
  const std::string b = std::to_string(batch), h = std::to_string(heads);
  const std::string bthd = b + "x6x" + h + "x" + std::to_string(d),
                    bhtd = b + "x" + h + "x6x" + std::to_string(d);
  std::string module = R"mlir(
    func.func @step(%p: tensor<BTHDxf32>, %g: tensor<BHTDxf32>)
        -> (tensor<BHTDxf32>, tensor<BTHDxf32>) {
      %t = kiln.transpose %p permutation = [0, 2, 1, 3] : tensor<BTHDxf32> -> tensor<BHTDxf32>
      %r = kiln.rope %t {inv_freq = array<f32: FREQ>} : tensor<BHTDxf32> -> tensor<BHTDxf32>
      %q = kiln.convert %r : tensor<BHTDxf32> -> tensor<BHTDxbf16>
      %qf = kiln.convert %q : tensor<BHTDxbf16> -> tensor<BHTDxf32>
      %gn = kiln.convert %g : tensor<BHTDxf32> -> tensor<BHTDxbf16>
      %gw = kiln.convert %gn : tensor<BHTDxbf16> -> tensor<BHTDxf32>
      %gr = kiln.rope %gw {inv_freq = array<f32: FREQ>, inverse = true} : tensor<BHTDxf32> -> tensor<BHTDxf32>
      %gb = kiln.convert %gr : tensor<BHTDxf32> -> tensor<BHTDxbf16>
      %gt = kiln.transpose %gb permutation = [0, 2, 1, 3] : tensor<BHTDxbf16> -> tensor<BTHDxbf16>
      %gf = kiln.convert %gt : tensor<BTHDxbf16> -> tensor<BTHDxf32>
      return %qf, %gf : tensor<BHTDxf32>, tensor<BTHDxf32>
    })mlir";
  for (auto [key, value] : {std::pair<std::string, std::string>{"BTHD", bthd}, {"BHTD", bhtd},
                            {"FREQ", invFreq}})
    for (size_t at = module.find(key); at != std::string::npos; at = module.find(key, at))
      module.replace(at, key.size(), value);
  const int n = static_cast<int>(batch * 6 * heads * d);
  expectFusedMatchesUnfused(module,
                            {HostTensor::floats(randomFloats(n, 40, -2, 2)),
                             HostTensor::floats(randomFloats(n, 41, -2, 2))},
                            5, cudaSource);
}

// D = 8: four pairs a row, one pair per CUDA thread.
TEST(CudaFusedKernelsEmulated, RopeWithItsTransposesAndCasts) {
  expectRopeFusionMatches(8, "1.0, 0.3, 0.09, 0.027", [](const std::string &cuda) {
    EXPECT_EQ(occurrences(cuda, "runs of 8 pairs"), 0u);
  });
}

// D = 32: sixteen pairs a row, runs of 8 pairs per CUDA thread (16-byte
// loads of the bf16 input and stores of the bf16 result, the offsets once a
// run), each run's first feature at 0 or 8 of its row. A thread rotates the
// runs of G rows of one position with one set of angles (G = 4, 2 or 1, the
// largest dividing the rows before T): 2 x 3 heads give G = 2, 2 x 4 give 4,
// 1 x 3 give 1.
std::string ropeFrequencies() {
  std::string freq;
  for (int f = 0; f < 16; ++f)
    freq += (f ? ", " : "") + std::to_string(std::pow(0.6, f));
  return freq;
}

TEST(CudaFusedKernelsEmulated, RopeInRunsOfEightPairs) {
  expectRopeFusionMatches(32, ropeFrequencies(), [](const std::string &cuda) {
    EXPECT_EQ(occurrences(cuda, "runs of 8 pairs per thread"), 2u);
    EXPECT_EQ(occurrences(cuda, "in 2 rows of one position"), 2u);
  });
}

TEST(CudaFusedKernelsEmulated, RopeRunsInFourRowsOfOnePosition) {
  expectRopeFusionMatches(
      32, ropeFrequencies(),
      [](const std::string &cuda) {
        EXPECT_EQ(occurrences(cuda, "in 4 rows of one position"), 2u);
      },
      /*heads=*/4);
}

TEST(CudaFusedKernelsEmulated, RopeRunsInOneRowWhenNoneShareAPosition) {
  expectRopeFusionMatches(
      32, ropeFrequencies(),
      [](const std::string &cuda) {
        EXPECT_EQ(occurrences(cuda, "in 1 row of one position"), 2u);
      },
      /*heads=*/3, /*batch=*/1);
}

TEST(CudaFusedKernelsEmulated, MultiTensorAdamW) {
  expectFusedMatchesUnfused(kMultiTensorAdamW, adamWArgs(4.0f), 2);
}

// A non-finite gradient norm: every segment skips its update and still
// reports the norms of the unchanged parameters.
TEST(CudaFusedKernelsEmulated, MultiTensorAdamWSkipsNonFiniteSteps) {
  expectFusedMatchesUnfused(kMultiTensorAdamW, adamWArgs(INFINITY), 2);
}

} // namespace
