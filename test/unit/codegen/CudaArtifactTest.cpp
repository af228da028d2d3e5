//===- CudaArtifactTest.cpp - Structure of a `--target=cuda` artifact -----===//
//
// Compiles models/tiny_gpt.kiln with the real kilnc for both targets and
// checks the CUDA artifact against the CPU one: the same kernels (names'
// op prefixes, locations, ops) in the same schedule, every CUDA kernel with
// the agreed entry ABI, a usable launch, no floating-point atomics, and the
// artifact's target, archs and prelude; the CPU artifact carries no launch
// and no archs. Also the option checks, CUDA diagnostics, and a fused
// pointwise group (as the fusion pass will hand over) computing the CPU
// kernel's statements. (NVRTC compiling the kernels is `kiln-run
// --compile-only`, the ctests in test/cuda.)
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "codegen/Codegen.h"
#include "codegen/CudaKernelEmitter.h"
#include "runtime/schema/ArtifactChecksum.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace schema = kiln::schema;

// The bytes of `kilnc tiny_gpt.kiln <flags>`, checked by the flatbuffers
// verifier (the runtime's loader takes only CPU artifacts on this branch).
std::string compileTinyGpt(const std::string &flags, const std::string &name) {
  fs::path dir = fs::temp_directory_path() /
                 ("kiln-cuda-artifact-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / name).string();
  std::string cmd = std::string(KILNC_PATH) + " " + KILN_SOURCE_DIR +
                    "/models/tiny_gpt.kiln " + flags + " -o " + path;
  if (std::system(cmd.c_str()) != 0)
    return "";
  std::ifstream in(path, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  fs::remove_all(dir);
  if (bytes.size() < schema::kChecksumTrailerBytes)
    return "";
  bytes.resize(bytes.size() - schema::kChecksumTrailerBytes);
  flatbuffers::Verifier verifier(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  return schema::VerifyArtifactBuffer(verifier) ? bytes : "";
}

// How many of kernel `k`'s arguments are scratch (Workspace or
// WorkspaceCounter buffers in its first call).
unsigned scratchArgs(const schema::Artifact &artifact, unsigned k) {
  for (const schema::Program *program : *artifact.programs())
    for (const schema::Step *step : *program->schedule())
      if (const schema::KernelCall *call = step->op_as_KernelCall();
          call && call->kernel() == k) {
        unsigned n = 0;
        for (uint32_t b : *call->buffers()) {
          schema::BufferRole role = artifact.buffers()->Get(b)->role();
          n += role == schema::BufferRole_Workspace ||
               role == schema::BufferRole_WorkspaceCounter;
        }
        return n;
      }
  return 0;
}

// "k_layer_norm_grad_0123abcd" -> "k_layer_norm_grad_" (the hash differs
// between targets; the op prefix must not).
std::string entryPrefix(const std::string &entry) {
  return entry.substr(0, entry.rfind('_') + 1);
}

TEST(CudaArtifact, SameKernelsAndScheduleAsTheCpuArtifact) {
  // One kernel per op on both targets: fused row and optimizer kernels are
  // CPU-only for now (the CUDA target runs their members one by one).
  // Both targets match the hand-written attention into kiln.attention, so
  // the flash forward/backward kernels are compared like every other kernel.
  std::string cpuBytes = compileTinyGpt("--no-fusion", "cpu.kart");
  std::string cudaBytes =
      compileTinyGpt("--no-fusion --target=cuda --cuda-arch=sm_80,sm_90a",
                     "cuda.kart");
  ASSERT_FALSE(cpuBytes.empty());
  ASSERT_FALSE(cudaBytes.empty());
  const schema::Artifact *cpu = schema::GetArtifact(cpuBytes.data());
  const schema::Artifact *cuda = schema::GetArtifact(cudaBytes.data());

  EXPECT_EQ(cpu->target()->str(), "cpu");
  EXPECT_EQ(cpu->archs(), nullptr);
  EXPECT_EQ(cuda->target()->str(), "cuda");
  ASSERT_NE(cuda->archs(), nullptr);
  ASSERT_EQ(cuda->archs()->size(), 2u);
  EXPECT_EQ(cuda->archs()->Get(0)->str(), "sm_80");
  EXPECT_EQ(cuda->archs()->Get(1)->str(), "sm_90a");
  EXPECT_NE(cuda->prelude()->str().find("kiln_block_sum"), std::string::npos);
  EXPECT_EQ(cpu->prelude()->str().find("kiln_block_sum"), std::string::npos);

  ASSERT_EQ(cuda->kernels()->size(), cpu->kernels()->size());
  for (unsigned i = 0; i < cuda->kernels()->size(); ++i) {
    const schema::Kernel *c = cpu->kernels()->Get(i);
    const schema::Kernel *g = cuda->kernels()->Get(i);
    std::string entry = g->entry()->str();
    SCOPED_TRACE(entry);
    EXPECT_EQ(entryPrefix(entry), entryPrefix(c->entry()->str()));
    EXPECT_EQ(g->location()->str(), c->location()->str());
    EXPECT_EQ(g->ops()->str(), c->ops()->str());
    EXPECT_EQ(c->launch(), nullptr);
    ASSERT_NE(g->launch(), nullptr);
    EXPECT_GE(g->launch()->grid(), 1u);
    EXPECT_GE(g->launch()->block(), 32u);
    EXPECT_LE(g->launch()->block(), 1024u);
    EXPECT_EQ(g->launch()->block() % 32, 0u);
    std::string source = g->source()->str();
    EXPECT_NE(source.find("extern \"C\" __global__ void " + entry +
                          "(void* const* __restrict__ buffers)"),
              std::string::npos);
    // Deterministic kernels: no floating-point atomics anywhere (the
    // prelude's last-block handshake counts with an integer atomic).
    EXPECT_EQ(source.find("atomic"), std::string::npos);
    // The buffer signature the runtime checks calls against is the CPU's,
    // up to the scratch arguments after the outputs (Workspace /
    // WorkspaceCounter: each backend's kernel has its own).
    unsigned cArgs = c->args()->size() - scratchArgs(*cpu, i);
    unsigned gArgs = g->args()->size() - scratchArgs(*cuda, i);
    ASSERT_EQ(gArgs, cArgs);
    for (unsigned a = 0; a < gArgs; ++a)
      EXPECT_EQ(g->args()->Get(a)->elements(), c->args()->Get(a)->elements());
  }

  ASSERT_EQ(cuda->programs()->size(), cpu->programs()->size());
  for (unsigned p = 0; p < cuda->programs()->size(); ++p) {
    const auto *cs = cpu->programs()->Get(p)->schedule();
    const auto *gs = cuda->programs()->Get(p)->schedule();
    ASSERT_EQ(gs->size(), cs->size());
    for (unsigned s = 0; s < gs->size(); ++s) {
      EXPECT_EQ(gs->Get(s)->op_type(), cs->Get(s)->op_type());
      EXPECT_EQ(gs->Get(s)->location()->str(), cs->Get(s)->location()->str());
    }
  }
}

TEST(CudaArtifact, OptionsAreChecked) {
  EXPECT_EQ(kiln::checkCodegenOptions({"cpu", {}}), "");
  EXPECT_EQ(kiln::checkCodegenOptions({"cuda", {"sm_80", "sm_90a"}}), "");
  EXPECT_NE(kiln::checkCodegenOptions({"tpu", {}})
                .find("unknown target 'tpu' (supported: cpu, cuda)"),
            std::string::npos);
  EXPECT_NE(kiln::checkCodegenOptions({"cuda", {"sm_80", "sm_61"}})
                .find("unknown CUDA architecture 'sm_61' (supported: sm_80"),
            std::string::npos);
  EXPECT_NE(kiln::checkCodegenOptions({"cuda", {}}).find("at least one"),
            std::string::npos);
}

TEST(CudaArtifact, UnsupportedElementTypeNamesTheCudaBackend) {
  auto context = kiln::test::makeContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(context.get(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @step(%a: tensor<4xbf16> {kiln.role = #kiln.role<input>, kiln.name = "a"}) -> tensor<4xbf16> {
      %0 = kiln.softmax %a : tensor<4xbf16>
      return %0 : tensor<4xbf16>
    }
    func.func @update() {
      return
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  auto kernels = kiln::emitKernels(*module, {"cuda", {"sm_80"}});
  EXPECT_TRUE(mlir::failed(kernels));
  EXPECT_NE(diagnostics.find("the CUDA backend does not support element type "
                             "'bf16'"),
            std::string::npos)
      << diagnostics;
}

// A group of several pointwise ops (what the fusion pass hands over) is one
// CUDA kernel computing, per element, exactly the CPU kernel's statements.
TEST(CudaKernels, FusedPointwiseGroupHasTheCpuStatements) {
  auto context = kiln::test::makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @step(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = kiln.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
      %1 = kiln.add %x, %0 : tensor<4x8xf32>
      %2 = kiln.gelu %1 : tensor<4x8xf32>
      %3 = kiln.mul %2, %x : tensor<4x8xf32>
      return %3 : tensor<4x8xf32>
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  auto step = module->lookupSymbol<mlir::func::FuncOp>("step");
  kiln::KernelGroup group;
  for (mlir::Operation &op : step.getBody().front().without_terminator())
    group.ops.push_back(&op);
  group.inputs = {step.getArgument(0), step.getArgument(1)};
  group.outputs = {group.ops.back()->getResult(0)};

  auto cpu = kiln::CpuKernelEmitter::emit(group);
  auto cuda = kiln::CudaKernelEmitter::emit(group);
  ASSERT_TRUE(mlir::succeeded(cpu));
  ASSERT_TRUE(mlir::succeeded(cuda));
  EXPECT_EQ(cuda->ops, "kiln.broadcast,kiln.add,kiln.gelu,kiln.mul");
  EXPECT_EQ(cuda->entry.rfind("k_broadcast_add_gelu_", 0), 0u) << cuda->entry;
  EXPECT_EQ(cuda->launch.grid, 1u); // 32 elements, 8 per thread
  EXPECT_EQ(cuda->launch.block, 256u);
  // Each thread takes 8 consecutive elements: x (read plainly) is loaded
  // whole into registers and the result stored whole; the statements are
  // the CPU's with those reads and the store on the register copies. The
  // broadcast of b reads through the element index.
  EXPECT_NE(cuda->source.find("kiln_load_lanes8(in0 + i0)"), std::string::npos)
      << cuda->source;
  EXPECT_EQ(cuda->source.find("kiln_load_lanes8(in1"), std::string::npos);
  EXPECT_NE(cuda->source.find("kiln_store_lanes8(out0 + i0, out0_l)"), std::string::npos);
  EXPECT_NE(cuda->source.find("const int i = i0 + j;"), std::string::npos);
  auto onLanes = [](std::string line) {
    for (const char *buffer : {"in0", "out0"}) {
      std::string from = std::string(buffer) + "[i]";
      for (size_t at; (at = line.find(from)) != std::string::npos;)
        line.replace(at, from.size(), std::string(buffer) + "_l.v[j]");
    }
    return line;
  };
  std::istringstream lines(cpu->source);
  int statements = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("const float v") == std::string::npos &&
        line.find("out0[i] = ") == std::string::npos)
      continue;
    ++statements;
    EXPECT_NE(cuda->source.find(onLanes(line)), std::string::npos) << onLanes(line);
  }
  EXPECT_EQ(statements, 5); // four ops and the store
}

// Pointwise and data-movement kernels index in 32 bits when every buffer has
// fewer than 2^31 elements (and the loop fewer than 2^30), in 64 bits
// otherwise: a broadcast from a [2^31]-element input into a [2, 2^31]
// output must not wrap. A transpose that keeps its innermost dim (q, k, v's
// head split) moves 16 bytes at a time; one that does not moves elements.
TEST(CudaKernels, IndexWidthAndTransposeChunks) {
  auto context = kiln::test::makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @small(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = kiln.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
      %1 = kiln.add %x, %0 : tensor<4x8xf32>
      return %1 : tensor<4x8xf32>
    }
    func.func @heads(%q: tensor<2x16x4x64xbf16>) -> tensor<2x4x16x64xbf16> {
      %0 = kiln.transpose %q permutation = [0, 2, 1, 3] : tensor<2x16x4x64xbf16> -> tensor<2x4x16x64xbf16>
      return %0 : tensor<2x4x16x64xbf16>
    }
    func.func @columns(%a: tensor<8x12xf32>) -> tensor<12x8xf32> {
      %0 = kiln.transpose %a permutation = [1, 0] : tensor<8x12xf32> -> tensor<12x8xf32>
      return %0 : tensor<12x8xf32>
    }
    func.func @odd(%x: tensor<3x5xbf16>) -> tensor<3x5xbf16> {
      %0 = kiln.exp %x : tensor<3x5xbf16>
      return %0 : tensor<3x5xbf16>
    }
    func.func @large(%b: tensor<2147483648xf32>) -> tensor<2x2147483648xf32> {
      %0 = kiln.broadcast %b dims = [1] : tensor<2147483648xf32> -> tensor<2x2147483648xf32>
      %1 = kiln.exp %0 : tensor<2x2147483648xf32>
      return %1 : tensor<2x2147483648xf32>
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  auto kernel = [&](const char *name) {
    auto func = module->lookupSymbol<mlir::func::FuncOp>(name);
    kiln::KernelGroup group;
    for (mlir::Operation &op : func.getBody().front().without_terminator())
      group.ops.push_back(&op);
    for (mlir::BlockArgument arg : func.getArguments())
      group.inputs.push_back(arg);
    group.outputs = {group.ops.back()->getResult(0)};
    auto emitted = kiln::CudaKernelEmitter::emit(group);
    EXPECT_TRUE(mlir::succeeded(emitted)) << name;
    return mlir::succeeded(emitted) ? *emitted : kiln::CudaKernel();
  };
  kiln::CudaKernel small = kernel("small"), heads = kernel("heads"),
                   columns = kernel("columns"), odd = kernel("odd"),
                   large = kernel("large");
  // Pointwise loops take 8 consecutive elements per thread (q), each
  // element's index i = q * 8 + j in the same width.
  EXPECT_NE(small.source.find("for (int q = "), std::string::npos) << small.source;
  EXPECT_NE(small.source.find("const int i = i0 + j;"), std::string::npos);
  EXPECT_NE(small.source.find("32-bit index"), std::string::npos);
  EXPECT_NE(large.source.find("for (int64_t q = "), std::string::npos) << large.source;
  EXPECT_NE(large.source.find("const int64_t i = i0 + j;"), std::string::npos);
  EXPECT_EQ(large.source.find("32-bit index"), std::string::npos);
  // 15 elements are no whole runs of 8: one element per thread.
  EXPECT_NE(odd.source.find("for (int i = "), std::string::npos) << odd.source;
  EXPECT_EQ(odd.source.find("kiln_load_lanes8"), std::string::npos);
  // [2, 4, 16, 64] bf16: 1024 chunks of 8, one thread each.
  EXPECT_NE(heads.source.find("for (int k = "), std::string::npos) << heads.source;
  EXPECT_NE(heads.source.find("kiln_copy16("), std::string::npos);
  EXPECT_EQ(heads.launch.grid, 4u);
  EXPECT_NE(columns.source.find("for (int i = "), std::string::npos) << columns.source;
  EXPECT_EQ(columns.source.find("kiln_copy16("), std::string::npos);
}

// A group mixing a row op with pointwise ops is a row kernel (RowGroup, as
// on the CPU); one that cannot be is a diagnostic on the offending op: a
// prologue value the row op reads must be an output (the row op reads it
// from its buffer), and a kernel holds one row op.
TEST(CudaKernels, IllegalRowGroupsAreDiagnostics) {
  auto context = kiln::test::makeContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(context.get(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = kiln.exp %x : tensor<4x8xf32>
      %1 = kiln.softmax %0 : tensor<4x8xf32>
      %2 = kiln.softmax %1 : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  auto step = module->lookupSymbol<mlir::func::FuncOp>("step");
  std::vector<mlir::Operation *> ops;
  for (mlir::Operation &op : step.getBody().front().without_terminator())
    ops.push_back(&op);

  kiln::KernelGroup unstored; // exp -> softmax, exp's result in no buffer
  unstored.ops = {ops[0], ops[1]};
  unstored.inputs = {step.getArgument(0)};
  unstored.outputs = {ops[1]->getResult(0)};
  EXPECT_TRUE(mlir::failed(kiln::CudaKernelEmitter::emit(unstored)));
  EXPECT_NE(diagnostics.find("reads a prologue value that is not an output "
                             "of the kernel"),
            std::string::npos)
      << diagnostics;

  kiln::KernelGroup twoRows; // softmax -> softmax
  twoRows.ops = {ops[1], ops[2]};
  twoRows.inputs = {ops[0]->getResult(0)};
  twoRows.outputs = {ops[1]->getResult(0), ops[2]->getResult(0)};
  EXPECT_TRUE(mlir::failed(kiln::CudaKernelEmitter::emit(twoRows)));
  EXPECT_NE(diagnostics.find("a row kernel holds one row op and pointwise "
                             "ops only"),
            std::string::npos)
      << diagnostics;
}

} // namespace
