//===- Trainer.cpp - The kiln-run training loop ----------------------------===//
//
//   1. load + verify the artifact; open the data (training windows, the
//      validation batches) and the report sinks before the slow part;
//   2. compile or fetch the kernels, allocate the arena, initialise the
//      parameters (TrainingSession::create); then --resume (the newest
//      complete checkpoint: parameters, optimizer state, step, update count,
//      data position) or --init-from (parameters only);
//   3. per step s (1-based): beginStep (zero the accumulators), grad_accum
//      micro-batches from the prefetching loader staged for "step", then
//      runStep with the scheduled learning rate and the count of applied
//      updates + 1 runs them and "update" as one unit (one CUDA graph). A non-finite loss or gradient norm means the compiled
//      guard left everything untouched: the step is logged as skipped and
//      not counted as an update; M in a row stop the run with a checkpoint
//      of the state before the first of them;
//   4. report (console, JSONL, TensorBoard), validate every --val-every
//      steps and after the last, checkpoint every --checkpoint-every steps,
//      at the end and when SIGINT/SIGTERM arrived during the step.
//
// Many processes (an artifact compiled with `mesh = [data = N]`): the
// launcher's environment (comm/LaunchEnv.h) must say N processes, or the run
// stops before anything is read -- and so must a one-process artifact
// launched as several, which would otherwise train N identical copies into
// the same files. The ranks then open the communicator, agree on the
// artifact and the seed, and each reads its share of every global batch;
// the artifact's all-reduces keep their parameters identical. Rank 0 alone
// prints, writes metrics and checkpoints; a stop signal seen by any rank
// stops all after the same step; a rank that fails ends every rank
// (Communicator::abortAll) rather than leaving them blocked in a collective.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"

#include "runtime/Metrics.h"
#include "runtime/Safetensors.h"
#include "runtime/StopSignals.h"
#include "runtime/TrainingCheckpoint.h"
#include "runtime/TrainingData.h"
#include "runtime/TrainingSession.h"
#include "runtime/comm/LaunchEnv.h"
#include "runtime/data/PrefetchingLoader.h"
#include "runtime/metrics/Nvtx.h"
#include "runtime/metrics/PeakFlops.h"
#include "runtime/metrics/PeakMemory.h"
#include "runtime/metrics/ProgressPrinter.h"
#include "runtime/metrics/ScheduleProfile.h"
#include "runtime/metrics/TensorBoardWriter.h"
#include "runtime/Hash.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <cmath>
#include <memory>
#include <optional>
#include <unistd.h>

