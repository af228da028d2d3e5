//===- Trainer.cpp - The kiln-run training loop ----------------------------===//
//
//   1. load + verify the artifact; open the data (required when the model
//      has inputs) and check it fits the model (enough tokens, ids below
//      the vocabulary) before the slow part;
//   2. compile or fetch the kernels from the cache (cold/warm reported);
//   3. allocate the arena; initialise parameters from their Initializer
//      (Adam moments start at zero from the zero-filled arena) — 2 and 3
//      are TrainingSession::create;
//   4. per step s (0-based): fill tokens/targets for step s, write the
//      learning rate and the 1-based step count, run the schedule, read the
//      loss and grad norm, report; after the first step dump gradients if
//      asked.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"

#include "runtime/Metrics.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainingSession.h"
#include "runtime/cpu/ScheduleProfile.h"
#include "runtime/metrics/ProgressPrinter.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <unistd.h>

namespace kiln::rt {

namespace {

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
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Artifact> loaded,
                        Artifact::loadFile(options.artifactPath));
  const int64_t batch = loaded->batch(), seq = loaded->seq();
  KILN_ASSIGN_OR_RETURN(std::optional<TokenDataset> data,
                        openTrainingData(*loaded, options.dataPath));
  std::optional<MetricsFile> metrics;
  if (!options.metricsPath.empty()) {
    KILN_ASSIGN_OR_RETURN(MetricsFile file,
                          MetricsFile::open(options.metricsPath));
    metrics.emplace(std::move(file));
  }

  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingSession> session,
      TrainingSession::create(std::move(loaded), options.seed));
  const Artifact &artifact = session->artifact();
  const cpu::KernelLibrary &kernels = session->kernels();
  const cpu::Arena &arena = session->arena();
  const BufferRoles &roles = session->roles();
  if (!options.quiet)
    printKernelLoad(kernels, out);
  if (!options.saveInitPath.empty())
    KILN_RETURN_IF_ERROR(
        saveInitialParameters(options.saveInitPath, artifact, arena, roles));

  cpu::Executor &executor = session->executor();
  executor.setProfiling(options.profile);
  KILN_ASSIGN_OR_RETURN(ConsoleEnvironment console,
                        ConsoleEnvironment::current());
  ProgressPrinter progress(out, ::isatty(::fileno(out)) != 0, options.steps,
                           options.logEvery, console);
  // Zeros stand in for the batch of an artifact without inputs.
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  TrainSummary summary;
  summary.kernelCacheHit = kernels.cacheHit();
  summary.kernelLoadSeconds = kernels.loadSeconds();
  double totalSeconds = 0;
  bool warnedNonFinite = false;
  for (int64_t s = 0; s < options.steps; ++s) {
    auto start = Clock::now();
    if (data)
      data->fillBatch(options.seed, s, batch, seq, tokens.data(),
                      targets.data());
    KILN_RETURN_IF_ERROR(
        session->runStep(tokens.data(), targets.data(), options.lr, s + 1));
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    totalSeconds += seconds;

    StepMetrics m;
    m.step = s + 1;
    m.loss = session->loss();
    m.lr = options.lr;
    if (std::optional<float> norm = session->gradNorm())
      m.gradNorm = *norm;
    m.stepMs = seconds * 1e3;
    m.tokensPerStep = batch * seq;
    m.tokensPerSecond = seconds > 0 ? double(batch * seq) / seconds : 0;
    summary.finalLoss = m.loss;
    summary.steps = m.step;

    if (s == 0 && !options.saveGradsPath.empty())
      KILN_RETURN_IF_ERROR(saveFirstGradients(options.saveGradsPath, artifact,
                                              arena, roles, tokens, targets));
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
    std::fputs(cpu::formatScheduleProfile(artifact, executor.entrySeconds(),
                                          summary.steps, /*top=*/15)
                   .c_str(),
               out);
  if (totalSeconds > 0) {
    summary.tokensPerSecond = double(batch * seq * summary.steps) / totalSeconds;
    summary.flopsPerSecond =
        artifact.root().flops_per_step() * summary.steps / totalSeconds;
  }
  return summary;
}

} // namespace kiln::rt
