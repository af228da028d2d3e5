//===- CudnnAttentionTest.cpp - cuDNN fused attention without a GPU -------===//
//
// 1. The verifier's checks of KernelCall.cudnn_attention
//    (runtime/CudnnAttentionCheck.cpp): a well-formed one loads; each broken
//    field is refused with a message naming it.
// 2. --attention parsing, and --attention=cudnn on a CPU artifact.
// 3. libcudnn.so.9 (dlopen) and every descriptor of the SDPA forward graph
//    that needs no handle, built and finalized for causal, key-length,
//    unmasked and grouped-query cases; what needs a device says so.
//    Skipped (with the loader's reason) where libcudnn is not installed.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/Artifact.h"
#include "runtime/Backend.h"
#include "runtime/RunOptions.h"
#include "runtime/cuda/Cudnn.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

enum : uint32_t { kLoss, kQ, kK, kV, kLens, kOut, kLse, kDout, kDq, kDk, kDv };

// A CUDA artifact with one attention kernel call (B=2, H=4, KVH=2, T=S=16,
// D=Dv=8) carrying `attention`; and, when `backward`, a grad call.
ArtifactSpec attentionArtifact(const CudnnAttentionSpec &attention) {
  ArtifactSpec spec;
  spec.target = "cuda";
  spec.archs = {"sm_80"};
  auto bf16 = schema::DType_BF16;
  spec.buffers = {{"loss", schema::BufferRole_Loss},
                  {"q", schema::BufferRole_Activation, bf16, {2, 4, 16, 8}},
                  {"k", schema::BufferRole_Activation, bf16, {2, 2, 16, 8}},
                  {"v", schema::BufferRole_Activation, bf16, {2, 2, 16, 8}},
                  {"lens", schema::BufferRole_Activation, schema::DType_I32, {2}},
                  {"out", schema::BufferRole_Activation, bf16, {2, 4, 16, 8}},
                  {"lse", schema::BufferRole_Activation, schema::DType_F32, {2, 4, 16}},
                  {"dout", schema::BufferRole_Activation, bf16, {2, 4, 16, 8}},
                  {"dq", schema::BufferRole_Activation, bf16, {2, 4, 16, 8}},
                  {"dk", schema::BufferRole_Activation, bf16, {2, 2, 16, 8}},
                  {"dv", schema::BufferRole_Activation, bf16, {2, 2, 16, 8}}};
  schema::KernelLaunch launch(1, 128, 0);
  spec.kernels.push_back({"k_attention", "extern \"C\" __global__ void k_attention(void *const *b) {}",
                          "test.kiln:3:1", "kiln.attention", std::nullopt, false, launch});
  spec.kernels.push_back({"k_loss", "extern \"C\" __global__ void k_loss(void *const *b) {}",
                          "test.kiln:4:1", "kiln.sum", std::nullopt, false, launch});
  StepSpec call;
  call.kernel = 0;
  call.buffers = attention.backward
                     ? std::vector<uint32_t>{kQ, kK, kV, kOut, kLse, kDout, kLens, kDq, kDk, kDv}
                     : std::vector<uint32_t>{kQ, kK, kV, kLens, kOut, kLse};
  call.cudnnAttention = attention;
  spec.schedule.push_back(call);
  StepSpec loss;
  loss.kernel = 1;
  loss.buffers = {kOut, kLoss};
  spec.schedule.push_back(loss);
  return spec;
}

CudnnAttentionSpec forwardSpec() {
  CudnnAttentionSpec a;
  a.batch = 2, a.heads = 4, a.kvHeads = 2, a.qLen = 16, a.kvLen = 16;
  a.headDim = 8, a.valueDim = 8, a.scale = 0.35f, a.causal = true;
  a.q = kQ, a.k = kK, a.v = kV, a.out = kOut, a.lse = kLse;
  return a;
}

CudnnAttentionSpec backwardSpec() {
  CudnnAttentionSpec a = forwardSpec();
  a.backward = true;
  a.dout = kDout, a.dq = kDq, a.dk = kDk, a.dv = kDv;
  return a;
}

