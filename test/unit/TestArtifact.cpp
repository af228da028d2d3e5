//===- TestArtifact.cpp - Building small .kart files in unit tests --------===//

#include "TestArtifact.h"

#include "runtime/schema/ArtifactChecksum.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace kiln::rt::test {

std::vector<uint8_t> serializeArtifact(const ArtifactSpec &spec) {
  flatbuffers::FlatBufferBuilder fbb;
  // The memory plan: explicit offsets as given, every other storage buffer
  // after the highest of them, one after another (never reused).
  constexpr int64_t kAlign = schema::kArenaAlignment;
  auto bytesOf = [](const BufferSpec &b) -> int64_t {
    double bytes = static_cast<double>(dtypeSize(b.dtype));
    for (int64_t d : b.shape)
      bytes *= std::max<int64_t>(d, 0);
    return bytes > double(int64_t(1) << 40) ? 0 : static_cast<int64_t>(bytes);
  };
  auto rounded = [&](int64_t bytes) {
    return std::max<int64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  };
  int64_t arenaEnd = 0;
  for (const BufferSpec &b : spec.buffers)
    if (b.offset && *b.offset >= 0)
      arenaEnd = std::max(arenaEnd, *b.offset + rounded(bytesOf(b)));
  std::vector<int64_t> offsets;
  for (const BufferSpec &b : spec.buffers) {
    if (b.offset) {
      offsets.push_back(*b.offset);
    } else if (b.aliasOf >= 0) {
      offsets.push_back(-1);
    } else {
      offsets.push_back(arenaEnd);
      arenaEnd += rounded(bytesOf(b));
    }
  }
  int64_t arenaBytes = spec.arenaBytes.value_or(arenaEnd);

  std::vector<flatbuffers::Offset<schema::Buffer>> buffers;
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    const BufferSpec &b = spec.buffers[i];
    auto name = fbb.CreateString(b.name);
    auto shape = fbb.CreateVector(b.shape);
    flatbuffers::Offset<schema::Initializer> init;
    if (b.init)
      init = schema::CreateInitializer(fbb, *b.init, b.initStd);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    if (!b.constantData.empty())
      data = fbb.CreateVector(b.constantData);
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> logical;
    if (!b.logicalShape.empty())
      logical = fbb.CreateVector(b.logicalShape);
    buffers.push_back(schema::CreateBuffer(fbb, name, b.role, b.dtype, shape,
                                           init, data, b.aliasOf,
                                           /*weight_decay=*/0, offsets[i],
                                           logical));
  }
  // Each kernel's signature: given in the spec, or else taken from its first
  // call (as codegen does), so specs of valid artifacts need not spell it.
  std::vector<std::vector<schema::KernelArg>> args(spec.kernels.size());
  std::vector<bool> have(spec.kernels.size(), false);
  for (size_t i = 0; i < spec.kernels.size(); ++i)
    if ((have[i] = spec.kernels[i].args.has_value()))
      args[i] = *spec.kernels[i].args;
  std::vector<ProgramSpec> programs = {{"step", spec.schedule}};
  if (!spec.omitUpdate)
    programs.push_back({"update", spec.update});
  if (spec.eval)
    programs.push_back({"eval", *spec.eval});
  programs.insert(programs.end(), spec.extraPrograms.begin(),
                  spec.extraPrograms.end());
  std::vector<StepSpec> allSteps;
  for (const ProgramSpec &program : programs)
    allSteps.insert(allSteps.end(), program.schedule.begin(),
                    program.schedule.end());
  for (const StepSpec &s : allSteps) {
    if (!s.kernel || *s.kernel >= spec.kernels.size() || have[*s.kernel])
      continue;
    have[*s.kernel] = true;
    for (uint32_t b : s.buffers) {
      if (b >= spec.buffers.size())
        continue;
      int64_t elements = 1;
      for (int64_t d : spec.buffers[b].shape)
        elements *= d;
      args[*s.kernel].emplace_back(spec.buffers[b].dtype, elements);
    }
  }
  std::vector<flatbuffers::Offset<schema::Kernel>> kernels;
  for (size_t i = 0; i < spec.kernels.size(); ++i) {
    const KernelSpec &k = spec.kernels[i];
    kernels.push_back(schema::CreateKernelDirect(
        fbb, k.entry.c_str(), k.source.c_str(), k.location.c_str(),
        k.ops.c_str(), &args[i], k.inPlace,
        k.launch ? &*k.launch : nullptr));
  }
  auto buildStep = [&](const StepSpec &s) {
    auto location = fbb.CreateString(s.location);
    if (s.omitOperation) {
      schema::StepBuilder step(fbb);
      step.add_op_type(s.kernel ? schema::Operation_KernelCall
                                : schema::Operation_GemmCall);
      step.add_location(location);
      return step.Finish();
    } else if (s.kernel) {
      flatbuffers::Offset<schema::CudnnAttention> cudnn = 0;
      if (const std::optional<CudnnAttentionSpec> &c = s.cudnnAttention)
        cudnn = schema::CreateCudnnAttention(
            fbb, c->backward, c->batch, c->heads, c->kvHeads, c->qLen, c->kvLen,
            c->headDim, c->valueDim, c->scale, c->causal, c->kvLengths, c->q, c->k,
            c->v, c->out, c->lse, c->dout, c->dq, c->dk, c->dv, c->workspace,
            c->tokensMajor);
      auto call = schema::CreateKernelCallDirect(fbb, *s.kernel, &s.buffers, cudnn);
      return schema::CreateStep(fbb, schema::Operation_KernelCall,
                                call.Union(), location);
    } else {
      const GemmSpec &g = s.gemm;
      auto call = schema::CreateGemmCall(fbb, g.a, g.b, g.c, g.m, g.n, g.k,
                                         g.batch, g.transA, g.transB,
                                         g.strideA, g.strideB, g.strideC,
                                         false, g.epilogue, g.bias, g.aux);
      return schema::CreateStep(fbb, schema::Operation_GemmCall,
                                call.Union(), location);
    }
  };
  std::vector<flatbuffers::Offset<schema::Program>> programOffsets;
  for (const ProgramSpec &program : programs) {
    std::vector<flatbuffers::Offset<schema::Step>> steps;
    for (const StepSpec &s : program.schedule)
      steps.push_back(buildStep(s));
    programOffsets.push_back(
        schema::CreateProgramDirect(fbb, program.name.c_str(), &steps));
  }
  auto train = schema::CreateTrainConfigDirect(
      fbb, spec.batch, spec.seq, "adamw", spec.vocab, spec.gradAccum, spec.clip,
      "{\"optimizer\":\"adamw\"}");
  auto memoryPlan = schema::CreateMemoryPlanDirect(
      fbb, 0, 0, 0, 0, 0, /*other=*/arenaBytes, /*peak=*/arenaBytes, "step");
  std::vector<flatbuffers::Offset<flatbuffers::String>> archs;
  for (const std::string &arch : spec.archs)
    archs.push_back(fbb.CreateString(arch));
  auto root = schema::CreateArtifactDirect(
      fbb, spec.version, spec.model.c_str(), spec.target.c_str(), train,
      spec.prelude.c_str(), &kernels, &buffers, &programOffsets, /*flops=*/0,
      arenaBytes, memoryPlan, spec.archs.empty() ? nullptr : &archs);
  schema::FinishArtifactBuffer(fbb, root);
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                             fbb.GetBufferPointer() + fbb.GetSize());
  std::string trailer = schema::checksumTrailer(bytes.data(), bytes.size());
  bytes.insert(bytes.end(), trailer.begin(), trailer.end());
  return bytes;
}