namespace kiln::rt {

namespace {

// The precision the step's matmuls run in, for the peak FLOP/s: the
// artifact's `precision` train setting (bf16, fp16, tf32, fp32), and fp32
// GEMMs on TF32 tensor cores under --tf32.
ComputePrecision matmulPrecision(const Artifact &artifact, bool tf32) {
  std::optional<ComputePrecision> precision;
  if (const flatbuffers::String *settings = artifact.root().train()->settings()) {
    nlohmann::json train = nlohmann::json::parse(settings->str(), nullptr,
                                                 /*allow_exceptions=*/false);
    if (train.is_object() && train.contains("precision") && train["precision"].is_string())
      precision = computePrecisionFromName(train["precision"].get<std::string>());
  }
  ComputePrecision p = precision.value_or(ComputePrecision::kFp32);
  return p == ComputePrecision::kFp32 && tf32 ? ComputePrecision::kTf32 : p;
}

using Clock = std::chrono::steady_clock;

// A launch that does not match the artifact's mesh, refused before anything
// is read or written.
// One communicator per axis of the artifact's mesh that spans some but
// not all of the ranks, split from mesh.world: the ranks that differ only
// in their index along the axis, ranked by it. Every rank splits the same
// axes in the same order.
Status openAxisCommunicators(const Artifact &artifact, int rank,
                             MeshCommunicators &mesh) {
  if (!artifact.root().mesh())
    return okStatus();
  for (const schema::MeshAxis *a : *artifact.root().mesh()) {
    const std::string axis = a->name() ? a->name()->str() : "";
    if (a->size() <= 1 || static_cast<int>(a->size()) == mesh.world->size())
      continue;
    const int64_t index = artifact.axisIndex(rank, axis);
    const int64_t color = rank - index * artifact.axisStride(axis);
    KILN_ASSIGN_OR_RETURN(mesh.axes[axis],
                          mesh.world->split(static_cast<int>(color),
                                            static_cast<int>(index)));
  }
  return okStatus();
}

Status checkLaunch(const Artifact &artifact, const LaunchEnv &env) {
  const int64_t ranks = artifact.ranks();
  if (ranks == env.size)
    return okStatus();
  if (ranks == 1)
    return failedPrecondition(
        "this process is rank ", env.rank, " of ", env.size, " (", env.launcher,
        ": ", env.described, "), but ", artifact.name(),
        " was compiled for one process: each rank would train its own copy "
        "on the same data and write the same files. Compile it for ",
        env.size, " ranks (train { mesh = [data = ", env.size,
        "] }, or kilnc -D 'mesh=[data = ", env.size,
        "]') or run it as one process");
  const bool dataOnly = artifact.dataRanks() == ranks;
  return failedPrecondition(
      artifact.name(), " was compiled for ", ranks,
      dataOnly ? " data-parallel ranks"
               : detail::concat(" ranks (mesh ", artifact.meshText(), ")"),
      " but runs as ",
      env.size == 1 ? std::string("one process")
                    : detail::concat(env.size, " (", env.described, ")"),
      ": launch it with `mpirun -np ", ranks, " kiln-run ...` (or `torchrun --nproc-per-node ",
      ranks, " --no-python kiln-run ...`)");
}

// What every rank must agree on before the first step: the artifact, then
// each flag that changes what the ranks compute or when they meet in a
// collective (a checkpoint gathers ZeRO's shards), and the checkpoint each
// resumes from (a rank that sees none, a node-local directory, would train
// fresh weights beside the others'). Each is compared by its hash, so the
// message names the flags that differ.
Status checkRanksAgree(Communicator &comm, const Artifact &artifact,
                       const RunOptions &o, int64_t resumedStep) {
  const std::pair<const char *, std::string> fields[] = {
      {"--seed", std::to_string(o.seed)},
      {"--steps", std::to_string(o.steps)},
      {"--lr / --schedule / --warmup / --decay-steps / --min-lr-ratio / --decay-fraction",
       detail::concat(o.schedule.peak, " ", lrScheduleKindName(o.schedule.kind), " ",
                      o.schedule.warmup, " ", o.schedule.total, " ", o.schedule.minRatio,
                      " ", o.schedule.decayFraction)},
      {"--data / --data-format", o.dataPath + " " + o.dataFormat},
      {"--val-data / --val-fraction / --val-every / --val-batches",
       detail::concat(o.valDataPath, " ", o.valFraction, " ", o.valEvery, " ", o.valBatches)},
      {"--checkpoint-every / --keep-checkpoints / --resume",
       detail::concat(o.checkpointEvery, " ", o.keepCheckpoints, " ", o.resume)},
      {"--max-skipped-steps", std::to_string(o.maxSkippedSteps)},
      {"the checkpoint it resumes from (a --checkpoint-dir every rank must see alike)",
       resumedStep < 0 ? std::string("none") : std::to_string(resumedStep)},
  };
  constexpr size_t kFields = sizeof(fields) / sizeof(fields[0]);
  uint64_t mine[kFields + 1];
  Fnv1a64 hash;
  hash.update(artifact.bytes().data(), artifact.bytes().size());
  mine[0] = hash.digest();
  for (size_t f = 0; f < kFields; ++f)
    mine[f + 1] = fnv1a64(fields[f].second);
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> all, comm.allGather(mine, sizeof mine));
  for (int r = 0; r < comm.size(); ++r) {
    uint64_t other[kFields + 1];
    std::memcpy(other, all.data() + r * sizeof other, sizeof other);
    if (other[0] != mine[0])
      return failedPrecondition("rank ", r, " runs a different artifact than rank ",
                                comm.rank(), " (", artifact.name(),
                                "): every rank must run the same file");
    std::string differ;
    for (size_t f = 0; f < kFields; ++f)
      if (other[f + 1] != mine[f + 1])
        differ += (differ.empty() ? "" : "; ") + std::string(fields[f].first) +
                  " (here: " + fields[f].second + ")";
    if (!differ.empty())
      return failedPrecondition("rank ", r, " and rank ", comm.rank(), " differ in ", differ,
                                ": every rank must get the same flags");
  }
  return okStatus();
}

// The report sinks a run writes to, besides the console.
struct ReportFiles {
  std::optional<MetricsFile> jsonl;
  std::optional<TensorBoardWriter> tensorboard;

