//===- ArtifactTest.cpp - Loader and verifier of .kart files --------------===//
//
// Every way a file can be wrong must give a message naming the file and the
// problem, never a crash: empty, truncated, foreign, wrong version, and each
// content check of ArtifactVerifier.cpp.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/Artifact.h"
#include "runtime/schema/ArtifactChecksum.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;

Status loadSpec(const ArtifactSpec &spec) {
  auto artifact = Artifact::loadBytes(serializeArtifact(spec), "model.kart");
  return artifact.ok() ? okStatus() : artifact.status();
}

TEST(ArtifactTest, LoadsMinimalArtifact) {
  auto artifact =
      Artifact::loadBytes(serializeArtifact(minimalArtifact()), "model.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_EQ((*artifact)->numBuffers(), 1u);
  EXPECT_EQ((*artifact)->bufferInfo(0).elements, 1);
  EXPECT_EQ((*artifact)->bufferInfo(0).bytes, 4);
}

TEST(ArtifactTest, LoadsBigramArtifactWithAliases) {
  auto artifact = Artifact::loadBytes(
      serializeArtifact(bigramArtifact(2, 4, 16)), "model.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_EQ((*artifact)->bufferInfo(13).storage, 4u);
  EXPECT_EQ((*artifact)->bufferInfo(4).storage, 4u);
}

TEST(ArtifactTest, EmptyFile) {
  auto artifact = Artifact::loadBytes({}, "model.kart");
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().message(),
            "model.kart: empty file (0 bytes), not a Kiln artifact");
}

TEST(ArtifactTest, TooSmallFile) {
  auto artifact = Artifact::loadBytes({1, 2, 3}, "model.kart");
  ASSERT_FALSE(artifact.ok());
  EXPECT_THAT(artifact.status().message(),
              HasSubstr("model.kart: too small to be a Kiln artifact (3 bytes)"));
}

TEST(ArtifactTest, ForeignFileNamesItsIdentifier) {
  // The first bytes of a zip file (a PyTorch checkpoint, say).
  std::vector<uint8_t> zip = {'P', 'K', 3, 4, 'P', 'K', 3, 4, 0, 0, 0, 0};
  auto artifact = Artifact::loadBytes(zip, "model.kart");
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().message(),
            "model.kart: not a Kiln artifact (file identifier is "
            "'PK\\x03\\x04', expected 'KART')");
}

TEST(ArtifactTest, TextFileGetsAHint) {
  std::string text = "module attributes {kiln.model = \"tiny\"} {}\n";
  auto artifact = Artifact::loadBytes(
      std::vector<uint8_t>(text.begin(), text.end()), "model.kart");
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().message(),
            "model.kart: not a Kiln artifact (file identifier is 'le a', "
            "expected 'KART'); this is a text file (MLIR or a model file?), "
            "not the binary artifact kilnc writes");
}

// Replaces the checksum trailer of `bytes` by one matching the (possibly
// modified) flatbuffer before it: a crafted file, which only the flatbuffers
// verifier and the content checks can reject.
std::vector<uint8_t> reseal(std::vector<uint8_t> bytes) {
  bytes.resize(bytes.size() - schema::kChecksumTrailerBytes);
  std::string trailer = schema::checksumTrailer(bytes.data(), bytes.size());
  bytes.insert(bytes.end(), trailer.begin(), trailer.end());
  return bytes;
}

// Bytes after the trailer (an artifact appended to, or two concatenated):
// said as such, not as a truncation.
TEST(ArtifactTest, BytesAfterTheTrailer) {
  std::vector<uint8_t> bytes = serializeArtifact(bigramArtifact(2, 4, 16));
  bytes.insert(bytes.end(), {'x', 'y', 'z'});
  auto artifact = Artifact::loadBytes(bytes, "model.kart");
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().message(),
            "model.kart: 3 stray bytes follow the checksum trailer that ends every "
            "artifact; something appended to the file after kilnc wrote it");
}