ArtifactSpec minimalArtifact() {
  ArtifactSpec spec;
  spec.prelude = "#include <cstdint>\n";
  spec.buffers.push_back({"loss", schema::BufferRole_Loss});
  spec.kernels.push_back(
      {"k_one",
       "extern \"C\" void k_one(void *const *b) { *(float *)b[0] = 1.0f; }",
       "test.kiln:1:1", "kiln.constant"});
  StepSpec step;
  step.kernel = 0;
  step.buffers = {0};
  spec.schedule.push_back(step);
  return spec;
}

namespace {

std::vector<uint8_t> floatBytes(float value) {
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &value, 4);
  return bytes;
}

// Kernels of the bigram model; NTOK (= batch*seq) and VOCAB are baked in,
// as codegen bakes shapes.
const char *kOneHotSource = R"(
// X[i, j] = (tokens[i] == j)                  // [NTOK, VOCAB]
extern "C" void k_onehot(void *const *b) {
  const int32_t *tokens = (const int32_t *)b[0];
  float *x = (float *)b[1];
  #pragma omp parallel for
  for (int i = 0; i < NTOK; ++i)
    for (int j = 0; j < VOCAB; ++j)
      x[i * VOCAB + j] = tokens[i] == j ? 1.0f : 0.0f;
}
)";

