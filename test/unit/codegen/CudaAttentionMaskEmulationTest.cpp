//===- CudaAttentionMaskEmulationTest.cpp - masks: CUDA vs CPU attention -===//
//
// The generated attention kernels' block skip (CudaAttentionKernels.cpp's
// emitBlockSkip) against the CPU kernels, which test every pair: which
// masks are decided at a tile's corners (a conjunction of tests linear in i
// and j) and which pair by pair, and that both give the CPU's results, run
// on the host as CudaAttentionEmulationTest.cpp's cases are. Tolerances as
// there: fp32 5e-5, bf16 3e-2 relative (at least 1 in magnitude).
//
//===----------------------------------------------------------------------===//

#include "CudaAttentionEmulation.h"
#include "EmulationChecks.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using kiln::test::attentionModule;
using kiln::test::expectSame;
using kiln::test::HostTensor;
using kiln::test::KernelBackend;
using kiln::test::KernelRunner;
using kiln::test::randomFloats;
using kiln::test::replaceAll;

// Counts the attention kernels of `module` whose block-skip test decides a
// tile at its corners (linearMaskTests) and those that test every pair.
std::pair<int, int> blockSkipTests(const std::string &module) {
  KernelRunner cuda(module, KernelBackend::CudaEmulated);
  EXPECT_TRUE(cuda.ok()) << cuda.error();
  std::pair<int, int> counts{0, 0};
  for (const auto &kernel : cuda.kernels()) {
    const std::string &text = kernel.source;
    const std::string corners = "// skip the tile when the mask keeps none of "
                                "its pairs, decided at the tile's corners";
    for (size_t at = text.find("// skip the tile"); at != std::string::npos;
         at = text.find("// skip the tile", at + 1))
      ++(text.compare(at, corners.size(), corners) == 0 ? counts.first
                                                         : counts.second);
  }
  return counts;
}

// The default mask (j < len[b] and j + 3 <= i, an unsigned comparison of
// non-negative sides) is linear in i and j: every kernel decides its tiles
// at their corners, so the other cases here test that rule against the CPU.
// A mask with a test that is not linear ((i + j) % 3 != 0 beside j <= i
// and j < len[b])
// tests every pair of a tile; both backends agree on it too (row 0 keeps
// no key: out 0, lse -inf).
TEST(CudaAttentionEmulated, BlockSkipAtCornersOnlyForLinearMasks) {
  for (bool backward : {false, true})
    EXPECT_EQ(blockSkipTests(attentionModule(64, "bf16", backward)).second, 0);
  EXPECT_GT(blockSkipTests(attentionModule(64, "bf16", false)).first, 0);
  const std::string mask = R"(      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %sum = arith.addi %ii, %jj : i64
      %three = arith.constant 3 : i64
      %rem = arith.remsi %sum, %three : i64
      %zero = arith.constant 0 : i64
      %apart = arith.cmpi ne, %rem, %zero : i64
      %causal = arith.cmpi sle, %jj, %ii : i64
      %n = tensor.extract %c2[%b] : tensor<2xi32>
      %n64 = arith.extsi %n : i32 to i64
      %inlen = arith.cmpi slt, %jj, %n64 : i64
      %both = arith.andi %apart, %causal : i1
      %keep = arith.andi %both, %inlen : i1
      kiln.yield %keep : i1)";
  for (const std::string elem : {"f32", "bf16"}) {
    SCOPED_TRACE(elem);
    const double tolerance = elem == "bf16" ? 3e-2 : 5e-5;
    std::pair<int, int> forward =
        blockSkipTests(attentionModule(64, elem, false, "", mask));
    std::pair<int, int> backward =
        blockSkipTests(attentionModule(64, elem, true, "", mask));
    EXPECT_EQ(forward.first + backward.first, 0);
    EXPECT_GT(forward.second, 0);
    EXPECT_GT(backward.second, 0);
    std::vector<HostTensor> args = {
        HostTensor::floats(randomFloats(2 * 4 * 37 * 64, 31, -2, 2)),
        HostTensor::floats(randomFloats(2 * 2 * 53 * 64, 32, -2, 2)),
        HostTensor::floats(randomFloats(2 * 2 * 53 * 64, 33)),
        HostTensor::floats({0.05f, 0.2f, 0.0f, 0.5f}),
        HostTensor::floats(randomFloats(53, 35)),
        HostTensor::ints({40, 11})};
    std::vector<HostTensor> out =
        expectSame(attentionModule(64, elem, false, "", mask), args,
                   tolerance, {"out", "lse"});
    ASSERT_EQ(out.size(), 2u);
    for (int bh = 0; bh < 8; ++bh)
      EXPECT_EQ(out[1].f[bh * 37], -INFINITY);
    KernelRunner cpuForward(attentionModule(64, elem, false, "", mask),
                            KernelBackend::Cpu);
    ASSERT_TRUE(cpuForward.ok()) << cpuForward.error();
    std::vector<HostTensor> cpuOut = cpuForward.run(args);
    args.push_back(cpuOut[0]);
    args.push_back(cpuOut[1]);
    args.push_back(HostTensor::floats(randomFloats(2 * 4 * 37 * 64, 34)));
    expectSame(attentionModule(64, elem, true, "", mask), args, tolerance,
               {"dq", "dk", "dv", "dslope", "dbias"});
  }
}

