//===- CudnnAttentionTest.cpp - cuDNN fused attention without a GPU -------===//
//
// 1. The verifier's checks of KernelCall.cudnn_attention
//    (runtime/CudnnAttentionCheck.cpp): a well-formed one loads; each broken
//    field is refused with a message naming it.
// 2. --attention parsing, and --attention=cudnn on a CPU artifact.
// 3. libcudnn.so.9 (dlopen) and every descriptor of the SDPA forward and
//    backward graphs that needs no handle, built and finalized for causal
//    (T == S and bottom-right T < S), key-length, unmasked and grouped-query
//    cases, node lists asserted; what needs a device says so.
//    Skipped (with the loader's reason) where libcudnn is not installed.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/Artifact.h"
#include "runtime/Backend.h"
#include "runtime/RunOptions.h"
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/CudnnEmptyKeys.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/schema/CudnnWorkspace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace kiln::rt::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

enum : uint32_t { kLoss, kQ, kK, kV, kLens, kOut, kLse, kDout, kDq, kDk, kDv, kWorkspace };

// A CUDA artifact with one attention kernel call carrying `attention`
// (forwardSpec: B=2, H=4, KVH=2, T=S=16, D=Dv=8), its buffers shaped by the
// spec's sizes; a backward one passes the grad call's buffers.
ArtifactSpec attentionArtifact(const CudnnAttentionSpec &attention) {
  ArtifactSpec spec;
  spec.target = "cuda";
  spec.archs = {"sm_80"};
  auto bf16 = schema::DType_BF16;
  const int64_t B = attention.batch, H = attention.heads, KVH = attention.kvHeads,
                T = attention.qLen, S = attention.kvLen, D = attention.headDim,
                Dv = attention.valueDim;
  // [B, heads, rows, width], or [B, rows, heads, width] with tokens_major.
  auto perHead = [&](int64_t heads, int64_t rows, int64_t width) {
    return attention.tokensMajor ? std::vector<int64_t>{B, rows, heads, width}
                                 : std::vector<int64_t>{B, heads, rows, width};
  };
  spec.buffers = {{"loss", schema::BufferRole_Loss},
                  {"q", schema::BufferRole_Activation, bf16, perHead(H, T, D)},
                  {"k", schema::BufferRole_Activation, bf16, perHead(KVH, S, D)},
                  {"v", schema::BufferRole_Activation, bf16, perHead(KVH, S, Dv)},
                  {"lens", schema::BufferRole_Activation, schema::DType_I32, {B}},
                  {"out", schema::BufferRole_Activation, bf16, perHead(H, T, Dv)},
                  {"lse", schema::BufferRole_Activation, schema::DType_F32, {B, H, T}},
                  {"dout", schema::BufferRole_Activation, bf16, perHead(H, T, Dv)},
                  {"dq", schema::BufferRole_Activation, bf16, perHead(H, T, D)},
                  {"dk", schema::BufferRole_Activation, bf16, perHead(KVH, S, D)},
                  {"dv", schema::BufferRole_Activation, bf16, perHead(KVH, S, Dv)}};
  // The workspace kilnc reserves for cuDNN, when the spec names it.
  if (attention.workspace == static_cast<int32_t>(kWorkspace))
    spec.buffers.push_back({"cudnn_workspace", schema::BufferRole_Workspace,
                            schema::DType_F32, {64}});
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

// The artifact of `spec`, loaded, and its attention call's table.
struct LoadedTable {
  std::unique_ptr<Artifact> artifact;
  const schema::CudnnAttention *table = nullptr;
};
StatusOr<LoadedTable> loadTable(const CudnnAttentionSpec &spec) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Artifact> artifact,
                        Artifact::loadBytes(serializeArtifact(attentionArtifact(spec)),
                                            "model.kart"));
  const schema::CudnnAttention *table = artifact->program(ProgramKind::kStep)
                                            ->schedule()
                                            ->Get(0)
                                            ->op_as_KernelCall()
                                            ->cudnn_attention();
  return LoadedTable{std::move(artifact), table};
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
  // Causal with S > T (bottom-right aligned: every row keeps key 0).
  CudnnAttentionSpec longer = backwardSpec();
  longer.qLen = 8;
  Status bottomRight = load(attentionArtifact(longer));
  EXPECT_TRUE(bottomRight.ok()) << bottomRight.message();
  // With the workspace kilnc reserved: a Workspace buffer of its own.
  CudnnAttentionSpec reserved = backwardSpec();
  reserved.workspace = kWorkspace;
  Status withWorkspace = load(attentionArtifact(reserved));
  EXPECT_TRUE(withWorkspace.ok()) << withWorkspace.message();
  // Layout bthd: every per-head buffer [B, T, H, D].
  CudnnAttentionSpec tokensMajor = backwardSpec();
  tokensMajor.tokensMajor = true;
  Status bthd = load(attentionArtifact(tokensMajor));
  EXPECT_TRUE(bthd.ok()) << bthd.message();
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
  a.kvLen = 8; // causal, T > S: query rows 0..7 would have no key
  expectRefused(attentionArtifact(a), {"causal with q_len 16 > kv_len 8"});
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
  a = backwardSpec();
  a.workspace = kOut; // an activation the call passes
  expectRefused(attentionArtifact(a), {"cudnn_attention.workspace is buffer 5",
                                       "not a Workspace buffer of its own"});
  a = backwardSpec();
  a.workspace = 99;
  expectRefused(attentionArtifact(a), {"cudnn_attention.workspace is buffer 99"});
  a = backwardSpec();
  a.workspace = kWorkspace; // its own, but the kernel is passed it too
  ArtifactSpec passed = attentionArtifact(a);
  passed.schedule[0].buffers.push_back(kWorkspace);
  expectRefused(passed, {"cudnn_attention.workspace is buffer 11", "must not pass it"});
}