const char *kCrossEntropySource = R"(
// loss = mean_i(logsumexp(l[i]) - l[i, t[i]]); dl = (softmax(l) - onehot)/N
extern "C" void k_xent(void *const *b) {
  const float *logits = (const float *)b[0];   // [B, T, VOCAB]
  const int32_t *targets = (const int32_t *)b[1];
  float *loss = (float *)b[2];
  float *dlogits = (float *)b[3];              // [NTOK, VOCAB]
  double total = 0;
  for (int i = 0; i < NTOK; ++i) {
    const float *row = logits + i * VOCAB;
    float mx = row[0];
    for (int j = 1; j < VOCAB; ++j) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int j = 0; j < VOCAB; ++j) sum += std::exp(double(row[j] - mx));
    double lse = mx + std::log(sum);
    total += lse - row[targets[i]];
    for (int j = 0; j < VOCAB; ++j)
      dlogits[i * VOCAB + j] =
          float((std::exp(row[j] - lse) - (j == targets[i])) / NTOK);
  }
  *loss = float(total / NTOK);
}
)";

const char *kAdamWSource = R"(
// grad_norm = |g|; AdamW (b1 0.9, b2 0.95, eps 1e-8, decay from a constant)
extern "C" void k_adamw(void *const *b) {
  float *p = (float *)b[0];
  const float *g = (const float *)b[1];
  float *m = (float *)b[2];
  float *v = (float *)b[3];
  float lr = *(const float *)b[4];
  float t = *(const float *)b[5];
  float *gradNorm = (float *)b[6];
  float wd = *(const float *)b[7];
  double sq = 0;
  for (int i = 0; i < VOCAB * VOCAB; ++i) sq += double(g[i]) * g[i];
  *gradNorm = float(std::sqrt(sq));
  const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
  float c1 = 1.0f - std::pow(b1, t), c2 = 1.0f - std::pow(b2, t);
  for (int i = 0; i < VOCAB * VOCAB; ++i) {
    p[i] -= lr * wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}
)";

} // namespace