// Attention over q, k, v, dout [2, 2, 150, 16] in bf16 (150 rows and keys:
// 3 tiles of 64 each way) with the mask region `mask` (statements ending in
// kiln.yield of an i1), forward and backward in one function: returns out,
// lse, dq, dk, dv (f32).
std::string maskedBf16Module(const std::string &mask) {
  std::string text = R"mlir(
func.func @step(%qf: tensor<2x2x150x16xf32>, %kf: tensor<2x2x150x16xf32>, %vf: tensor<2x2x150x16xf32>,
                %doutf: tensor<2x2x150x16xf32>)
    -> (tensor<2x2x150x16xf32>, tensor<2x2x150xf32>, tensor<2x2x150x16xf32>, tensor<2x2x150x16xf32>, tensor<2x2x150x16xf32>) {
  %q = kiln.convert %qf : tensor<2x2x150x16xf32> -> tensor<2x2x150x16xbf16>
  %k = kiln.convert %kf : tensor<2x2x150x16xf32> -> tensor<2x2x150x16xbf16>
  %v = kiln.convert %vf : tensor<2x2x150x16xf32> -> tensor<2x2x150x16xbf16>
  %dout = kiln.convert %doutf : tensor<2x2x150x16xf32> -> tensor<2x2x150x16xbf16>
  %out, %lse = kiln.attention %q, %k, %v {scale = 0.25 : f32}
      : (tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>)
      -> (tensor<2x2x150x16xbf16>, tensor<2x2x150xf32>)
    mask(%b: index, %h: index, %i: index, %j: index) {
MASK
    }
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %out, %lse, %dout {scale = 0.25 : f32}
      : (tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>, tensor<2x2x150xf32>, tensor<2x2x150x16xbf16>)
      -> (tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>, tensor<2x2x150x16xbf16>)
    mask(%b: index, %h: index, %i: index, %j: index) {
MASK
    }
  %out_r = kiln.convert %out : tensor<2x2x150x16xbf16> -> tensor<2x2x150x16xf32>
  %dq_r = kiln.convert %dq : tensor<2x2x150x16xbf16> -> tensor<2x2x150x16xf32>
  %dk_r = kiln.convert %dk : tensor<2x2x150x16xbf16> -> tensor<2x2x150x16xf32>
  %dv_r = kiln.convert %dv : tensor<2x2x150x16xbf16> -> tensor<2x2x150x16xf32>
  return %out_r, %lse, %dq_r, %dk_r, %dv_r
      : tensor<2x2x150x16xf32>, tensor<2x2x150xf32>, tensor<2x2x150x16xf32>, tensor<2x2x150x16xf32>, tensor<2x2x150x16xf32>
})mlir";
  replaceAll(text, "MASK", mask);
  return text;
}