// tokens_major fixes the buffers' shapes: [B, H, T, D] buffers under a
// tokens_major call (or the reverse) are refused, naming the shape wanted.
TEST(CudnnAttentionVerifierTest, TokensMajorNeedsTokensMajorBuffers) {
  CudnnAttentionSpec a = forwardSpec();
  ArtifactSpec spec = attentionArtifact(a);
  spec.schedule[0].cudnnAttention->tokensMajor = true;
  expectRefused(spec, {"q", "[2, 16, 4, 8]"});
  a.tokensMajor = true;
  spec = attentionArtifact(a);
  spec.schedule[0].cudnnAttention->tokensMajor = false;
  expectRefused(spec, {"q", "[2, 4, 16, 8]"});
}

// The workspace kilnc reserves (runtime/schema/CudnnWorkspace.h) against
// what cuDNN 9.14 asked on an H100 for the backward (the largest of each
// artifact's plans; tools/bench/RESULTS.md, 2026-11-26): GPT-2 bf16
// [16, 1024] (12 heads, d 64) 51,118,336 bytes; Llama-3 1B [16, 2048] and
// [64, 2048] (32 heads on 8, d 64) 541,065,472 and 2,164,261,120 bytes.
TEST(CudnnWorkspaceTest, ReservationMatchesWhatCudnnAskedOnAnH100) {
  schema::CudnnSdpaShape gpt2{true, 16, 12, 12, 1024, 1024, 64, 64};
  EXPECT_EQ(schema::cudnnSdpaReservedBytes(gpt2), 51118336);
  schema::CudnnSdpaShape llama{true, 16, 32, 8, 2048, 2048, 64, 64};
  EXPECT_EQ(schema::cudnnSdpaReservedBytes(llama), 541065472);
  llama.batch = 64;
  EXPECT_EQ(schema::cudnnSdpaReservedBytes(llama), 2164261120);
  // Kiln's own part is what the runtime lays out after the engine's.
  EXPECT_EQ(schema::cudnnSdpaScratchBytes(llama), 64 * 32 * 2048 * (4 + 64 * 4));
  // A forward keeps one unit for the engine and no scratch.
  llama.backward = false;
  EXPECT_EQ(schema::cudnnSdpaReservedBytes(llama), 256);
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

// The forward (or, for a backward spec, backward) graph's nodes for `spec`
// (built from a real artifact's table; every descriptor finalized).
StatusOr<std::vector<std::string>> graphNodes(const cuda::Cudnn &cudnn,
                                              const CudnnAttentionSpec &spec) {
  KILN_ASSIGN_OR_RETURN(LoadedTable loaded, loadTable(spec));
  const schema::CudnnAttention &a = *loaded.table;
  cuda::SdpaOperations ops;
  if (spec.backward) {
    KILN_ASSIGN_OR_RETURN(ops, cuda::buildSdpaBackward(cudnn, a, "test"));
  } else {
    KILN_ASSIGN_OR_RETURN(ops, cuda::buildSdpaForward(cudnn, a, "test"));
  }
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
  auto nodes = graphNodes(*cudnn, causal);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "gen_index rows",
                                  "gen_index columns", "cmp_ge row column", "select causal",
                                  "reduce max", "sub max", "exp", "reduce sum", "log",
                                  "add stats", "div sum", "matmul P V"));

  CudnnAttentionSpec padding = forwardSpec();
  padding.causal = false;
  padding.kvLengths = kLens;
  nodes = graphNodes(*cudnn, padding);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "gen_index rows",
                                  "gen_index columns", "cmp_lt row seq_len_q",
                                  "cmp_lt column seq_len_kv", "and keeps", "select padding",
                                  "reduce max", "sub max", "exp", "reduce sum", "log",
                                  "add stats", "div sum", "matmul P V"));

  CudnnAttentionSpec plain = forwardSpec();
  plain.causal = false;
  nodes = graphNodes(*cudnn, plain);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "reduce max", "sub max",
                                  "exp", "reduce sum", "log", "add stats", "div sum",
                                  "matmul P V"));
  // Layout bthd: the same nodes, Q/K/V/O with [B, T, H, D]-order strides.
  CudnnAttentionSpec tokensMajor = padding;
  tokensMajor.tokensMajor = true;
  auto bthd = graphNodes(*cudnn, tokensMajor);
  ASSERT_TRUE(bthd.ok()) << bthd.status().message();
  EXPECT_EQ(*bthd, *graphNodes(*cudnn, padding));
}