ArtifactSpec bigramArtifact(int64_t batch, int64_t seq, int64_t vocab) {
  using R = schema::BufferRole;
  const int64_t n = batch * seq;
  ArtifactSpec spec;
  spec.model = "bigram";
  spec.batch = batch;
  spec.seq = seq;
  spec.vocab = vocab;
  spec.prelude = "#include <cmath>\n#include <cstdint>\n#define NTOK " +
                 std::to_string(n) + "\n#define VOCAB " +
                 std::to_string(vocab) + "\n";
  auto buf = [&](std::string name, R role, schema::DType dtype,
                 std::vector<int64_t> shape) {
    BufferSpec b;
    b.name = std::move(name);
    b.role = role;
    b.dtype = dtype;
    b.shape = std::move(shape);
    spec.buffers.push_back(b);
  };
  const auto F32 = schema::DType_F32, I32 = schema::DType_I32;
  buf("tokens", R::BufferRole_Input, I32, {batch, seq});        // 0
  buf("targets", R::BufferRole_Input, I32, {batch, seq});       // 1
  buf("W", R::BufferRole_Parameter, F32, {vocab, vocab});       // 2
  spec.buffers.back().init = schema::InitKind_Normal;
  spec.buffers.back().initStd = 0.02f;
  buf("x", R::BufferRole_Activation, F32, {n, vocab});          // 3
  buf("logits", R::BufferRole_Activation, F32, {n, vocab});     // 4
  buf("loss", R::BufferRole_Loss, F32, {});                     // 5
  buf("dlogits", R::BufferRole_Activation, F32, {n, vocab});    // 6
  buf("W", R::BufferRole_Gradient, F32, {vocab, vocab});        // 7
  buf("W", R::BufferRole_AdamM, F32, {vocab, vocab});           // 8
  buf("W", R::BufferRole_AdamV, F32, {vocab, vocab});           // 9
  buf("lr", R::BufferRole_LearningRate, F32, {});               // 10
  buf("step", R::BufferRole_StepCount, F32, {});                // 11
  buf("grad_norm", R::BufferRole_GradNorm, F32, {});            // 12
  buf("logits3d", R::BufferRole_Activation, F32, {batch, seq, vocab}); // 13
  spec.buffers.back().aliasOf = 4;
  buf("weight_decay", R::BufferRole_Constant, F32, {});         // 14
  spec.buffers.back().constantData = floatBytes(0.01f);

  spec.kernels.push_back({"k_onehot", kOneHotSource, "bigram.kiln:3:7",
                          "kiln.embedding"});
  spec.kernels.push_back({"k_xent", kCrossEntropySource, "bigram.kiln:5:3",
                          "kiln.cross_entropy"});
  spec.kernels.push_back({"k_adamw", kAdamWSource, "bigram.kiln:9:1",
                          "kiln.adamw"});

  StepSpec onehot;
  onehot.kernel = 0;
  onehot.buffers = {0, 3};
  spec.schedule.push_back(onehot);
  // logits[b] = x[b] @ W, batched over B with W shared (stride 0).
  StepSpec logits;
  logits.gemm = GemmSpec{3, 2, 4, seq, vocab, vocab, batch, false, false,
                         seq * vocab, 0, seq * vocab};
  spec.schedule.push_back(logits);
  StepSpec xent;
  xent.kernel = 1;
  xent.buffers = {13, 1, 5, 6};
  spec.schedule.push_back(xent);
  // dW = x^T @ dlogits: A = x stored [N, V], op(A) = [V, N].
  StepSpec grad;
  grad.gemm = GemmSpec{3, 6, 7, vocab, vocab, n, 1, true, false, 0, 0, 0};
  spec.schedule.push_back(grad);
  StepSpec adamw;
  adamw.kernel = 2;
  adamw.buffers = {2, 7, 8, 9, 10, 11, 12, 14};
  adamw.location = "bigram.kiln:9:1";
  spec.update.push_back(adamw);
  // "eval": the forward steps again, the loss into EvalLoss (buffer 15).
  buf("eval_loss", R::BufferRole_EvalLoss, F32, {});            // 15
  StepSpec evalXent = xent;
  evalXent.buffers = {13, 1, 15, 6};
  spec.eval = std::vector<StepSpec>{onehot, logits, evalXent};

  return spec;
}

namespace {
// Removes every directory made by makeTempDir when the test binary exits,
// unless KILN_KEEP_TEST_DIRS is set (to inspect kernel sources, dumps).
struct TempDirRegistry {
  std::vector<std::string> dirs;
  ~TempDirRegistry() {
    if (std::getenv("KILN_KEEP_TEST_DIRS"))
      return;
    std::error_code ignored;
    for (const std::string &dir : dirs)
      std::filesystem::remove_all(dir, ignored);
  }
};
TempDirRegistry &tempDirs() {
  static TempDirRegistry registry;
  return registry;
}
} // namespace

std::string makeTempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") +
                        "/kiln-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    throw std::runtime_error("mkdtemp failed");
  tempDirs().dirs.push_back(buf.data());
  return buf.data();
}

void writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

} // namespace kiln::rt::test
