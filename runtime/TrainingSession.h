//===- TrainingSession.h - An artifact made ready to run training steps ---===//
//
// What training (Trainer.cpp) and the gradient check (GradientCheck.cpp)
// share: the buffers found by role, the backend for the artifact's target
// (CPU or CUDA: kernels compiled or fetched from the cache, buffers
// allocated) with the parameters initialised from the seed, and one call per
// program that writes its inputs and scalars and runs it:
//   beginStep(); stageMicroStep(batch k) for k < grad_accum; runStep(lr, t)
// is one training step (one unit: one CUDA graph); runMicroStep runs one
// micro-batch at once (the gradient check); runEval(batch) is a validation
// batch.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAININGSESSION_H
#define KILN_RUNTIME_TRAININGSESSION_H

#include "runtime/Artifact.h"
#include "runtime/Backend.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::rt {

// Buffer indices the runtime reads or writes, found once by role + name
// (never by position, per the codegen contract).
struct BufferRoles {
  uint32_t loss = 0;
  std::optional<uint32_t> gradNorm, learningRate, stepCount, tokens, targets,
      evalLoss, updateNorm, paramNorm, dropoutRng;
  std::vector<uint32_t> inputs; // every Input buffer
  std::vector<uint32_t> parameters, gradients;
  std::vector<uint32_t> optimizerState; // AdamM, AdamV, Momentum buffers
  std::vector<uint32_t> metrics;        // Metric buffers, in artifact order
};

BufferRoles findBufferRoles(const Artifact &artifact);


// The contents of one Input buffer for a micro-batch, found by name (data
// sources other than tokens, e.g. --data tsp:..., write several inputs).
struct NamedInput {
  std::string_view name;
  const void *data = nullptr;
  size_t bytes = 0;
};

class TrainingSession {
public:
  // Creates the backend of `artifact`'s target (kernels compiled or fetched,
  // buffers allocated) and initialises every parameter from its Initializer
  // and `seed` (Adam moments start at zero from the zero-filled arena).
  static StatusOr<std::unique_ptr<TrainingSession>>
  create(std::unique_ptr<Artifact> artifact, uint64_t seed,
         const BackendOptions &options = {});

  const Artifact &artifact() const { return *artifact_; }
  const BufferRoles &roles() const { return roles_; }
  Backend &backend() const { return *backend_; }

  // Starts training step `step` (1-based): with grad_accum > 1 the Loss and
  // Gradient buffers are accumulators that each micro-step adds to, so they
  // are zeroed first (before the first micro-step runs). `step` also fixes
  // the dropout RNG offsets of its micro-steps (step * grad_accum + k), so a
  // resumed run draws the same masks as an uninterrupted one and a repeated
  // step the same mask.
  Status beginStep(int64_t step = 1);
  // Writes the [batch, seq] `tokens` and `targets` of one micro-batch
  // (ignored by an artifact without inputs; may then be null) and runs
  // "step" (forward + backward) now: the gradient check's form.
  Status runMicroStep(const int32_t *tokens, const int32_t *targets);
  // Writes each of `inputs` into the Input buffer of its name (sizes must
  // match: TrainingData checked the shapes) and runs "step" now.
  Status runMicroStep(const std::vector<NamedInput> &inputs);
  // Training's form: each micro-batch is staged (its inputs copied), then
  // runStep writes the learning rate and the 1-based count of applied
  // updates (Adam's bias correction) and runs the whole step -- zeroing,
  // every micro-batch's "step", "update" -- as one unit (on CUDA one graph
  // replay, accumulation included). When the loss or the gradient norm is
  // not finite the compiled update changes nothing (see stepWasSkipped).
  Status stageMicroStep(const int32_t *tokens, const int32_t *targets);
  Status stageMicroStep(const std::vector<NamedInput> &inputs);
  Status runStep(double lr, int64_t updateCount);
  // Writes one batch and runs "eval"; returns its loss.
  StatusOr<double> runEval(const int32_t *tokens, const int32_t *targets);