TEST(ArtifactTest, TruncatedFile) {
  std::vector<uint8_t> bytes = serializeArtifact(bigramArtifact(2, 4, 16));
  for (size_t keep : {bytes.size() / 4, bytes.size() / 2, bytes.size() - 8}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + keep);
    auto artifact = Artifact::loadBytes(cut, "model.kart");
    ASSERT_FALSE(artifact.ok()) << "kept " << keep;
    EXPECT_EQ(artifact.status().message(),
              "model.kart: truncated (the checksum trailer kilnc writes at the "
              "end of every artifact is missing)");
  }
}

TEST(ArtifactTest, TruncatedFlatbufferWithATrailerFailsVerification) {
  std::vector<uint8_t> bytes = serializeArtifact(bigramArtifact(2, 4, 16));
  std::vector<uint8_t> flatbuffer(bytes.begin(),
                                  bytes.end() - schema::kChecksumTrailerBytes);
  for (size_t keep : {flatbuffer.size() / 4, flatbuffer.size() / 2}) {
    std::vector<uint8_t> cut(flatbuffer.begin(), flatbuffer.begin() + keep);
    cut.resize(cut.size() + schema::kChecksumTrailerBytes);
    auto artifact = Artifact::loadBytes(reseal(cut), "model.kart");
    ASSERT_FALSE(artifact.ok()) << "kept " << keep;
    EXPECT_EQ(artifact.status().message(),
              "model.kart: truncated or corrupt (flatbuffers verification "
              "failed)");
  }
}

TEST(ArtifactTest, EveryFlippedByteIsAChecksumMismatch) {
  std::vector<uint8_t> bytes = serializeArtifact(bigramArtifact(2, 4, 16));
  // Past the identifier (a flip there is "not a Kiln artifact") and before
  // the trailer's magic (a flip there is "truncated").
  for (size_t i = 8; i < bytes.size() - schema::kChecksumTrailerBytes; i += 3) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x01;
    auto artifact = Artifact::loadBytes(bad, "model.kart");
    ASSERT_FALSE(artifact.ok()) << "byte " << i;
    EXPECT_THAT(artifact.status().message(),
                ::testing::HasSubstr("corrupt: checksum mismatch"))
        << "byte " << i;
  }
}

TEST(ArtifactTest, CraftedBytesNeverCrash) {
  std::vector<uint8_t> bytes = serializeArtifact(bigramArtifact(2, 4, 16));
  // Flip bytes all over the flatbuffer and reseal the checksum; each result
  // must be a Status, either way.
  for (size_t i = 8; i < bytes.size() - schema::kChecksumTrailerBytes; i += 7) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0xff;
    (void)Artifact::loadBytes(reseal(bad), "model.kart");
  }
  SUCCEED();
}

TEST(ArtifactTest, EveryCraftedByteFlipIsAStatusNotACrash) {
  std::vector<uint8_t> bytes = serializeArtifact(minimalArtifact());
  for (size_t i = 0; i < bytes.size() - schema::kChecksumTrailerBytes; ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = bytes;
      bad[i] ^= mask;
      (void)Artifact::loadBytes(reseal(bad), "model.kart");
    }
  }
  SUCCEED();
}

TEST(ArtifactTest, UnionTypeWithoutValue) {
  ArtifactSpec spec = minimalArtifact();
  spec.schedule[0].omitOperation = true;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("step[0] (test.kiln:2:3): KernelCall entry has no "
                        "operation"));
  spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].omitOperation = true;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall entry has no operation"));
}

TEST(ArtifactTest, VersionMismatch) {
  ArtifactSpec spec = minimalArtifact();
  spec.version = kArtifactVersion + 1;
  Status status = loadSpec(spec);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("model.kart: artifact format version " +
                        std::to_string(kArtifactVersion + 1) +
                        ", but this kiln-run reads version " +
                        std::to_string(kArtifactVersion)));
}

TEST(ArtifactTest, MissingFileNamesPath) {
  auto artifact = Artifact::loadFile("/nonexistent/model.kart");
  ASSERT_FALSE(artifact.ok());
  EXPECT_EQ(artifact.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(artifact.status().message(), HasSubstr("/nonexistent/model.kart"));
}

TEST(ArtifactTest, UnsupportedTarget) {
  ArtifactSpec spec = minimalArtifact();
  spec.target = "rocm";
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("target 'rocm' is not supported"));
}