  Status write(const StepMetrics &m) {
    if (jsonl)
      KILN_RETURN_IF_ERROR(jsonl->write(m));
    if (tensorboard)
      KILN_RETURN_IF_ERROR(tensorboard->addScalars(m.step, tensorBoardScalars(m)));
    return okStatus();
  }
};

// `resumedStep`: the step a resumed run continues after (its JSONL keeps
// the earlier records up to there).
Status openReportFiles(const RunOptions &options,
                       std::optional<int64_t> resumedStep, ReportFiles &files) {
  if (!options.metricsPath.empty()) {
    KILN_ASSIGN_OR_RETURN(
        MetricsFile file,
        resumedStep ? MetricsFile::openResumed(options.metricsPath, *resumedStep)
                    : MetricsFile::open(options.metricsPath));
    files.jsonl.emplace(std::move(file));
  }
  if (!options.tensorboardDir.empty()) {
    KILN_ASSIGN_OR_RETURN(TensorBoardWriter writer,
                          TensorBoardWriter::open(options.tensorboardDir));
    files.tensorboard.emplace(std::move(writer));
  }
  return okStatus();
}

// One run of training: the state the loop's helpers share.
class TrainingRun {
public:
  TrainingRun(const RunOptions &options, FILE *out) : options_(options), out_(out) {}
  // The run's communicator (null: one process).
  Communicator *communicator() const { return comm_.get(); }
  StatusOr<TrainSummary> run();

private:
  Status start();
  Status runStep(int64_t step);
  Status report(int64_t step, double seconds, bool skipped);
  StatusOr<double> validate();
  Status checkpoint(const TrainingProgress &progress);
  // `status` of a step or its report; when it is a data error (dataFailed_),
  // first checkpoints done_ (with a --checkpoint-dir, one process), saying so.
  Status keepProgressAfter(Status status);
  // session_->gatherShards(), its bytes kept apart from the step's.
  Status gatherShards(const std::vector<uint32_t> &buffers);
  Status saveDebugFiles(int64_t step);
  void info(const std::string &line) {
    if (!options_.quiet) {
      progress_->finish();
      std::fprintf(out_, "%s\n", line.c_str());
    }
  }