  // ZeRO: every rank's slice of each sharded buffer among `buffers`
  // gathered into its whole tensor, which tensorView and checkPadding read
  // until releaseShards. A collective: every rank calls it at the same
  // point with the same buffers. Nothing to do without shards.
  Status gatherShards(const std::vector<uint32_t> &buffers);
  // Frees what gatherShards gathered.
  void releaseShards() { gathered_.clear(); }
  // Buffer `index` as an f32 tensor for safetensors, named `name` (default:
  // the buffer's own name), with the user's shape: its data is the
  // backend's host view, refreshed from the device first; a buffer the
  // compiler padded is copied out of its padding (the view then points into
  // a copy the session keeps until the next tensorView of the same buffer).
  // A ZeRO shard is the whole tensor gatherShards last gathered.
  StatusOr<TensorView> tensorView(uint32_t index, std::string name = {}) const;
  // Checks that `file` has tensor `name` as f32 with buffer `index`'s user
  // shape (the logical one when padded); changes nothing.
  Status checkTensor(const SafetensorsFile &file, std::string_view name,
                     uint32_t index) const;
  // An internal error when buffer `index` was padded by the compiler and its
  // padding is not all zero (see PaddedLayout.h); OK otherwise.
  Status checkPadding(uint32_t index) const;
  // Reads tensor `name` of `file` (the user's shape) into buffer `index`
  // and uploads it; a padded buffer gets zero padding, a ZeRO shard this
  // rank's slice.
  Status readTensor(const SafetensorsFile &file, std::string_view name,
                    uint32_t index);
  // Host view of a buffer the caller fills, then pushes with upload().
  void *hostData(uint32_t index) const { return backend_->hostData(index); }
  Status upload(uint32_t index) const { return backend_->upload(index); }

  // Results of the last programs run.
  float loss() const { return scalar(roles_.loss); }
  std::optional<float> gradNorm() const { return optionalScalar(roles_.gradNorm); }
  std::optional<float> updateNorm() const { return optionalScalar(roles_.updateNorm); }
  std::optional<float> paramNorm() const { return optionalScalar(roles_.paramNorm); }
  // The learning rate "update" used, read back from its buffer.
  std::optional<float> learningRate() const { return optionalScalar(roles_.learningRate); }
  // The compiled guard's decision: the update was a no-op because the loss
  // or the gradient norm is not finite (same test as the kernels').
  bool stepWasSkipped() const;
  // The model's reported metrics (name, value) from the last micro-step.
  std::vector<std::pair<std::string, double>> metrics() const;

private:
  TrainingSession() = default;
  // Scalars are refreshed into the host view by every program run.
  float scalar(uint32_t buffer) const {
    return *static_cast<const float *>(backend_->hostData(buffer));
  }
  std::optional<float> optionalScalar(std::optional<uint32_t> buffer) const {
    if (!buffer)
      return std::nullopt;
    return scalar(*buffer);
  }
  // A copy of `data` that lives until the step has run.
  const void *keep(const void *data, size_t bytes);
  // One micro-batch's writes: tokens and targets (or named inputs), then
  // [seed, offset] for the DropoutRng buffer (if any; the offset advances).
  std::vector<BufferWrite> batchWrites(const int32_t *tokens, const int32_t *targets);
  StatusOr<std::vector<BufferWrite>> inputWrites(const std::vector<NamedInput> &inputs);
  void dropoutWrite(std::vector<BufferWrite> &writes);
  // hostData + upload of each write.
  Status writeNow(const std::vector<BufferWrite> &writes);
  // The accumulators beginStep left to zero, before a micro-step run now.
  Status runPendingZeroes();

  std::unique_ptr<Artifact> artifact_;
  BufferRoles roles_;
  std::unique_ptr<Backend> backend_;
  uint64_t seed_ = 0;         // --seed: the dropout key
  int64_t dropoutOffset_ = 0; // the next micro-step's dropout counter
  TrainingStepPlan pending_;  // the step being staged
  std::deque<std::vector<uint8_t>> staged_; // the bytes its writes point at
  // The whole (padded) tensor behind buffer `index`: the host view, or for a
  // ZeRO shard what gatherShards gathered (error before).
  StatusOr<const float *> wholeTensor(uint32_t index) const;
  // Parameter `p` from its Initializer and the seed, uploaded.
  Status initializeParameter(uint32_t p);
  // ZeRO: this rank's slice of the whole tensor whose user's region is
  // `logical` into shard `index`, uploaded.
  Status uploadSlice(uint32_t index, const std::vector<float> &logical);

  Communicator *communicator_ = nullptr; // ZeRO shards: this rank's slice
  const MeshCommunicators *mesh_ = nullptr; // a shard's axis: who gathers it
  // tensorView's compact copies of padded buffers, by buffer index.
  mutable std::map<uint32_t, std::vector<float>> logicalCopies_;
  // gatherShards' whole tensors of the ZeRO shards, by buffer index.
  std::map<uint32_t, std::vector<float>> gathered_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAININGSESSION_H