// The minimal artifact as CUDA: archs and a launch configuration per kernel.
ArtifactSpec minimalCudaArtifact() {
  ArtifactSpec spec = minimalArtifact();
  spec.target = "cuda";
  spec.archs = {"sm_80", "sm_90a"};
  spec.kernels[0].launch = schema::KernelLaunch(1, 32, 0);
  return spec;
}

TEST(ArtifactTest, CudaArtifactIsAccepted) {
  EXPECT_TRUE(loadSpec(minimalCudaArtifact()).ok());
}

// A CUDA artifact must say what its kernels were checked for, with names
// NVRTC understands.
TEST(ArtifactTest, CudaArtifactNeedsValidArchs) {
  ArtifactSpec spec = minimalCudaArtifact();
  spec.archs.clear();
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("without architectures"));
  spec.archs = {"sm_80", "compute_90"};
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("archs has 'compute_90'"));
}

// An empty grid or a block over the hardware's 1024 threads would only fail
// at the first launch; the loader refuses it with the kernel's location.
TEST(ArtifactTest, CudaKernelsNeedAValidLaunch) {
  ArtifactSpec spec = minimalCudaArtifact();
  spec.kernels[0].launch.reset();
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("kernel 0 (test.kiln:1:1): a CUDA kernel without a "
                        "launch configuration"));
  spec.kernels[0].launch = schema::KernelLaunch(1, 2048, 0);
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("block 2048"));
  spec.kernels[0].launch = schema::KernelLaunch(0, 128, 0);
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("launch grid 0"));
}

// The kernel's source bakes in its arguments' sizes: a call table that does
// not match them (a crafted or corrupt artifact) would read out of bounds.
TEST(ArtifactTest, KernelCallMustMatchTheKernelSignature) {
  ArtifactSpec spec = minimalArtifact();
  spec.kernels[0].args = std::vector<schema::KernelArg>{};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("KernelCall passes 1 buffers to kernel 'k_one', which "
                        "takes 0"));
  spec = minimalArtifact();
  spec.kernels[0].args =
      std::vector<schema::KernelArg>{{schema::DType_F32, 1024}};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("KernelCall argument 0 is buffer 0 (1 elements of "
                        "dtype 0), but kernel 'k_one' takes 1024 elements"));
  spec = minimalArtifact();
  spec.kernels[0].args = std::vector<schema::KernelArg>{{schema::DType_I32, 1}};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("takes 1 elements of dtype 3"));
}

TEST(ArtifactTest, KernelIndexOutOfRange) {
  ArtifactSpec spec = minimalArtifact();
  spec.schedule[0].kernel = 5;
  EXPECT_EQ(loadSpec(spec).message(),
            "model.kart: step[0] (test.kiln:2:3): KernelCall of kernel "
            "5, but the artifact has 1 kernels");
}

TEST(ArtifactTest, KernelBufferOutOfRange) {
  ArtifactSpec spec = minimalArtifact();
  spec.kernels[0].args = std::vector<schema::KernelArg>{
      {schema::DType_F32, 1}, {schema::DType_F32, 1}};
  spec.schedule[0].buffers = {0, 9};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("KernelCall argument 1 is buffer 9, but the artifact "
                        "has 1 buffers"));
}

TEST(ArtifactTest, GemmBufferOutOfRange) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].gemm.c = 99;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall operand C is buffer 99"));
}

TEST(ArtifactTest, GemmTooLargeForBuffer) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].gemm.n = 17; // W is [16, 16]
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall operand B (buffer 2 'W') has 256 elements"));
}

TEST(ArtifactTest, GemmBatchStrideOverrun) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].gemm.strideC = 4 * 16 + 1;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall operand C (buffer 4 'logits')"));
}

TEST(ArtifactTest, GemmHugeBatchDoesNotOverflow) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].gemm.batch = int64_t(1) << 62;
  spec.schedule[1].gemm.strideA = int64_t(1) << 62;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("GemmCall operand A"));
}