Status load(const ArtifactSpec &spec) {
  auto artifact = Artifact::loadBytes(serializeArtifact(spec), "model.kart");
  return artifact.ok() ? okStatus() : artifact.status();
}

TEST(CudnnAttentionVerifierTest, AcceptsForwardAndBackward) {
  Status forward = load(attentionArtifact(forwardSpec()));
  EXPECT_TRUE(forward.ok()) << forward.message();
  Status backward = load(attentionArtifact(backwardSpec()));
  EXPECT_TRUE(backward.ok()) << backward.message();
  CudnnAttentionSpec padding = forwardSpec();
  padding.causal = false;
  padding.kvLengths = kLens;
  Status padded = load(attentionArtifact(padding));
  EXPECT_TRUE(padded.ok()) << padded.message();
}

// Loads `spec` and expects an error containing every piece of `expected`.
void expectRefused(const ArtifactSpec &spec, const std::vector<std::string> &expected) {
  Status status = load(spec);
  ASSERT_FALSE(status.ok());
  for (const std::string &piece : expected)
    EXPECT_THAT(status.message(), HasSubstr(piece));
  EXPECT_THAT(status.message(), HasSubstr("test.kiln:2:3")); // the call's location
}

TEST(CudnnAttentionVerifierTest, RefusesBadFields) {
  {
    ArtifactSpec spec = attentionArtifact(forwardSpec());
    spec.target = "cpu";
    spec.archs.clear();
    for (KernelSpec &k : spec.kernels)
      k.launch.reset();
    expectRefused(spec, {"cudnn_attention on a non-CUDA artifact"});
  }
  CudnnAttentionSpec a = forwardSpec();
  a.headDim = 12;
  expectRefused(attentionArtifact(a), {"head dim 12"});
  a = forwardSpec();
  a.kvHeads = 3;
  expectRefused(attentionArtifact(a), {"kv_heads 3 does not divide heads 4"});
  a = forwardSpec();
  a.kvLen = 8;
  expectRefused(attentionArtifact(a), {"causal with q_len 16 != kv_len 8"});
  a = forwardSpec();
  a.batch = 0;
  expectRefused(attentionArtifact(a), {"non-positive size"});
  a = forwardSpec();
  a.q = kDq; // a buffer the call does not pass
  expectRefused(attentionArtifact(a), {"cudnn_attention.q is buffer 8", "does not pass"});
  a = forwardSpec();
  a.lse = kLens; // passed, but i32 [2]
  expectRefused(attentionArtifact(a), {"cudnn_attention.lse", "I32 [2]", "F32 [2, 4, 16]"});
  a = forwardSpec();
  a.k = kQ; // passed, but [2, 4, 16, 8] where k is [2, 2, 16, 8]
  expectRefused(attentionArtifact(a), {"cudnn_attention.k", "BF16 [2, 2, 16, 8]"});
  a = forwardSpec();
  a.kvLengths = kOut;
  expectRefused(attentionArtifact(a), {"cudnn_attention.kv_lengths", "I32 [2]"});
  a = forwardSpec();
  a.dq = kOut;
  expectRefused(attentionArtifact(a), {"is a forward but sets dq"});
  a = backwardSpec();
  a.dv = -1;
  expectRefused(attentionArtifact(a), {"cudnn_attention.dv is buffer -1"});
}

