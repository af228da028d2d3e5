//===- TestArtifact.h - Building small .kart files in unit tests ----------===//
//
// Until codegen writes artifacts, the runtime tests describe artifacts as
// plain structs (easy to break one field at a time for negative tests) and
// serialise them with the flatbuffers builder, exactly as codegen will.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_TESTARTIFACT_H
#define KILN_TEST_UNIT_TESTARTIFACT_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt::test {

struct BufferSpec {
  std::string name;
  schema::BufferRole role = schema::BufferRole_Activation;
  schema::DType dtype = schema::DType_F32;
  std::vector<int64_t> shape;
  std::optional<schema::InitKind> init; // Parameter buffers
  float initStd = 0;
  std::vector<uint8_t> constantData;    // Constant buffers
  int32_t aliasOf = -1;
  // Buffer.offset; unset: the next free 256-byte-aligned offset for storage
  // buffers (no reuse: a plan that is always valid), -1 for aliases.
  std::optional<int64_t> offset;
  std::vector<int64_t> logicalShape;    // padded buffers (pad-dims)
};

struct KernelSpec {
  std::string entry;
  std::string source;
  std::string location = "test.kiln:1:1";
  std::string ops;
  // The buffer signature; unset: taken from the kernel's first call.
  std::optional<std::vector<schema::KernelArg>> args;
  bool inPlace = false; // Kernel.in_place
  // CUDA kernels: grid, block, shared bytes (unset: no launch field).
  std::optional<schema::KernelLaunch> launch;
};

struct GemmSpec {
  uint32_t a = 0, b = 0, c = 0;
  int64_t m = 1, n = 1, k = 1, batch = 1;
  bool transA = false, transB = false;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  schema::GemmEpilogue epilogue = schema::GemmEpilogue_None;
  int32_t bias = -1, aux = -1;
};

// KernelCall.cudnn_attention (fields as in artifact.fbs).
struct CudnnAttentionSpec {
  bool backward = false;
  int64_t batch = 1, heads = 1, kvHeads = 1, qLen = 1, kvLen = 1;
  int64_t headDim = 8, valueDim = 8;
  float scale = 1;
  bool causal = false;
  int32_t kvLengths = -1;
  uint32_t q = 0, k = 0, v = 0, out = 0, lse = 0;
  int32_t dout = -1, dq = -1, dk = -1, dv = -1;
  int32_t workspace = -1;
  bool tokensMajor = false;
};

struct StepSpec {
  std::optional<uint32_t> kernel; // KernelCall when set
  std::vector<uint32_t> buffers;  // KernelCall arguments
  std::optional<CudnnAttentionSpec> cudnnAttention; // KernelCall only
  GemmSpec gemm;                  // GemmCall otherwise
  std::string location = "test.kiln:2:3";
  bool omitOperation = false;     // union type without a value (corrupt)
};

struct ProgramSpec {
  std::string name;
  std::vector<StepSpec> schedule;
};

struct ArtifactSpec {
  uint32_t version = kArtifactVersion;
  std::string model = "test";
  std::string target = "cpu";
  int64_t batch = 1, seq = 1, vocab = 0, gradAccum = 1;
  float clip = 0;
  std::string prelude;
  std::vector<std::string> archs;          // CUDA: "sm_80", ...
  std::vector<BufferSpec> buffers;
  std::vector<KernelSpec> kernels;
  std::vector<StepSpec> schedule;          // the "step" program
  std::vector<StepSpec> update;            // the "update" program
  std::optional<std::vector<StepSpec>> eval; // the "eval" program, if any
  std::vector<ProgramSpec> extraPrograms;  // more (for negative tests)
  bool omitUpdate = false;                 // no "update" program (corrupt)
  // Artifact.arena_bytes; unset: the end of the last buffer. The memory plan
  // summary puts every byte under "other".
  std::optional<int64_t> arenaBytes;
};

std::vector<uint8_t> serializeArtifact(const ArtifactSpec &spec);

// A valid minimal artifact: one loss buffer written by one kernel in
// "step", and an empty "update".
ArtifactSpec minimalArtifact();

// The bigram language model used by the end-to-end tests (see
// TestArtifact.cpp): "step" is a one-hot kernel, a GEMM, a cross-entropy
// kernel and a GEMM for the gradient; "update" is an AdamW kernel; "eval"
// the forward part into an EvalLoss buffer. batch x seq tokens, vocabulary
// `vocab`.
ArtifactSpec bigramArtifact(int64_t batch, int64_t seq, int64_t vocab);

// A fresh empty directory under $TMPDIR (removed by the caller if wanted).
std::string makeTempDir();
void writeFile(const std::string &path, const std::vector<uint8_t> &bytes);
void writeFile(const std::string &path, const std::string &text);

} // namespace kiln::rt::test

#endif // KILN_TEST_UNIT_TESTARTIFACT_H