// The bigram's dW = x^T dlogits GEMM (step 3, m = n = 16) with a bias
// gradient epilogue: its bias buffer must exist, be F32 of n elements and
// not share C's storage; epilogues need batch 1; no epilogue, no bias.
TEST(ArtifactTest, GemmEpilogueBiasOutOfRange) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[3].gemm.epilogue = schema::GemmEpilogue_BgradB;
  spec.schedule[3].gemm.bias = 99;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall epilogue BgradB bias is buffer 99, but the "
                        "artifact has"));
}

TEST(ArtifactTest, GemmEpilogueBiasWrongSize) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[3].gemm.epilogue = schema::GemmEpilogue_BgradB;
  spec.schedule[3].gemm.bias = 2; // W: 256 elements, not n = 16
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("bias (buffer 2 'W') has 256 elements of F32, "
                        "expected 16 of F32"));
}

TEST(ArtifactTest, GemmEpilogueBiasInStorageOfC) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[3].gemm.epilogue = schema::GemmEpilogue_Dgelu;
  spec.schedule[3].gemm.aux = spec.schedule[3].gemm.c; // m * n elements
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("epilogue Dgelu reads aux in the storage of C"));
}

TEST(ArtifactTest, GemmEpilogueMissingAuxOrExtraBias) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[3].gemm.epilogue = schema::GemmEpilogue_Dgelu;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("epilogue Dgelu aux is buffer -1"));
  spec.schedule[3].gemm.epilogue = schema::GemmEpilogue_None;
  spec.schedule[3].gemm.bias = 2;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall with epilogue None has bias buffer 2 "
                        "(expected -1"));
}

TEST(ArtifactTest, GemmEpilogueNeedsBatchOne) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].gemm.epilogue = schema::GemmEpilogue_Gelu; // batch 2
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall epilogue Gelu with batch 2 (epilogues need "
                        "batch 1)"));
}

// A bf16 result is fp32 accumulation rounded: only bf16 operands may have
// one (an fp32 GEMM writing bf16 would silently lose precision).
TEST(ArtifactTest, GemmBf16ResultNeedsBf16Operands) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  uint32_t c = spec.schedule[1].gemm.c;
  spec.buffers[c].dtype = schema::DType_BF16;
  for (BufferSpec &view : spec.buffers) // reshape views of C match its type
    if (view.aliasOf == static_cast<int32_t>(c))
      view.dtype = schema::DType_BF16;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("GemmCall operand C (buffer 4 'logits') is BF16, "
                        "expected F32"));
}

// A bf16 GEMM (bf16 A, B and C) with an epilogue, as precision = bf16
// fuses them: only Bias / BiasGelu, with the bias and aux in C's type
// (cuBLASLt takes them in D's type). Built as a copy of the bigram's dW GEMM
// (step 3: op(A) = x^T, 16x16 from k = 8) over new bf16 buffers.
ArtifactSpec bf16EpilogueArtifact(schema::GemmEpilogue epilogue,
                                  schema::DType biasType) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  auto add = [&](const char *name, schema::DType dtype,
                 std::vector<int64_t> shape) {
    spec.buffers.push_back(
        {name, schema::BufferRole_Activation, dtype, std::move(shape)});
    return static_cast<int32_t>(spec.buffers.size() - 1);
  };
  int32_t a = add("a16", schema::DType_BF16, {8, 16});
  int32_t b = add("b16", schema::DType_BF16, {8, 16});
  int32_t c = add("c16", schema::DType_BF16, {16, 16});
  int32_t bias = add("bias", biasType, {16});
  auto gemm = spec.schedule[3];
  gemm.gemm.a = a;
  gemm.gemm.b = b;
  gemm.gemm.c = c;
  gemm.gemm.epilogue = epilogue;
  gemm.gemm.bias = bias;
  spec.schedule.push_back(gemm);
  return spec;
}

TEST(ArtifactTest, GemmBf16EpilogueBiasTakesCsType) {
  EXPECT_TRUE(loadSpec(bf16EpilogueArtifact(schema::GemmEpilogue_Bias,
                                            schema::DType_BF16))
                  .ok());
  EXPECT_THAT(loadSpec(bf16EpilogueArtifact(schema::GemmEpilogue_Bias,
                                            schema::DType_F32))
                  .message(),
              HasSubstr("epilogue Bias bias (buffer 19 'bias') has 16 "
                        "elements of F32, expected 16 of BF16"));
}

