//===- Trainer.cpp - The kiln-run training loop ----------------------------===//
//
//   1. load + verify the artifact; open the data and check it fits the
//      model (enough tokens, ids below the vocabulary) before the slow part;
//   2. compile or fetch the kernels from the cache (cold/warm reported);
//   3. allocate the arena; initialise parameters from their Initializer
//      (Adam moments start at zero from the zero-filled arena);
//   4. per step s (0-based): fill tokens/targets for step s, write the
//      learning rate and the 1-based step count, run the schedule, read the
//      loss and grad norm, report; after the first step dump gradients if
//      asked.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"

#include "runtime/Artifact.h"
#include "runtime/Metrics.h"
#include "runtime/ParamInit.h"
#include "runtime/Safetensors.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/KernelCompiler.h"
#include "runtime/cpu/ScheduleProfile.h"
#include "runtime/data/TokenDataset.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <unistd.h>

namespace kiln::rt {

namespace {

// Buffer indices the trainer reads or writes, found once by role + name
// (never by position, per the codegen contract).
struct BufferRoles {
  uint32_t loss = 0;
  std::optional<uint32_t> gradNorm, learningRate, stepCount, tokens, targets;
  std::vector<uint32_t> parameters, gradients;
};

BufferRoles findBufferRoles(const Artifact &artifact) {
  BufferRoles roles;
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i) {
    const schema::Buffer &buffer = artifact.buffer(i);
    switch (buffer.role()) {
    case schema::BufferRole_Loss:
      roles.loss = i;
      break;
    case schema::BufferRole_GradNorm:
      roles.gradNorm = i;
      break;
    case schema::BufferRole_LearningRate:
      roles.learningRate = i;
      break;
    case schema::BufferRole_StepCount:
      roles.stepCount = i;
      break;
    case schema::BufferRole_Input:
      (bufferName(buffer) == "tokens" ? roles.tokens : roles.targets) = i;
      break;
    case schema::BufferRole_Parameter:
      roles.parameters.push_back(i);
      break;
    case schema::BufferRole_Gradient:
      roles.gradients.push_back(i);
      break;
    default:
      break;
    }
  }
  return roles;
}

std::vector<int64_t> shapeOf(const schema::Buffer &buffer) {
  std::vector<int64_t> shape;
  if (buffer.shape())
    shape.assign(buffer.shape()->begin(), buffer.shape()->end());
  return shape;
}

TensorView f32Tensor(const Artifact &artifact, const cpu::Arena &arena,
                     uint32_t index) {
  return TensorView{bufferName(artifact.buffer(index)),
                    TensorView::DType::kF32, shapeOf(artifact.buffer(index)),
                    arena.data(index)};
}

Status saveInitialParameters(const std::string &path,
                             const Artifact &artifact, const cpu::Arena &arena,
                             const BufferRoles &roles) {
  std::vector<TensorView> tensors;
  for (uint32_t p : roles.parameters)
    tensors.push_back(f32Tensor(artifact, arena, p));
  return writeSafetensors(path, std::move(tensors));
}

Status saveFirstGradients(const std::string &path, const Artifact &artifact,
                          const cpu::Arena &arena, const BufferRoles &roles,
                          const std::vector<int32_t> &tokens,
                          const std::vector<int32_t> &targets) {
  std::vector<TensorView> tensors;
  for (uint32_t g : roles.gradients)
    tensors.push_back(f32Tensor(artifact, arena, g));
  std::vector<int64_t> batchShape = {artifact.batch(), artifact.seq()};
  tensors.push_back(TensorView{"input:tokens", TensorView::DType::kI32,
                               batchShape, tokens.data()});
  tensors.push_back(TensorView{"input:targets", TensorView::DType::kI32,
                               batchShape, targets.data()});
  return writeSafetensors(path, std::move(tensors));
}

} // namespace