  // A copy: ranks other than 0 drop the flags that print or write files.
  RunOptions options_;
  FILE *out_;
  LaunchEnv env_;
  std::unique_ptr<Communicator> comm_;
  // comm_ and one communicator per mesh axis that spans some of the ranks
  // (declared after comm_: they go first).
  MeshCommunicators mesh_;
  int64_t gatheredBytes_ = 0; // ZeRO shards gathered for checkpoints
  std::unique_ptr<TraceRecorder> trace_; // --trace (outlives the backend using it)
  std::unique_ptr<TrainingSession> session_;
  TrainingData data_;
  std::unique_ptr<data::PrefetchingLoader> loader_;
  std::optional<CheckpointStore> store_;
  ReportFiles files_;
  std::unique_ptr<ProgressPrinter> progress_;
  std::optional<double> peakFlops_;
  std::optional<double> peakBandwidth_; // device memory bytes/s, for --profile
  std::vector<int32_t> tokens_, targets_; // one micro-batch, [batch, seq]
  data::TspBatch tspBatch_;               // one micro-batch of --data tsp:...
  std::vector<TensorView> savedBatches_;  // --save-batches
  std::vector<std::vector<int32_t>> savedBatchData_;
  TrainingProgress done_;                 // after the last completed step
  std::optional<TrainingProgress> beforeBadRun_; // before the first skipped step in a row
  bool dataFailed_ = false; // runStep's error came from reading the batch
  DataIdentity dataIdentity_; // what --data resolved to (checkpoints record it)
  int64_t checkpointedStep_ = -1; // the step of the last checkpoint written
  int64_t skippedInARow_ = 0;
  TrainSummary summary_;
  double totalSeconds_ = 0;
};

Status TrainingRun::start() {
  KILN_ASSIGN_OR_RETURN(env_, readLaunchEnv());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Artifact> artifact,
                        Artifact::loadFile(options_.artifactPath));
  KILN_RETURN_IF_ERROR(checkLaunch(*artifact, env_));
  if (env_.distributed()) {
    KILN_ASSIGN_OR_RETURN(comm_,
                          openCommunicator(env_, options_.commTimeout));
    mesh_.world = comm_.get();
    KILN_RETURN_IF_ERROR(openAxisCommunicators(*artifact, env_.rank, mesh_));
    if (env_.rank != 0) {
      options_.quiet = true;
      options_.metricsPath.clear();
      options_.tensorboardDir.clear();
      // --save-init and --save-grads stay: every rank gathers ZeRO's
      // slices for them, rank 0 alone writes.
      options_.saveBatchesPath.clear();
      options_.profile = false;
      options_.tracePath.clear();
    }
  }
  std::optional<LoadedCheckpoint> resumeFrom;
  if (!options_.checkpointDir.empty()) {
    KILN_ASSIGN_OR_RETURN(
        CheckpointStore store,
        CheckpointStore::open(options_.checkpointDir,
                              static_cast<int>(options_.keepCheckpoints)));
    store_.emplace(std::move(store));
    KILN_ASSIGN_OR_RETURN(std::optional<CheckpointInfo> latest, store_->latest());
    if (latest && !options_.resume)
      // A fresh run here would prune the other run's checkpoints with its
      // own (--keep-checkpoints counts the newest steps of both), and a
      // later --resume would pick whichever step is higher.
      return failedPrecondition(
          "--checkpoint-dir ", options_.checkpointDir, " already holds checkpoints (the newest: ",
          latest->path, "); add --resume to continue that run, or give an empty or new "
          "directory to start another");
    if (latest) {
      KILN_ASSIGN_OR_RETURN(LoadedCheckpoint loaded, CheckpointStore::load(latest->path));
      resumeFrom.emplace(std::move(loaded));
    }
  }
  if (comm_)
    KILN_RETURN_IF_ERROR(
        checkRanksAgree(*comm_, *artifact, options_, resumeFrom ? resumeFrom->step : -1));
  // Data first (cheap, and the usual mistakes), at the position of the
  // checkpoint when resuming: read it before the session exists.
  data::DataPosition position;
  if (resumeFrom) {
    KILN_ASSIGN_OR_RETURN(position, checkpointDataPosition(*resumeFrom));
  }
  // The batch splits over the data axis only: the ranks along a tensor
  // axis (model) read the same rows.
  data::Shard shard{env_.rank, env_.size};
  if (artifact->ranks() > 1)
    shard = data::Shard{static_cast<int>(artifact->axisIndex(env_.rank, "data")),
                        static_cast<int>(artifact->axisRanks("data"))};
  KILN_ASSIGN_OR_RETURN(
      data_, openTrainingData(*artifact, options_, position, shard));
  if (data_.train && !data_.train->windows().corpus().isRandom()) {
    const data::TokenCorpus &corpus = data_.train->windows().corpus();
    for (size_t f = 0; f < corpus.numFiles(); ++f) {
      char *resolved = ::realpath(corpus.filePath(f).c_str(), nullptr);
      dataIdentity_.files.push_back(resolved ? resolved : corpus.filePath(f));
      std::free(resolved);
    }
    dataIdentity_.tokens = corpus.totalTokens();
  }
  if (data_.tsp && !options_.saveBatchesPath.empty())
    return invalidArgument("--save-batches writes token batches; it is not "
                           "supported with --data ", options_.dataPath, " yet");
  const Artifact &a = *artifact;
  tokens_.assign(a.batch() * a.seq(), 0);
  targets_.assign(a.batch() * a.seq(), 0);
  if (data_.train) {
    // Token ids are checked as batches are read; reading the first one from
    // a copy of the sampler now makes data of another tokenizer fail before
    // the kernels are compiled.
    data::BatchSampler probe = *data_.train;
    KILN_RETURN_IF_ERROR(probe.fill(tokens_.data(), targets_.data()));
  }
  // The validation batches are a small fixed set: all of them are read
  // (and their ids checked) now rather than at the first validation.
  if (data_.validation)
    for (int64_t m = 0; m < options_.valBatches; ++m)
      KILN_RETURN_IF_ERROR(
          data_.validation->fill(m, tokens_.data(), targets_.data()));
  // A finished run resumed again trains nothing (run() says so): it opens
  // no report file, so TensorBoard shows no empty run and no JSONL is made.
  if (!resumeFrom || resumeFrom->step < options_.steps)
    KILN_RETURN_IF_ERROR(openReportFiles(
        options_,
        resumeFrom ? std::optional<int64_t>(resumeFrom->step) : std::nullopt,
        files_));
  KILN_ASSIGN_OR_RETURN(ConsoleEnvironment console, ConsoleEnvironment::current());
  progress_ = std::make_unique<ProgressPrinter>(
      out_, ::isatty(::fileno(out_)) != 0, options_.steps, options_.logEvery,
      console);
  const ComputePrecision precision = matmulPrecision(*artifact, options_.tf32);