TEST(CudnnLibraryTest, CausalWithLongerKeysOffsetsTheRowIndex) {
  std::string why;
  std::unique_ptr<cuda::Cudnn> cudnn = loadCudnnOrNull(why);
  if (!cudnn)
    GTEST_SKIP() << why;
  // T = 8 queries on S = 16 keys: Kiln keeps j <= i + 8 (bottom-right).
  CudnnAttentionSpec causal = forwardSpec();
  causal.qLen = 8;
  auto nodes = graphNodes(*cudnn, causal);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "gen_index rows",
                                  "gen_index columns", "add row S - T", "cmp_ge row column",
                                  "select causal", "reduce max", "sub max", "exp", "reduce sum",
                                  "log", "add stats", "div sum", "matmul P V"));
  // With key lengths too: both masks, each exactly Kiln's, padding first
  // (the frontend's order).
  causal.kvLengths = kLens;
  nodes = graphNodes(*cudnn, causal);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ElementsAre("matmul Q K^T", "mul scale", "gen_index rows",
                                  "gen_index columns", "cmp_lt row seq_len_q",
                                  "cmp_lt column seq_len_kv", "and keeps", "select padding",
                                  "add row S - T", "cmp_ge row column", "select causal",
                                  "reduce max", "sub max", "exp", "reduce sum", "log",
                                  "add stats", "div sum", "matmul P V"));
}