// A causal mask over 150 rows and keys (3 tiles of 64 each way): tiles
// below the diagonal are kept whole, so the bf16 kernels take their
// whole-tile path there (no per-pair mask test, `tileAllKept`), tiles on it
// test every pair, tiles above it are skipped. Head dim 16 (the backward
// steps 64 at a time); the same tolerance as the other bf16 cases.
TEST(CudaAttentionEmulated, Bf16CausalTilesKeptWhole) {
  const std::string module = maskedBf16Module(R"(      %keep = arith.cmpi ule, %j, %i : index
      kiln.yield %keep : i1)");
  KernelRunner cuda(module, KernelBackend::CudaEmulated);
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  int wholeTilePaths = 0;
  for (const auto &kernel : cuda.kernels())
    wholeTilePaths += kernel.source.find("if (tileAllKept) kept = 1;") !=
                      std::string::npos;
  EXPECT_EQ(wholeTilePaths, 2); // the forward and the backward
  const int64_t count = 2 * 2 * 150 * 16;
  std::vector<HostTensor> results = expectSame(
      module,
      {HostTensor::floats(randomFloats(count, 21, -2, 2)),
       HostTensor::floats(randomFloats(count, 22, -2, 2)),
       HostTensor::floats(randomFloats(count, 23)),
       HostTensor::floats(randomFloats(count, 24))},
      3e-2, {"out", "lse", "dq", "dk", "dv"});
  ASSERT_EQ(results.size(), 5u);
  for (float l : results[1].f)
    EXPECT_TRUE(std::isfinite(l)); // every row keeps at least its diagonal
}

// Masks linear in i and j on maskedBf16Module's 3 x 3 tiles, so the corner
// rule meets every kind of tile: kept whole, cut by a test, skipped. The CPU
// kernels test every pair: both must agree (the tolerance of the other bf16
// cases). Among the masks: a test with a coefficient (2 j); one free of i and
// j that skips every tile of batch entry 1 (its dK and dV then come from the
// zeroed accumulators alone); a != test, which never decides a whole tile
// kept (j = i + 10 crosses tiles between their corners), and an == test,
// which never decides one skipped, for the same reason. The fp32 kernels'
// corner rule runs in the cases above (their mask is linear, and in
// Fp32HeadDim72Padded some blocks skip every tile).
TEST(CudaAttentionEmulated, LinearMasksMatchTheCpu) {
  // Every case reads i and j as i64 (%ii, %jj); each defines what else it
  // reads (the region holds no unused value: its C would not compile).
  const std::string indices = R"(      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
)";
  struct Case {
    const char *name, *body;
  };
  const Case cases[] = {
      {"j <= i + 5", R"(      %c5 = arith.constant 5 : i64
      %i5 = arith.addi %ii, %c5 : i64
      %keep = arith.cmpi sle, %jj, %i5 : i64)"},
      {"j <= i and i - j < 40", R"(      %c40 = arith.constant 40 : i64
      %causal = arith.cmpi sle, %jj, %ii : i64
      %d = arith.subi %ii, %jj : i64
      %near = arith.cmpi slt, %d, %c40 : i64
      %keep = arith.andi %causal, %near : i1)"},
      {"2 j >= i - 30", R"(      %c2 = arith.constant 2 : i64
      %c30 = arith.constant 30 : i64
      %j2 = arith.muli %c2, %jj : i64
      %i30 = arith.subi %ii, %c30 : i64
      %keep = arith.cmpi sge, %j2, %i30 : i64)"},
      {"j <= i and b == 0", R"(      %bb = arith.index_cast %b : index to i64
      %c0 = arith.constant 0 : i64
      %causal = arith.cmpi sle, %jj, %ii : i64
      %first = arith.cmpi eq, %bb, %c0 : i64
      %keep = arith.andi %causal, %first : i1)"},
      {"j != i + 10", R"(      %c10 = arith.constant 10 : i64
      %i10 = arith.addi %ii, %c10 : i64
      %keep = arith.cmpi ne, %jj, %i10 : i64)"},
      {"i == j + 10", R"(      %c10 = arith.constant 10 : i64
      %j10 = arith.addi %jj, %c10 : i64
      %keep = arith.cmpi eq, %ii, %j10 : i64)"},
  };
  const int64_t count = 2 * 2 * 150 * 16;
  const std::vector<HostTensor> args = {
      HostTensor::floats(randomFloats(count, 41, -2, 2)),
      HostTensor::floats(randomFloats(count, 42, -2, 2)),
      HostTensor::floats(randomFloats(count, 43)),
      HostTensor::floats(randomFloats(count, 44))};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const std::string text =
        maskedBf16Module(indices + c.body + "\n      kiln.yield %keep : i1");
    std::pair<int, int> paths = blockSkipTests(text);
    EXPECT_GT(paths.first, 0); // the corner rule
    EXPECT_EQ(paths.second, 0);
    expectSame(text, args, 3e-2, {"out", "lse", "dq", "dk", "dv"});
  }
}

} // namespace