  BackendOptions backendOptions{options_.tf32,         options_.attention,
                                comm_.get(),           comm_ ? &mesh_ : nullptr,
                                env_.localRank,        options_.commOverlap};
  backendOptions.gemmAlgorithms = options_.gemmAlgorithms;
  KILN_ASSIGN_OR_RETURN(session_, TrainingSession::create(std::move(artifact), options_.seed,
                                                          backendOptions));
  // The GPU's name picks its datasheet peak (the user's --peak-tflops wins).
  const std::string device = session_->backend().deviceName();
  const std::optional<std::string_view> gpu =
      device.empty() ? std::nullopt : std::optional<std::string_view>(device);
  peakFlops_ = resolvePeakFlopsPerSecond(options_.peakTflops, gpu, precision);
  peakBandwidth_ = resolvePeakMemoryBandwidth(options_.peakGbps, gpu);
  if (!options_.quiet) {
    printKernelLoad(session_->backend().kernelLoad(), out_);
    if (data_.train || data_.tsp)
      std::fprintf(out_, "data: %s\n", data_.description.c_str());
    const Artifact &a = session_->artifact();
    if (comm_ && a.dataRanks() == comm_->size())
      std::fprintf(out_, "ranks: %d data-parallel processes (%s, %s), each "
                         "reading %lld of every %lld sequences\n",
                   comm_->size(), env_.launcher.c_str(), comm_->name().c_str(),
                   static_cast<long long>(a.batch()),
                   static_cast<long long>(a.batch() * comm_->size()));
    else if (comm_)
      std::fprintf(out_, "ranks: %d processes (%s, %s) on mesh %s, each "
                         "reading %lld of every %lld sequences\n",
                   comm_->size(), env_.launcher.c_str(), comm_->name().c_str(),
                   a.meshText().c_str(), static_cast<long long>(a.batch()),
                   static_cast<long long>(a.batch() * a.dataRanks()));
  }
  if (resumeFrom) {
    KILN_ASSIGN_OR_RETURN(done_, restoreTrainingCheckpoint(*resumeFrom, *session_,
                                                           options_, dataIdentity_));
    info(detail::concat("resumed from ", resumeFrom->path, " (step ", done_.step,
                        ", ", done_.updates, " updates)"));
    checkpointedStep_ = done_.step;
    for (const std::string &difference :
         runConfigDifferences(*resumeFrom, options_))
      std::fprintf(stderr, "kiln-run: warning: %s\n", difference.c_str());
  } else if (options_.resume) {
    info("no checkpoint in " + options_.checkpointDir + ": starting fresh");
  } else if (!options_.initFrom.empty()) {
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> unused,
                          loadParameters(options_.initFrom, *session_));
    info("parameters from " + options_.initFrom);
    if (!unused.empty() && env_.rank == 0)
      std::fprintf(stderr,
                   "kiln-run: warning: %s: %zu tensor%s the model has no parameter for "
                   "%s not loaded: %s%s\n",
                   options_.initFrom.c_str(), unused.size(), unused.size() == 1 ? "" : "s",
                   unused.size() == 1 ? "was" : "were", unused[0].c_str(),
                   unused.size() > 1 ? detail::concat(", ... (", unused.size() - 1, " more)").c_str()
                                     : "");
  }
  if (!options_.saveInitPath.empty()) {
    KILN_RETURN_IF_ERROR(gatherShards(session_->roles().parameters)); // ZeRO-3's
    std::vector<TensorView> tensors;
    for (uint32_t p : session_->roles().parameters) {
      KILN_ASSIGN_OR_RETURN(TensorView view, session_->tensorView(p));
      tensors.push_back(std::move(view));
    }
    Status written =
        env_.rank == 0 ? writeSafetensors(options_.saveInitPath, tensors) : okStatus();
    session_->releaseShards();
    KILN_RETURN_IF_ERROR(written);
  }
  if (data_.train)
    loader_ = std::make_unique<data::PrefetchingLoader>(std::move(*data_.train));
  if (options_.profile && !session_->backend().setProfiling(true))
    std::fprintf(out_, "note: --profile: the %s backend cannot time schedule "
                       "entries; use an external profiler\n",
                 session_->backend().name());
  if (!options_.tracePath.empty()) {
    trace_ = std::make_unique<TraceRecorder>(
        session_->artifact(), detail::concat("kiln-run ", options_.artifactPath, " (",
                                             session_->backend().name(), ")"));
    session_->backend().setTrace(trace_.get());
  }
  return okStatus();
}

Status TrainingRun::runStep(int64_t step) {
  const Artifact &artifact = session_->artifact();
  KILN_RETURN_IF_ERROR(session_->beginStep(step));
  for (int64_t k = 0; k < artifact.gradAccum(); ++k) {
    if (data_.tsp) {
      // Generated on this thread: a batch of 2-opt tours of <= 100 cities
      // takes milliseconds, far below a step.
      data_.tsp->fill(tspBatch_);
      KILN_RETURN_IF_ERROR(session_->stageMicroStep(tspInputs(tspBatch_)));
    } else {
      // Zeros stand in for the batch of an artifact without inputs.
      if (loader_) {
        Status read = loader_->next(tokens_.data(), targets_.data());
        // Before this step's update: the state is still done_'s.
        dataFailed_ = !read.ok();
        KILN_RETURN_IF_ERROR(read);
      }
      KILN_RETURN_IF_ERROR(
          session_->stageMicroStep(tokens_.data(), targets_.data()));
    }
    if (!options_.saveBatchesPath.empty()) {
      for (auto *batch : {&tokens_, &targets_}) {
        savedBatchData_.push_back(*batch);
        savedBatches_.push_back(TensorView{
            detail::concat("step.", step, ".", k,
                           batch == &tokens_ ? ".tokens" : ".targets"),
            TensorDType::kI32, {artifact.batch(), artifact.seq()}, nullptr});
      }
    }
  }
  return session_->runStep(learningRateAt(options_.schedule, step),
                           done_.updates + 1);
}

