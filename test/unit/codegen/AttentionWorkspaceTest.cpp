//===- AttentionWorkspaceTest.cpp - Attention scratch and tile plans ------===//
//
// The attention backward's scratch is planned memory (Workspace and
// WorkspaceCounter buffers placed by codegen/program/MemoryPlan.cpp): the
// artifact carries it, kilnc's report shows it with bytes that follow from
// the op's shapes, and the runtime's loader (memory-plan check included)
// accepts it. And the CUDA tile plans: for each arch's shared-memory budget
// the chosen tiles are the largest candidate that fits.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "codegen/Codegen.h"
#include "codegen/CudaAttentionKernels.h"
#include "runtime/Artifact.h"
#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/CudaSharedMemory.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

namespace {

using namespace kiln;
namespace schema = kiln::schema;

// Shapes of the test op: q [B, H, T, D], k/v [B, KVH, S, D], a learned
// per-head slope captured by the score (H floating capture elements).
constexpr int64_t B = 2, H = 4, T = 37, KVH = 2, S = 53, D = 16;

int64_t aligned(int64_t bytes) {
  int64_t a = schema::kArenaAlignment;
  return (bytes + a - 1) / a * a;
}

// @step: one kiln.attention_grad (score = s - slope[h] * |i - j|) on
// parameters (the runtime's loader accepts only the data loader's inputs).
std::string backwardModule() {
  std::string q = "tensor<2x4x37x16xf32>", kv = "tensor<2x2x53x16xf32>";
  std::string lse = "tensor<2x4x37xf32>", slope = "tensor<4xf32>";
  return R"mlir(
module attributes {kiln.model = "ws", kiln.train = #kiln.train<batch = 2, seq = 37, optimizer = sgd, weight_decay = 0.0 : f32>} {
  func.func @step(%q: )mlir" + q + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "q", kiln.init = #kiln.init<normal, std = 0.02>},
                  %k: )mlir" + kv + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "k", kiln.init = #kiln.init<normal, std = 0.02>},
                  %v: )mlir" + kv + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "v", kiln.init = #kiln.init<normal, std = 0.02>},
                  %out: )mlir" + q + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "out", kiln.init = #kiln.init<normal, std = 0.02>},
                  %lse: )mlir" + lse + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "lse", kiln.init = #kiln.init<normal, std = 0.02>},
                  %dout: )mlir" + q + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "dout", kiln.init = #kiln.init<normal, std = 0.02>},
                  %slope: )mlir" + slope + R"mlir( {kiln.role = #kiln.role<param>, kiln.name = "slope", kiln.init = #kiln.init<normal, std = 0.02>})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"}, )mlir" + q +
         ", " + kv + ", " + kv + ", " + slope + R"mlir() {
    %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope) {scale = 0.25 : f32}
        : ()mlir" + q + ", " + kv + ", " + kv + ", " + q + ", " + lse + ", " + q +
         ", " + slope + R"mlir()
        -> ()mlir" + q + ", " + kv + ", " + kv + ", " + slope + R"mlir()
      score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>) {
        %sl = tensor.extract %c0[%h] : tensor<4xf32>
        %ii = arith.index_cast %i : index to i64
        %jj = arith.index_cast %j : index to i64
        %dij = arith.subi %ii, %jj : i64
        %df = arith.sitofp %dij : i64 to f32
        %ad = math.absf %df : f32
        %pen = arith.mulf %sl, %ad : f32
        %r = arith.subf %s, %pen : f32
        kiln.yield %r : f32
      } loc("ws.kiln":7:5)
    %loss = kiln.reduce_sum %dslope dims = [0] : tensor<4xf32> -> tensor<f32>
    return %loss, %dq, %dk, %dv, %dslope : tensor<f32>, )mlir" + q + ", " + kv +
         ", " + kv + ", " + slope + R"mlir(
  }
  func.func @update() {
    return
  }
})mlir";
}

struct Compiled {
  mlir::FailureOr<CompiledArtifact> artifact = mlir::failure();
  std::string diagnostics;
};