// A bias gradient written in bf16 would round the sum: BgradB needs an F32 C
// (its bias then F32), under precision = bf16 too.
TEST(ArtifactTest, GemmBf16EpilogueNoBiasGradient) {
  EXPECT_THAT(loadSpec(bf16EpilogueArtifact(schema::GemmEpilogue_BgradB,
                                            schema::DType_BF16))
                  .message(),
              HasSubstr("GemmCall epilogue BgradB with a BF16 C (only Bias, "
                        "BiasGelu and Dgelu have a bf16 form)"));
}

// Dgelu with a bf16 C reads the forward's bf16 gelu input as its aux
// (cuBLASLt's aux has D's type); an F32 aux is refused.
TEST(ArtifactTest, GemmBf16DgeluReadsBf16Aux) {
  auto dgelu = [](schema::DType auxType) {
    ArtifactSpec spec = bf16EpilogueArtifact(schema::GemmEpilogue_Dgelu,
                                             schema::DType_BF16);
    spec.buffers.push_back(
        {"aux", schema::BufferRole_Activation, auxType, {16, 16}});
    auto &gemm = spec.schedule.back().gemm;
    gemm.bias = -1;
    gemm.aux = static_cast<int32_t>(spec.buffers.size() - 1);
    return loadSpec(spec);
  };
  EXPECT_TRUE(dgelu(schema::DType_BF16).ok());
  EXPECT_THAT(dgelu(schema::DType_F32).message(),
              HasSubstr("epilogue Dgelu aux (buffer 20 'aux') has 256 "
                        "elements of F32, expected 256 of BF16"));
}

TEST(ArtifactTest, GemmNonPositiveDims) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.schedule[1].gemm.k = 0;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("all must be >= 1"));
}

TEST(ArtifactTest, NegativeDimension) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers.push_back({"h", schema::BufferRole_Activation,
                          schema::DType_F32, {4, -2}});
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 1 ('h') has negative dimension -2 at axis 1"));
}

TEST(ArtifactTest, AbsurdlyLargeBuffer) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers.push_back({"h", schema::BufferRole_Activation,
                          schema::DType_F32, {1 << 30, 1 << 30, 1 << 30}});
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("larger than 1 TiB"));
}

TEST(ArtifactTest, AliasMustBeEarlier) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers.push_back({"h", schema::BufferRole_Activation,
                          schema::DType_F32, {4}});
  spec.buffers.back().aliasOf = 1;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 1 ('h') aliases buffer 1, which is not an "
                        "earlier buffer"));
}

TEST(ArtifactTest, AliasMustHaveSameSize) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers.push_back({"h", schema::BufferRole_Activation,
                          schema::DType_F32, {4}});
  spec.buffers.push_back({"h2", schema::BufferRole_Activation,
                          schema::DType_F32, {2, 3}});
  spec.buffers.back().aliasOf = 1;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("sizes differ"));
}

TEST(ArtifactTest, ExactlyOneLoss) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers.push_back({"loss2", schema::BufferRole_Loss});
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("has more than one buffer with role Loss"));
  spec.buffers[0].role = schema::BufferRole_Activation;
  spec.buffers[1].role = schema::BufferRole_Activation;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("has no buffer with role Loss"));
}

TEST(ArtifactTest, ParameterNeedsInitializer) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.buffers[2].init.reset();
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 2 ('W') is a Parameter without an Initializer"));
}

TEST(ArtifactTest, ConstantDataSizeMustMatch) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.buffers[14].constantData.push_back(0);
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("is a Constant of 4 bytes but has 5 bytes of "
                        "constant_data"));
}

TEST(ArtifactTest, GradientNeedsParameter) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.buffers[7].name = "V";
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("is a Gradient of no Parameter of that name"));
}

TEST(ArtifactTest, InputShapeMustBeBatchBySeq) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.buffers[0].shape = {2, 5};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("must be i32 [batch, seq] = [2, 4]"));
}