StatusOr<double> TrainingRun::validate() {
  double total = 0;
  for (int64_t m = 0; m < options_.valBatches; ++m) {
    Status read = data_.validation->fill(m, tokens_.data(), targets_.data());
    dataFailed_ = !read.ok();
    KILN_RETURN_IF_ERROR(read);
    KILN_ASSIGN_OR_RETURN(double loss,
                          session_->runEval(tokens_.data(), targets_.data()));
    total += loss;
  }
  return total / options_.valBatches;
}

Status TrainingRun::report(int64_t step, double seconds, bool skipped) {
  const Artifact &artifact = session_->artifact();
  StepMetrics m;
  m.step = step;
  m.loss = session_->loss();
  m.lr = session_->learningRate().value_or(learningRateAt(options_.schedule, step));
  if (std::optional<float> v = session_->gradNorm())
    m.gradNorm = *v;
  if (std::optional<float> v = session_->updateNorm())
    m.updateNorm = *v;
  if (std::optional<float> v = session_->paramNorm())
    m.paramNorm = *v;
  for (auto &[name, value] : session_->metrics())
    m.modelMetrics.push_back({name, value});
  m.stepMs = seconds * 1e3;
  if (std::optional<double> device = session_->backend().lastStepDeviceSeconds())
    m.deviceMs = *device * 1e3;
  m.tokensPerStep = artifact.batch() * artifact.seq() * artifact.gradAccum() *
                    artifact.dataRanks();
  m.tokensPerSecond = seconds > 0 ? double(m.tokensPerStep) / seconds : 0;
  m.mfu = modelFlopsUtilization(artifact.root().flops_per_step(), seconds,
                                peakFlops_);
  // On a GPU the device memory Kiln holds; on the CPU the process's RSS.
  m.peakMemoryBytes = session_->backend().devicePeakBytes().value_or(peakResidentBytes());
  m.skipped = skipped;
  bool last = step == options_.steps;
  if (data_.validation &&
      ((options_.valEvery > 0 && step % options_.valEvery == 0) || last)) {
    KILN_ASSIGN_OR_RETURN(double valLoss, validate());
    m.valLoss = valLoss;
  }
  summary_.finalLoss = m.loss;
  KILN_RETURN_IF_ERROR(files_.write(m));
  if (!options_.quiet)
    progress_->report(m);
  return okStatus();
}

Status TrainingRun::gatherShards(const std::vector<uint32_t> &buffers) {
  // Not the step's communication: left out of the bytes per step.
  const int64_t before = mesh_.communicatedBytes();
  KILN_RETURN_IF_ERROR(session_->gatherShards(buffers));
  gatheredBytes_ += mesh_.communicatedBytes() - before;
  return okStatus();
}

Status TrainingRun::keepProgressAfter(Status status) {
  if (status.ok() || !dataFailed_ || !store_ || comm_ || done_.step <= checkpointedStep_ ||
      done_.step == 0)
    return status;
  // Bad data found mid-run (an id past the vocabulary, a shard rewritten
  // under the run), by a step's batch (before its update) or by validation
  // (after the step): done_ is the state either way. One process only: other
  // ranks would wait in the checkpoint's collectives.
  Status saved = checkpoint(done_);
  return Status(status.code(),
                status.message() + (saved.ok() ? detail::concat("; checkpoint of step ",
                                                                done_.step, " written")
                                               : "; the checkpoint of step " +
                                                     std::to_string(done_.step) +
                                                     " failed too: " + saved.message()));
}

Status TrainingRun::checkpoint(const TrainingProgress &progress) {
  // The ranks hold identical parameters and state (ZeRO's shards gathered
  // first, by every rank): rank 0 writes for all.
  std::vector<uint32_t> saved = session_->roles().parameters;
  saved.insert(saved.end(), session_->roles().optimizerState.begin(),
               session_->roles().optimizerState.end());
  KILN_RETURN_IF_ERROR(gatherShards(saved));
  if (env_.rank != 0) {
    session_->releaseShards();
    return okStatus();
  }
  StatusOr<CheckpointInfo> written =
      saveTrainingCheckpoint(*store_, *session_, options_, progress, dataIdentity_);
  session_->releaseShards();
  KILN_ASSIGN_OR_RETURN(CheckpointInfo info, std::move(written));
  this->info(detail::concat("checkpoint: ", info.path));
  checkpointedStep_ = progress.step;
  return okStatus();
}