Compiled compile(const std::string &text, const CodegenOptions &options) {
  static auto context = kiln::test::makeContext();
  Compiled c;
  mlir::ScopedDiagnosticHandler handler(context.get(), [&](mlir::Diagnostic &d) {
    c.diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, context.get());
  if (!module)
    return c;
  c.artifact = compileArtifact(*module, options);
  return c;
}

const schema::Artifact &rootOf(const CompiledArtifact &a) {
  return *schema::GetArtifact(a.bytes.data());
}

// Buffers of `role` in the artifact.
std::vector<const schema::Buffer *> buffersOf(const schema::Artifact &root,
                                              schema::BufferRole role) {
  std::vector<const schema::Buffer *> found;
  for (const schema::Buffer *b : *root.buffers())
    if (b->role() == role)
      found.push_back(b);
  return found;
}

int64_t elements(const schema::Buffer &b) {
  int64_t n = 1;
  for (int64_t d : *b.shape())
    n *= d;
  return n;
}

// CPU: one task per (b, kv head) keeps fp32 dk [S, D] and dv [S, Dv]
// accumulators and a double slice of the capture gradients (H elements);
// no calloc in the kernel, the bytes are planned scratch (live at the call
// alone, placed among the activations).
TEST(AttentionWorkspace, CpuScratchIsPlannedAndReported) {
  Compiled c = compile(backwardModule(), {"cpu", {}});
  ASSERT_TRUE(mlir::succeeded(c.artifact)) << c.diagnostics;
  const schema::Artifact &root = rootOf(*c.artifact);
  int64_t tasks = B * KVH;
  int64_t dkBytes = tasks * S * D * 4, partialBytes = tasks * H * 8;
  int64_t expected = 2 * aligned(dkBytes) + aligned(partialBytes);
  EXPECT_EQ(root.memory_plan()->workspace(), expected);
  EXPECT_EQ(buffersOf(root, schema::BufferRole_Workspace).size(), 3u);
  EXPECT_TRUE(buffersOf(root, schema::BufferRole_WorkspaceCounter).empty());
  for (const schema::Kernel *k : *root.kernels())
    EXPECT_EQ(k->source()->str().find("calloc"), std::string::npos);
  // The report: the call with the most scratch, with each scratch buffer's
  // bytes.
  const std::string &report = c.artifact->memorySummary;
  EXPECT_NE(report.find("largest kernel scratch"), std::string::npos) << report;
  EXPECT_NE(report.find("(" + std::to_string(expected) + " bytes), "
                        "'step' entry 0, ws.kiln:7:5"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("attention_grad.dk_f32 (" + std::to_string(dkBytes) +
                        " bytes)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("attention_grad.capture_partials (" +
                        std::to_string(partialBytes) + " bytes)"),
            std::string::npos)
      << report;
  // The runtime's loader and memory-plan check accept it.
  auto loaded = rt::Artifact::loadBytes(
      std::vector<uint8_t>(c.artifact->bytes.begin(), c.artifact->bytes.end()),
      "ws.kart");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
}

// CUDA: the capture-gradient slices (one per dQ block) are a Workspace, the
// completion counter a persistent WorkspaceCounter; no __device__ scratch.
TEST(AttentionWorkspace, CudaScratchIsPlannedNotDeviceGlobals) {
  Compiled c = compile(backwardModule(), {"cuda", {"sm_80", "sm_90a"}});
  ASSERT_TRUE(mlir::succeeded(c.artifact)) << c.diagnostics;
  const schema::Artifact &root = rootOf(*c.artifact);
  auto workspaces = buffersOf(root, schema::BufferRole_Workspace);
  auto counters = buffersOf(root, schema::BufferRole_WorkspaceCounter);
  ASSERT_EQ(workspaces.size(), 1u);
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0]->dtype(), schema::DType_I32);
  EXPECT_EQ(elements(*counters[0]), 1);
  // One double per role-B block: the score reads the slope only as
  // slope[h], so a block keeps only its head's element. Blocks of Br query
  // rows with Br <= 64, so at least ceil(T / 64) blocks per (b, h).
  EXPECT_EQ(workspaces[0]->dtype(), schema::DType_I64);
  int64_t slices = elements(*workspaces[0]);
  EXPECT_EQ(slices % (B * H), 0);
  EXPECT_GE(slices, B * H * ((T + 63) / 64));
  EXPECT_EQ(root.memory_plan()->workspace(),
            aligned(slices * 8) + aligned(4));
  // The counter lives in the persistent region (zeroed once with the arena),
  // the slices after the activations.
  EXPECT_LT(counters[0]->offset(), workspaces[0]->offset());
  EXPECT_EQ(workspaces[0]->offset() + aligned(slices * 8), root.arena_bytes());
  for (const schema::Kernel *k : *root.kernels())
    EXPECT_EQ(k->source()->str().find("__device__ double"), std::string::npos);
}

// The op of chooseTiles: an attention_grad with bf16 q/k/v [1, 2, 64, Dh].
mlir::Operation *bf16Backward(mlir::MLIRContext *context, int64_t dh,
                              mlir::OwningOpRef<mlir::ModuleOp> &module) {
  std::string t = "tensor<1x2x64x" + std::to_string(dh) + "xbf16>";
  std::string lse = "tensor<1x2x64xf32>";
  module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @f(%q: " + t + ", %lse: " + lse + ") {\n"
      "  %dq, %dk, %dv = kiln.attention_grad %q, %q, %q, %q, %lse, %q "
      "{scale = 1.0 : f32} : (" + t + ", " + t + ", " + t + ", " + t + ", " +
          lse + ", " + t + ") -> (" + t + ", " + t + ", " + t + ")\n"
      "  return\n}\n",
      context);
  if (!module)
    return nullptr;
  return &*module->getBody()
               ->front()
               .getRegion(0)
               .front()
               .getOperations()
               .begin();
}

// Head dim 128, bf16 backward. Shared bytes by hand (backwardLayout: Q, dO,
// K, V tiles bf16; S, dP fp32; P, dS bf16; lse, D_i; then the larger of
// role A's fp32 dK + dV and role B's fp32 dQ):
//   64x64: 16K*4 + 16K*2 + 8K*2 + 0.5K + 64K = 192.5 KiB (fits sm_90a's 227)
//   64x32: 16K*2 + 8K*2 + 8K*2 + 4K*2 + 0.5K + 32K = 104.5 KiB (fits 163)
//   32x32: 8K*4 + 4K*2 + 2K*2 + 0.25K + 32K = 76.25 KiB (fits 99)
TEST(AttentionTilePlan, LargestTilesThatFitEachArch) {
  auto context = kiln::test::makeContext();
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::Operation *op = bf16Backward(context.get(), 128, module);
  ASSERT_NE(op, nullptr);
  cuda_attention::Dims n = cuda_attention::dimsOf(op);
  struct Case {
    std::vector<std::string> archs;
    int64_t br, bc;
  };
  for (const Case &c : {Case{{"sm_90a"}, 64, 64}, Case{{"sm_80"}, 64, 32},
                        Case{{"sm_80", "sm_90a"}, 64, 32},
                        Case{{"sm_86"}, 32, 32}, Case{{"sm_120"}, 32, 32},
                        Case{{"sm_80", "sm_89", "sm_90a"}, 32, 32}}) {
    int64_t budget = attentionSharedBudget(c.archs);
    auto tiles = cuda_attention::chooseTiles(op, n, "backward", budget,
                                             cuda_attention::backwardLayout);
    ASSERT_TRUE(mlir::succeeded(tiles)) << c.archs.front();
    EXPECT_EQ(tiles->plan.Br, c.br) << c.archs.back();
    EXPECT_EQ(tiles->plan.Bc, c.bc) << c.archs.back();
    // Fits every listed arch with the static reserve on top.
    for (const std::string &arch : c.archs)
      EXPECT_LE(tiles->layout.size() + cuda_attention::kStaticSharedReserve,
                schema::cudaMaxSharedBytesPerBlock(arch))
          << arch;
  }
  EXPECT_EQ(defaultAttentionSharedBudget(),
            attentionSharedBudget({"sm_80", "sm_90a"}));
}

// A budget no candidate fits is an error on the op naming the bytes.
TEST(AttentionTilePlan, NoFittingTilesIsADiagnostic) {
  auto context = kiln::test::makeContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(context.get(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::Operation *op = bf16Backward(context.get(), 256, module);
  ASSERT_NE(op, nullptr);
  auto tiles = cuda_attention::chooseTiles(op, cuda_attention::dimsOf(op),
                                           "backward", 16 * 1024,
                                           cuda_attention::backwardLayout);
  EXPECT_TRUE(mlir::failed(tiles));
  EXPECT_NE(diagnostics.find("the CUDA attention backward needs"),
            std::string::npos)
      << diagnostics;
  EXPECT_NE(diagnostics.find("allow 16384 dynamic bytes"), std::string::npos)
      << diagnostics;
}

} // namespace