TEST(ArtifactTest, UnknownInputName) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.buffers[0].name = "images";
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("is an Input the data loader cannot fill"));
}

TEST(ArtifactTest, UnknownDType) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers.push_back({"h", schema::BufferRole_Activation,
                          static_cast<schema::DType>(42), {4}});
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("unknown dtype 42"));
}

TEST(ArtifactTest, LossMustBeF32Scalar) {
  ArtifactSpec spec = minimalArtifact();
  spec.buffers[0].shape = {3};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("has role Loss but 3 elements (expected one f32)"));
}

TEST(ArtifactTest, BadKernelEntry) {
  ArtifactSpec spec = minimalArtifact();
  spec.kernels[0].entry = "k one";
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("kernel 0 (test.kiln:1:1): entry 'k one' is not a "
                        "valid C identifier"));
}

TEST(ArtifactTest, Programs) {
  ArtifactSpec spec = minimalArtifact();
  spec.omitUpdate = true;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("has no 'update' program"));
  spec = minimalArtifact();
  spec.extraPrograms.push_back({"train", {}});
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("program 2 is named 'train' (known programs: step, "
                        "update, eval)"));
  spec = minimalArtifact();
  spec.extraPrograms.push_back({"step", {}});
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("has two programs named 'step'"));
  spec = minimalArtifact();
  spec.update.push_back(spec.schedule[0]);
  spec.update[0].kernel = 7;
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("update[0] (test.kiln:2:3): KernelCall of kernel 7"));
}

TEST(ArtifactTest, LogicalShapeOfAPaddedParameter) {
  ArtifactSpec spec = bigramArtifact(2, 4, 16);
  spec.buffers[2].logicalShape = {10, 16}; // W [16, 16] holds a [10, 16]
  spec.buffers[7].logicalShape = {10, 16}; // and so do its gradient
  spec.buffers[8].logicalShape = {10, 16}; // and Adam state
  auto artifact = Artifact::loadBytes(serializeArtifact(spec), "model.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_TRUE(isPadded((*artifact)->buffer(2)));
  EXPECT_EQ(logicalShape((*artifact)->buffer(2)),
            (std::vector<int64_t>{10, 16}));
  EXPECT_FALSE(isPadded((*artifact)->buffer(9)));
  EXPECT_EQ(logicalShape((*artifact)->buffer(9)),
            (std::vector<int64_t>{16, 16}));

  spec.buffers[2].logicalShape = {10};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 2 ('W') has logical_shape [10] of another "
                        "rank than its shape [16, 16]"));
  spec.buffers[2].logicalShape = {17, 16};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 2 ('W') has logical_shape [17, 16] that does "
                        "not fit in its shape [16, 16] (axis 0)"));
  spec.buffers[2].logicalShape = {10, 0};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("has logical_shape [10, 0] that does not fit"));
  spec.buffers[2].logicalShape = {10, 16};
  spec.buffers[4].logicalShape = {8, 10}; // an activation
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 4 ('logits') has a logical_shape but role "
                        "Activation"));
}

TEST(ArtifactTest, OptimizerStateMatchesItsParameter) {
  ArtifactSpec spec = bigramArtifact(2, 8, 16);
  spec.buffers[8].name = "V"; // AdamM of no parameter
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 8 ('V') is a AdamM of no Parameter of that name"));
  spec = bigramArtifact(2, 8, 16);
  spec.buffers[9].shape = {16, 8};
  EXPECT_THAT(loadSpec(spec).message(),
              HasSubstr("buffer 9 ('W') is a AdamV of shape [16, 8] for a "
                        "parameter of [16, 16]"));
}

TEST(ArtifactTest, BadAccumulationOrClip) {
  ArtifactSpec spec = minimalArtifact();
  spec.gradAccum = 0;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("grad_accum 0 (must be >= 1)"));
  spec = minimalArtifact();
  spec.clip = -1;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("invalid clip -1"));
}

TEST(ArtifactTest, BadTrainConfig) {
  ArtifactSpec spec = minimalArtifact();
  spec.batch = 0;
  EXPECT_THAT(loadSpec(spec).message(), HasSubstr("train config has batch 0"));
}

} // namespace
} // namespace kiln::rt::test
