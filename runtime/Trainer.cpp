//===- Trainer.cpp - The kiln-run training loop ----------------------------===//
//
//   1. load + verify the artifact; open the data (required when the model
//      has inputs) and check it fits the model before the slow part;
//   2. compile or fetch the kernels, allocate the arena, initialise the
//      parameters (TrainingSession::create);
//   3. per step s (1-based): beginStep (zero the accumulators), then
//      grad_accum micro-batches through "step", then "update" with the
//      scheduled learning rate and the count of applied updates; read loss,
//      norms and metrics back; a non-finite loss or gradient norm means the
//      compiled guard skipped the update (logged, not counted as an update);
//   4. report; after the first step dump gradients if asked.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"

#include "runtime/Metrics.h"
#include "runtime/Safetensors.h"
#include "runtime/StopSignals.h"
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
  const int64_t accum = loaded->gradAccum();
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
  StopSignals signals;
  // Zeros stand in for the batch of an artifact without inputs.
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  TrainSummary summary;
  summary.kernelCacheHit = kernels.cacheHit();
  summary.kernelLoadSeconds = kernels.loadSeconds();
  double totalSeconds = 0;
  int64_t updates = 0, skippedInARow = 0, microBatches = 0;
  for (int64_t step = 1; step <= options.steps; ++step) {
    auto start = Clock::now();
    session->beginStep();
    for (int64_t k = 0; k < accum; ++k, ++microBatches) {
      if (data)
        data->fillBatch(options.seed, microBatches, batch, seq, tokens.data(),
                        targets.data());
      KILN_RETURN_IF_ERROR(
          session->runMicroStep(tokens.data(), targets.data()));
    }
    double lr = learningRateAt(options.schedule, step);
    KILN_RETURN_IF_ERROR(session->runUpdate(lr, updates + 1));
    bool skipped = session->stepWasSkipped();
    if (skipped) {
      ++summary.skippedSteps;
      ++skippedInARow;
    } else {
      ++updates;
      skippedInARow = 0;
    }
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    totalSeconds += seconds;

    StepMetrics m;
    m.step = step;
    m.loss = session->loss();
    m.lr = session->learningRate().value_or(lr);
    if (std::optional<float> norm = session->gradNorm())
      m.gradNorm = *norm;
    m.stepMs = seconds * 1e3;
    m.tokensPerStep = batch * seq * accum;
    m.tokensPerSecond = seconds > 0 ? double(m.tokensPerStep) / seconds : 0;
    summary.finalLoss = m.loss;
    summary.steps = step;
    summary.stepsThisRun += 1;

    if (step == 1 && !options.saveGradsPath.empty())
      KILN_RETURN_IF_ERROR(saveFirstGradients(options.saveGradsPath, artifact,
                                              arena, roles, tokens, targets));
    if (metrics)
      KILN_RETURN_IF_ERROR(metrics->write(m));
    if (!options.quiet)
      progress.report(m);
    if (skippedInARow >= options.maxSkippedSteps) {
      summary.failed = true;
      summary.stopReason = detail::concat(
          skippedInARow, " consecutive steps with a non-finite loss or "
          "gradient norm (the last at step ", step, ")");
      break;
    }
    if (int signal = signals.received()) {
      summary.stopReason =
          detail::concat("stopped by ", StopSignals::name(signal),
                         " after step ", step);
      break;
    }
  }
  progress.finish();
  if (options.profile)
    for (ProgramKind program : {ProgramKind::kStep, ProgramKind::kUpdate})
      std::fputs(cpu::formatScheduleProfile(artifact, program,
                                            executor.entrySeconds(program),
                                            summary.stepsThisRun, /*top=*/15)
                     .c_str(),
                 out);
  if (totalSeconds > 0) {
    summary.tokensPerSecond =
        double(batch * seq * accum * summary.stepsThisRun) / totalSeconds;
    summary.flopsPerSecond = artifact.root().flops_per_step() *
                             summary.stepsThisRun / totalSeconds;
  }
  return summary;
}

} // namespace kiln::rt