TEST(CudnnLibraryTest, BuildsEveryBackwardDescriptorWithoutAGpu) {
  std::string why;
  std::unique_ptr<cuda::Cudnn> cudnn = loadCudnnOrNull(why);
  if (!cudnn)
    GTEST_SKIP() << why;
  // No mask, one kv head per query head: dK / dV straight from the GEMMs.
  CudnnAttentionSpec plain = backwardSpec();
  plain.causal = false;
  plain.kvHeads = 4;
  auto nodes = graphNodes(*cudnn, plain);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes,
              ElementsAre("mul dO O", "reduce dO O", "mul softmax_sum 1", "matmul Q K^T",
                          "mul scale", "sub Stats", "exp", "reshape P", "matmul P^T dO",
                          "matmul dO V^T", "sub softmax_sum", "mul P", "mul dS scale",
                          "reshape dS", "matmul dS^T Q", "reshape K", "matmul dS K",
                          "identity dQ"));

  // Causal, grouped-query (4 query heads on 2): per-head dK / dV reduced.
  CudnnAttentionSpec causal = backwardSpec();
  nodes = graphNodes(*cudnn, causal);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes,
              ElementsAre("mul dO O", "reduce dO O", "mul softmax_sum 1", "matmul Q K^T",
                          "mul scale", "sub Stats", "gen_index rows", "gen_index columns",
                          "cmp_ge row column", "select causal", "exp", "reshape P",
                          "matmul P^T dO", "reduce dV heads", "matmul dO V^T",
                          "sub softmax_sum", "mul P", "mul dS scale", "reshape dS",
                          "matmul dS^T Q", "reduce dK heads", "reshape K", "matmul dS K",
                          "identity dQ"));

  // Key lengths (GQA), and causal with S > T plus key lengths.
  CudnnAttentionSpec padding = backwardSpec();
  padding.causal = false;
  padding.kvLengths = kLens;
  nodes = graphNodes(*cudnn, padding);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes,
              ElementsAre("mul dO O", "reduce dO O", "mul softmax_sum 1", "matmul Q K^T",
                          "mul scale", "sub Stats", "gen_index rows", "gen_index columns",
                          "cmp_lt row seq_len_q", "cmp_lt column seq_len_kv", "and keeps",
                          "select padding", "exp", "reshape P", "matmul P^T dO",
                          "reduce dV heads", "matmul dO V^T", "sub softmax_sum", "mul P",
                          "mul dS scale", "reshape dS", "matmul dS^T Q", "reduce dK heads",
                          "reshape K", "matmul dS K", "identity dQ"));
  CudnnAttentionSpec both = padding;
  both.causal = true;
  both.qLen = 8;
  nodes = graphNodes(*cudnn, both);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_THAT(*nodes, ::testing::Contains("add row S - T"));
  EXPECT_THAT(*nodes, ::testing::Contains("select padding"));
  // Layout bthd: the same graph, every per-head descriptor (inputs and
  // outputs) with [B, T, H, D]-order strides, finalized by cuDNN.
  CudnnAttentionSpec tokensMajor = both;
  tokensMajor.tokensMajor = true;
  auto bthdNodes = graphNodes(*cudnn, tokensMajor);
  ASSERT_TRUE(bthdNodes.ok()) << bthdNodes.status().message();
  EXPECT_EQ(*bthdNodes, *nodes);

  // Scratch after cuDNN's workspace: softmax_sum (B*H*T f32) and dQ_accum
  // (B*H*T*D f32), each rounded up to 256 bytes (both already are here).
  auto loaded = loadTable(causal);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const schema::CudnnAttention &a = *loaded->table;
  EXPECT_EQ(cuda::sdpaBackwardScratchBytes(a), 2 * 4 * 16 * 4 + 2 * 4 * 16 * 8 * 4);
  CudnnAttentionSpec odd = causal;
  odd.batch = 1, odd.heads = odd.kvHeads = 1, odd.qLen = 8, odd.kvLen = 8;
  auto small = loadTable(odd);
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(cuda::sdpaBackwardScratchBytes(*small->table),
            256 + 256); // 32 and 256 bytes, rounded up
  // A forward graph is not built from a backward table, nor the reverse.
  auto wrong = cuda::buildSdpaForward(*cudnn, a, "step entry 0");
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("buildSdpaForward of a backward"));
}