TEST(CudnnAttentionOptionsTest, ParsesAttentionFlag) {
  auto parsed = parseRunCommandLine({"m.kart", "--steps", "1", "--attention=cudnn"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.attention, AttentionDispatch::kCudnn);
  parsed = parseRunCommandLine({"m.kart", "--steps", "1", "--attention", "kiln"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.attention, AttentionDispatch::kKiln);
  parsed = parseRunCommandLine({"m.kart", "--steps", "1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.attention, AttentionDispatch::kAuto);
  parsed = parseRunCommandLine({"m.kart", "--steps", "1", "--attention=cudn"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("--attention: unknown value 'cudn' (expected auto, kiln or cudnn)"));
}

TEST(CudnnAttentionOptionsTest, CudnnOnCpuArtifactIsAnError) {
  auto artifact = Artifact::loadBytes(serializeArtifact(minimalArtifact()), "model.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  BackendOptions options;
  options.attention = AttentionDispatch::kCudnn;
  auto backend = createBackend(**artifact, options);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(),
              HasSubstr("--attention=cudnn needs a CUDA artifact (this one is for the CPU"));
}

// The library, or a skip naming why it cannot be loaded here.
std::unique_ptr<cuda::Cudnn> loadCudnnOrNull(std::string &why) {
  auto cudnn = cuda::Cudnn::load();
  if (!cudnn.ok()) {
    why = cudnn.status().message();
    return nullptr;
  }
  return std::move(*cudnn);
}

// The forward graph's nodes for `spec` (built from a real artifact's table).
StatusOr<std::vector<std::string>> forwardNodes(const cuda::Cudnn &cudnn,
                                                const CudnnAttentionSpec &spec) {
  auto artifact = Artifact::loadBytes(serializeArtifact(attentionArtifact(spec)), "model.kart");
  if (!artifact.ok())
    return artifact.status();
  const schema::Program *step = (*artifact)->program(ProgramKind::kStep);
  const schema::CudnnAttention &a =
      *step->schedule()->Get(0)->op_as_KernelCall()->cudnn_attention();
  KILN_ASSIGN_OR_RETURN(cuda::SdpaOperations ops, cuda::buildSdpaForward(cudnn, a, "test"));
  if (ops.operations.size() != ops.nodeNames.size())
    return internalError("operations and names differ");
  return ops.nodeNames;
}

TEST(CudnnLibraryTest, BuildsEveryForwardDescriptorWithoutAGpu) {
  std::string why;
  std::unique_ptr<cuda::Cudnn> cudnn = loadCudnnOrNull(why);
  if (!cudnn)
    GTEST_SKIP() << why;
  EXPECT_THAT(cudnn->version(), ::testing::StartsWith("9."));

  CudnnAttentionSpec causal = forwardSpec(); // GQA: 4 query heads on 2
  auto nodes = forwardNodes(*cudnn, causal);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "gen_index rows",
                                  "gen_index columns", "cmp_ge row column", "select causal",
                                  "reduce max", "sub max", "exp", "reduce sum", "log",
                                  "add stats", "div sum", "matmul P V"));

  CudnnAttentionSpec padding = forwardSpec();
  padding.causal = false;
  padding.kvLengths = kLens;
  nodes = forwardNodes(*cudnn, padding);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "gen_index rows",
                                  "gen_index columns", "cmp_lt row seq_len_q",
                                  "cmp_lt column seq_len_kv", "and keeps", "select padding",
                                  "reduce max", "sub max", "exp", "reduce sum", "log",
                                  "add stats", "div sum", "matmul P V"));

  CudnnAttentionSpec plain = forwardSpec();
  plain.causal = false;
  nodes = forwardNodes(*cudnn, plain);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "reduce max", "sub max",
                                  "exp", "reduce sum", "log", "add stats", "div sum",
                                  "matmul P V"));
}

TEST(CudnnLibraryTest, WhatNeedsADeviceSaysSo) {
  std::string why;
  std::unique_ptr<cuda::Cudnn> cudnn = loadCudnnOrNull(why);
  if (!cudnn)
    GTEST_SKIP() << why;
  auto artifact =
      Artifact::loadBytes(serializeArtifact(attentionArtifact(forwardSpec())), "model.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  const schema::CudnnAttention &a = *(*artifact)
                                         ->program(ProgramKind::kStep)
                                         ->schedule()
                                         ->Get(0)
                                         ->op_as_KernelCall()
                                         ->cudnn_attention();
  // Plans need a handle; without one the error says so (no crash).
  auto plan = cuda::CudnnAttentionPlan::create(*cudnn, a, {}, "step entry 0");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("step entry 0: no cuDNN handle"));
  // cudnnCreate needs a device: on a machine without one, a cuDNN error
  // naming the call (on a GPU machine it succeeds).
  Status handle = cudnn->createHandle(nullptr);
  if (!handle.ok())
    EXPECT_THAT(handle.message(), HasSubstr("cudnnCreate"));
}

} // namespace
} // namespace kiln::rt::test