Status TrainingRun::saveDebugFiles(int64_t step) {
  const Artifact &artifact = session_->artifact();
  if (step == 1 && !options_.saveGradsPath.empty()) {
    KILN_RETURN_IF_ERROR(gatherShards(session_->roles().gradients)); // ZeRO-2's
    std::vector<TensorView> tensors;
    for (uint32_t g : session_->roles().gradients) {
      KILN_ASSIGN_OR_RETURN(TensorView view, session_->tensorView(g));
      tensors.push_back(std::move(view));
    }
    // The gradients are the data axis' mean, so the batch is the global
    // one: every data rank's rows, in the order of the ranks along the axis
    // (with grad_accum > 1, of the last micro-batch: --save-batches keeps
    // each). Each input is gathered whole (rows first), its shape's first
    // dimension times the data ranks.
    const int64_t ranks = artifact.dataRanks();
    std::vector<std::vector<uint8_t>> gathered;
    auto input = [&](const char *name, TensorDType dtype, std::vector<int64_t> shape,
                     const void *rows, size_t bytes) -> Status {
      if (ranks > 1) {
        KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> all,
                              mesh_.forAxis("data")->allGather(rows, bytes));
        gathered.push_back(std::move(all));
        rows = gathered.back().data();
        shape[0] *= ranks;
      }
      tensors.push_back({name, dtype, std::move(shape), rows});
      return okStatus();
    };
    gathered.reserve(3); // (the views point into its elements)
    const int64_t rows = artifact.batch();
    if (!data_.tsp) {
      const size_t bytes = tokens_.size() * sizeof(int32_t);
      KILN_RETURN_IF_ERROR(input("input:tokens", TensorDType::kI32, {rows, artifact.seq()},
                                 tokens_.data(), bytes));
      KILN_RETURN_IF_ERROR(input("input:targets", TensorDType::kI32, {rows, artifact.seq()},
                                 targets_.data(), bytes));
    } else {
      const int64_t nMax = int64_t(tspBatch_.targets.size()) / rows;
      KILN_RETURN_IF_ERROR(input("input:coords", TensorDType::kF32, {rows, nMax, 2},
                                 tspBatch_.coords.data(),
                                 tspBatch_.coords.size() * sizeof(float)));
      KILN_RETURN_IF_ERROR(input("input:lengths", TensorDType::kI32, {rows},
                                 tspBatch_.lengths.data(),
                                 tspBatch_.lengths.size() * sizeof(int32_t)));
      KILN_RETURN_IF_ERROR(input("input:targets", TensorDType::kI32, {rows, nMax},
                                 tspBatch_.targets.data(),
                                 tspBatch_.targets.size() * sizeof(int32_t)));
    }
    Status written =
        env_.rank == 0 ? writeSafetensors(options_.saveGradsPath, tensors) : okStatus();
    session_->releaseShards();
    KILN_RETURN_IF_ERROR(written);
  }
  return okStatus();
}