StatusOr<TrainSummary> runTraining(const RunOptions &options, FILE *out) {
  using Clock = std::chrono::steady_clock;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Artifact> artifact,
                        Artifact::loadFile(options.artifactPath));
  const int64_t batch = artifact->batch(), seq = artifact->seq();
  KILN_ASSIGN_OR_RETURN(TokenDataset data,
                        TokenDataset::open(options.dataPath));
  KILN_RETURN_IF_ERROR(
      data.checkFits(batch, seq, artifact->root().train()->vocab_size()));
  std::optional<MetricsFile> metrics;
  if (!options.metricsPath.empty()) {
    KILN_ASSIGN_OR_RETURN(MetricsFile file,
                          MetricsFile::open(options.metricsPath));
    metrics.emplace(std::move(file));
  }

  cpu::KernelCompiler compiler(cpu::KernelCompilerOptions::fromEnvironment());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<cpu::KernelLibrary> kernels,
                        compiler.load(*artifact));
  if (!options.quiet)
    std::fprintf(out, "kernels: %zu %s in %.2f s (%s, %s)\n",
                 kernels->numKernels(),
                 kernels->cacheHit() ? "loaded from cache" : "compiled",
                 kernels->loadSeconds(), kernels->cacheHit() ? "warm" : "cold",
                 kernels->libraryPath().c_str());

  KILN_ASSIGN_OR_RETURN(std::unique_ptr<cpu::Arena> arena,
                        cpu::Arena::create(*artifact));
  BufferRoles roles = findBufferRoles(*artifact);
  for (uint32_t p : roles.parameters) {
    const schema::Buffer &buffer = artifact->buffer(p);
    initializeParameter(*buffer.init(), bufferName(buffer), options.seed,
                        arena->as<float>(p), artifact->bufferInfo(p).elements);
  }
  if (!options.saveInitPath.empty())
    KILN_RETURN_IF_ERROR(
        saveInitialParameters(options.saveInitPath, *artifact, *arena, roles));

  cpu::Executor executor(*artifact, *kernels, *arena);
  executor.setProfiling(options.profile);
  ProgressPrinter progress(out, ::isatty(::fileno(out)) != 0, options.steps,
                           options.logEvery);
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  TrainSummary summary;
  summary.kernelCacheHit = kernels->cacheHit();
  summary.kernelLoadSeconds = kernels->loadSeconds();
  double totalSeconds = 0;
  bool warnedNonFinite = false;
  for (int64_t s = 0; s < options.steps; ++s) {
    auto start = Clock::now();
    data.fillBatch(s, batch, seq, tokens.data(), targets.data());
    if (roles.tokens)
      std::copy(tokens.begin(), tokens.end(), arena->as<int32_t>(*roles.tokens));
    if (roles.targets)
      std::copy(targets.begin(), targets.end(),
                arena->as<int32_t>(*roles.targets));
    if (roles.learningRate)
      *arena->as<float>(*roles.learningRate) = static_cast<float>(options.lr);
    if (roles.stepCount)
      *arena->as<float>(*roles.stepCount) = static_cast<float>(s + 1);
    KILN_RETURN_IF_ERROR(executor.runStep());
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    totalSeconds += seconds;

    StepMetrics m;
    m.step = s + 1;
    m.loss = *arena->as<float>(roles.loss);
    m.lr = options.lr;
    if (roles.gradNorm)
      m.gradNorm = *arena->as<float>(*roles.gradNorm);
    m.stepMs = seconds * 1e3;
    m.tokensPerStep = batch * seq;
    m.tokensPerSecond = seconds > 0 ? double(batch * seq) / seconds : 0;
    summary.finalLoss = m.loss;
    summary.steps = m.step;

    if (s == 0 && !options.saveGradsPath.empty())
      KILN_RETURN_IF_ERROR(saveFirstGradients(options.saveGradsPath, *artifact,
                                              *arena, roles, tokens, targets));
    if (metrics)
      KILN_RETURN_IF_ERROR(metrics->write(m));
    if (!options.quiet)
      progress.report(m);
    if (!std::isfinite(m.loss) && !warnedNonFinite) {
      progress.finish();
      std::fprintf(stderr, "kiln-run: warning: loss is %f at step %lld\n",
                   m.loss, static_cast<long long>(m.step));
      warnedNonFinite = true;
    }
  }
  progress.finish();
  if (options.profile)
    std::fputs(cpu::formatScheduleProfile(*artifact, executor.entrySeconds(),
                                          summary.steps, /*top=*/15)
                   .c_str(),
               out);
  if (totalSeconds > 0) {
    summary.tokensPerSecond = double(batch * seq * summary.steps) / totalSeconds;
    summary.flopsPerSecond =
        artifact->root().flops_per_step() * summary.steps / totalSeconds;
  }
  return summary;
}

} // namespace kiln::rt