// The version gates of cudnn-frontend's SDPA support surface, by library
// version (no library needed): each refusal names the version and the rule.
TEST(CudnnVersionTest, GatesFollowTheSupportSurface) {
  auto check = [](const CudnnAttentionSpec &spec, size_t version) -> Status {
    KILN_ASSIGN_OR_RETURN(LoadedTable loaded, loadTable(spec));
    return cuda::sdpaSupported(version, *loaded.table, "step entry 0");
  };
  CudnnAttentionSpec forward = forwardSpec(); // causal, T = S = 16
  EXPECT_TRUE(check(forward, 90000).ok());
  EXPECT_TRUE(check(forward, 91900).ok());
  for (size_t bad : {91000, 91001}) {
    Status s = check(forward, bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s.message(), HasSubstr("known SDPA bugs"));
    EXPECT_THAT(s.message(), HasSubstr("step entry 0: cuDNN 9.10."));
  }
  EXPECT_TRUE(check(forward, 91002).ok());

  // Bottom-right causal (T = 8 < S = 16): 9.3, and multiples of 64 before 9.6.
  CudnnAttentionSpec bottomRight = forwardSpec();
  bottomRight.qLen = 8;
  EXPECT_THAT(check(bottomRight, 90200).message(), HasSubstr("needs cuDNN 9.3"));
  EXPECT_THAT(check(bottomRight, 90500).message(), HasSubstr("multiples of 64"));
  EXPECT_TRUE(check(bottomRight, 90600).ok());
  bottomRight.qLen = 64, bottomRight.kvLen = 128;
  EXPECT_TRUE(check(bottomRight, 90500).ok());

  // The backward: 9.6 (dQ accumulator), S % 128 without key lengths before
  // 9.16, and never T = S = 1.
  CudnnAttentionSpec backward = backwardSpec(); // S = 16
  EXPECT_THAT(check(backward, 90500).message(), HasSubstr("needs cuDNN 9.6"));
  EXPECT_THAT(check(backward, 91500).message(), HasSubstr("not a multiple of 128"));
  EXPECT_TRUE(check(backward, 91600).ok());
  backward.kvLengths = kLens;
  EXPECT_TRUE(check(backward, 91500).ok());
  backward.qLen = backward.kvLen = 1;
  EXPECT_THAT(check(backward, 91900).message(), HasSubstr("q_len = kv_len = 1"));

  // Masked scores: the lowest float before 9.10, -inf from 9.10 on.
  EXPECT_EQ(cuda::sdpaMaskedScore(90900), std::numeric_limits<float>::lowest());
  EXPECT_EQ(cuda::sdpaMaskedScore(91002), -std::numeric_limits<float>::infinity());
}

// The empty-sample fix-up (CudnnEmptyKeys.h) is runtime source: NVRTC
// compiles it for both archs Kiln targets, with both entries and no spills.
// (Its numerics are checked under host emulation in codegen_test.)
TEST(CudnnEmptyKeysTest, CompilesWithNvrtc) {
  auto nvrtc = cuda::Nvrtc::load();
  if (!nvrtc.ok())
    GTEST_SKIP() << nvrtc.status().message();
  for (const char *arch : {"sm_80", "sm_90a"}) {
    auto out = (*nvrtc)->compile(cuda::cudnnEmptyKeysSource(), "cudnn_empty_keys.cu", arch);
    ASSERT_TRUE(out.ok()) << arch << ": " << out.status().message();
    EXPECT_FALSE(out->cubin.empty());
    std::vector<std::string> entries;
    for (const cuda::KernelResources &k : cuda::parsePtxasReport(out->log)) {
      entries.push_back(k.entry);
      EXPECT_FALSE(k.spills()) << k.entry;
    }
    EXPECT_THAT(entries, ::testing::UnorderedElementsAre(cuda::kEmptyKeysBf16Entry,
                                                         cuda::kEmptyKeysF32Entry,
                                                         cuda::kClampLengthsEntry));
  }
}

TEST(CudnnLibraryTest, WhatNeedsADeviceSaysSo) {
  std::string why;
  std::unique_ptr<cuda::Cudnn> cudnn = loadCudnnOrNull(why);
  if (!cudnn)
    GTEST_SKIP() << why;
  auto loaded = loadTable(forwardSpec());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const schema::CudnnAttention &a = *loaded->table;
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