StatusOr<TrainSummary> TrainingRun::run() {
  KILN_RETURN_IF_ERROR(start());
  summary_.lead = env_.rank == 0;
  summary_.kernelCacheHit = session_->backend().kernelLoad().cacheHit;
  summary_.kernelLoadSeconds = session_->backend().kernelLoad().seconds;
  if (done_.step >= options_.steps) {
    // A finished run resumed again (a scheduler relaunching a job): say so
    // rather than report a loss no step computed.
    summary_.steps = done_.step;
    summary_.stopReason = detail::concat(
        "nothing to train: the checkpoint is at step ", done_.step, ", --steps is ",
        options_.steps, " (raise --steps to train further)");
    progress_->finish();
    return summary_;
  }
  StopSignals signals;
  for (int64_t step = done_.step + 1; step <= options_.steps; ++step) {
    TrainingProgress before = done_;
    auto startTime = Clock::now();
    bool traced = trace_ && step >= options_.traceFirst && step <= options_.traceLast;
    if (traced)
      trace_->beginStep(step);
    {
      nvtx::ScopedRange range("training step " + std::to_string(step));
      KILN_RETURN_IF_ERROR(keepProgressAfter(runStep(step)));
    }
    if (traced)
      trace_->endStep(session_->backend().devicePeakBytes().value_or(peakResidentBytes()));
    bool skipped = session_->stepWasSkipped();
    double seconds = std::chrono::duration<double>(Clock::now() - startTime).count();
    totalSeconds_ += seconds;
    done_.step = step;
    done_.updates += skipped ? 0 : 1;
    if (loader_)
      done_.data = loader_->position();
    else if (data_.tsp)
      done_.data = data_.tsp->position();
    summary_.steps = step;
    ++summary_.stepsThisRun;
    if (skipped) {
      ++summary_.skippedSteps;
      if (skippedInARow_++ == 0)
        beforeBadRun_ = before;
    } else {
      skippedInARow_ = 0;
    }
    KILN_RETURN_IF_ERROR(saveDebugFiles(step));
    KILN_RETURN_IF_ERROR(keepProgressAfter(report(step, seconds, skipped)));

    if (skippedInARow_ >= options_.maxSkippedSteps) {
      summary_.failed = true;
      summary_.stopReason = detail::concat(
          skippedInARow_, " consecutive steps with a non-finite loss or "
          "gradient norm (steps ", beforeBadRun_->step + 1, " to ", step,
          "; their updates were skipped)");
      if (store_) {
        // Skipped steps changed no parameter or state: this is the state
        // before the first of them, with that step's data position.
        KILN_RETURN_IF_ERROR(checkpoint(*beforeBadRun_));
        summary_.stopReason += detail::concat(
            "; checkpoint of step ", beforeBadRun_->step, " written");
      }
      break;
    }
    int signal = signals.received();
    if (comm_) {
      // A signal may reach the ranks between different steps: they agree
      // to stop after this one if any rank saw one.
      float seen = signal ? 1.0f : 0.0f;
      KILN_RETURN_IF_ERROR(comm_->allReduce(&seen, 1, Reduction::kSum));
      if (seen > 0 && !signal)
        signal = SIGTERM;
    }
    bool last = step == options_.steps;
    // Not within a run of skipped steps: should it reach --max-skipped-steps,
    // the checkpoint from before its first is the newest one (the one
    // --resume takes), as the stop message says.
    bool periodic = options_.checkpointEvery > 0 && step % options_.checkpointEvery == 0 &&
                    skippedInARow_ == 0;
    if (store_ && (last || periodic || signal))
      KILN_RETURN_IF_ERROR(checkpoint(done_));
    if (signal && !last) {
      summary_.stopReason = detail::concat(
          "stopped by ", StopSignals::name(signal), " after step ", step,
          store_ ? " (checkpoint written)"
                 : " (no --checkpoint-dir: nothing saved)");
      break;
    }
  }
  progress_->finish();
  if (trace_) {
    KILN_RETURN_IF_ERROR(trace_->write(options_.tracePath));
    if (!options_.quiet)
      std::fprintf(out_, "trace: %lld steps (of --trace-steps %lld..%lld) written to %s\n",
                   static_cast<long long>(trace_->tracedSteps()),
                   static_cast<long long>(options_.traceFirst),
                   static_cast<long long>(options_.traceLast), options_.tracePath.c_str());
  }
  if (!options_.saveBatchesPath.empty()) {
    for (size_t i = 0; i < savedBatches_.size(); ++i)
      savedBatches_[i].data = savedBatchData_[i].data();
    KILN_RETURN_IF_ERROR(writeSafetensors(options_.saveBatchesPath, savedBatches_));
  }
  const Artifact &artifact = session_->artifact();
  if (options_.profile)
    for (ProgramKind program : {ProgramKind::kStep, ProgramKind::kUpdate}) {
      const ScheduleTiming &timing = session_->backend().entryTiming(program);
      // The step program runs grad_accum times per training step.
      int64_t runsPerStep = program == ProgramKind::kStep ? artifact.gradAccum() : 1;
      if (!timing.seconds.empty())
        std::fputs(formatScheduleProfile(artifact, program, timing, runsPerStep,
                                         /*top=*/15, DevicePeaks{peakFlops_, peakBandwidth_})
                       .c_str(),
                   out_);
    }
  if (totalSeconds_ > 0) {
    summary_.tokensPerSecond = double(artifact.batch() * artifact.seq() *
                                      artifact.gradAccum() * artifact.dataRanks() *
                                      summary_.stepsThisRun) /
                               totalSeconds_;
    summary_.samplesPerSecond =
        double(artifact.batch() * artifact.gradAccum() * artifact.dataRanks() *
               summary_.stepsThisRun) /
        totalSeconds_;
    summary_.flopsPerSecond =
        artifact.root().flops_per_step() * artifact.ranks() *
        summary_.stepsThisRun / totalSeconds_;
  }
  // The ranks' all-reduces: through the communicator (CPU artifacts) or
  // the backend's own library (NCCL; there also with one rank).
  summary_.ranks = comm_ ? comm_->size() : 1;
  if (summary_.stepsThisRun > 0 && (comm_ || session_->backend().collectiveBytesPerStep() > 0))
    summary_.communicatedBytesPerStep =
        (comm_ ? double(mesh_.communicatedBytes() - gatheredBytes_) /
                     double(summary_.stepsThisRun)
               : 0.0) +
        double(session_->backend().collectiveBytesPerStep());
  return summary_;
}

} // namespace

StatusOr<TrainSummary> runTraining(const RunOptions &options, FILE *out) {
  TrainingRun run(options, out);
  StatusOr<TrainSummary> summary = run.run();
  if (!summary.ok() && run.communicator() && run.communicator()->size() > 1) {
    // The other ranks may wait in a collective this rank will never join:
    // say why, then end them all.
    std::fflush(out);
    std::fprintf(stderr, "kiln-run: error: rank %d of %d: %s\n",
                 run.communicator()->rank(), run.communicator()->size(),
                 summary.status().message().c_str());
    std::fflush(stderr);
    run.communicator()->abortAll(1);
  }
  return summary;
}

} // namespace kiln::rt
