//===- TrainingSession.cpp - An artifact made ready to run training steps -===//

#include "runtime/TrainingSession.h"

#include "runtime/BlockLayout.h"
#include "runtime/PaddedLayout.h"
#include "runtime/ParamInit.h"
#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln::rt {

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
      roles.inputs.push_back(i);
      (bufferName(buffer) == "tokens" ? roles.tokens : roles.targets) = i;
      break;
    case schema::BufferRole_Parameter:
      roles.parameters.push_back(i);
      break;
    case schema::BufferRole_Gradient:
      roles.gradients.push_back(i);
      break;
    case schema::BufferRole_AdamM:
    case schema::BufferRole_AdamV:
    case schema::BufferRole_Momentum:
      roles.optimizerState.push_back(i);
      break;
    case schema::BufferRole_Metric:
      roles.metrics.push_back(i);
      break;
    case schema::BufferRole_EvalLoss:
      roles.evalLoss = i;
      break;
    case schema::BufferRole_UpdateNorm:
      roles.updateNorm = i;
      break;
    case schema::BufferRole_ParamNorm:
      roles.paramNorm = i;
      break;
    case schema::BufferRole_DropoutRng:
      roles.dropoutRng = i;
      break;
    default:
      break;
    }
  }
  return roles;
}

StatusOr<std::unique_ptr<TrainingSession>>
TrainingSession::create(std::unique_ptr<Artifact> artifact, uint64_t seed,
                        const BackendOptions &options) {
  std::unique_ptr<TrainingSession> session(new TrainingSession());
  KILN_ASSIGN_OR_RETURN(session->backend_, createBackend(*artifact, options));
  session->roles_ = findBufferRoles(*artifact);
  session->seed_ = seed;
  session->communicator_ = options.communicator;
  session->mesh_ = options.mesh;
  session->artifact_ = std::move(artifact);
  for (uint32_t p : session->roles_.parameters)
    KILN_RETURN_IF_ERROR(session->initializeParameter(p));
  return session;
}

Status TrainingSession::initializeParameter(uint32_t p) {
  const schema::Buffer &buffer = artifact_->buffer(p);
  if (isShard(buffer) || isPadded(buffer)) {
    // Padded by the compiler, or one rank's slice (ZeRO-3): draw exactly
    // the values the whole unpadded tensor gets (same count, same order),
    // then place them: the padding is zero, the slice this rank's.
    std::vector<float> values(shapeElements(logicalShape(buffer)));
    kiln::rt::initializeParameter(*buffer.init(), bufferName(buffer), seed_,
                                  values.data(), static_cast<int64_t>(values.size()));
    if (isShard(buffer))
      return uploadSlice(p, values);
    scatterLogicalRegion(values.data(), logicalShape(buffer), bufferShape(buffer),
                         static_cast<float *>(backend_->hostData(p)));
  } else {
    kiln::rt::initializeParameter(*buffer.init(), bufferName(buffer), seed_,
                                  static_cast<float *>(backend_->hostData(p)),
                                  artifact_->bufferInfo(p).elements);
  }
  // On a GPU the host view is only a mirror, and the device arena holds
  // zeros until this copy.
  return backend_->upload(p);
}

const void *TrainingSession::keep(const void *data, size_t bytes) {
  const auto *begin = static_cast<const uint8_t *>(data);
  return staged_.emplace_back(begin, begin + bytes).data();
}

std::vector<BufferWrite> TrainingSession::batchWrites(const int32_t *tokens,
                                                      const int32_t *targets) {
  std::vector<BufferWrite> writes;
  const size_t bytes =
      static_cast<size_t>(artifact_->batch() * artifact_->seq()) * sizeof(int32_t);
  for (auto [buffer, data] : {std::pair{roles_.tokens, tokens},
                              std::pair{roles_.targets, targets}})
    if (buffer)
      writes.push_back({*buffer, keep(data, bytes), bytes});
  dropoutWrite(writes);
  return writes;
}

StatusOr<std::vector<BufferWrite>>
TrainingSession::inputWrites(const std::vector<NamedInput> &inputs) {
  std::vector<BufferWrite> writes;
  for (const NamedInput &input : inputs) {
    auto it = std::find_if(
        roles_.inputs.begin(), roles_.inputs.end(), [&](uint32_t i) {
          return bufferName(artifact_->buffer(i)) == input.name;
        });
    if (it == roles_.inputs.end() ||
        artifact_->bufferInfo(*it).bytes != static_cast<int64_t>(input.bytes))
      return internalError(artifact_->name(), ": input '", input.name,
                           "' of ", input.bytes,
                           " bytes has no Input buffer of that name and size");
    writes.push_back({*it, keep(input.data, input.bytes), input.bytes});
  }
  dropoutWrite(writes);
  return writes;
}

void TrainingSession::dropoutWrite(std::vector<BufferWrite> &writes) {
  if (!roles_.dropoutRng)
    return;
  const int64_t state[2] = {static_cast<int64_t>(seed_), dropoutOffset_++};
  writes.push_back({*roles_.dropoutRng, keep(state, sizeof(state)), sizeof(state)});
}

Status TrainingSession::writeNow(const std::vector<BufferWrite> &writes) {
  for (const BufferWrite &w : writes) {
    std::memcpy(backend_->hostData(w.buffer), w.data, w.bytes);
    KILN_RETURN_IF_ERROR(backend_->upload(w.buffer));
  }
  staged_.clear();
  return okStatus();
}

Status TrainingSession::beginStep(int64_t step) {
  dropoutOffset_ = step * artifact_->gradAccum();
  pending_ = TrainingStepPlan();
  staged_.clear();
  if (artifact_->gradAccum() == 1)
    return okStatus(); // "step" overwrites loss and gradients
  pending_.zeroed.push_back(roles_.loss);
  pending_.zeroed.insert(pending_.zeroed.end(), roles_.gradients.begin(),
                         roles_.gradients.end());
  return okStatus();
}

Status TrainingSession::runPendingZeroes() {
  for (uint32_t buffer : pending_.zeroed)
    KILN_RETURN_IF_ERROR(backend_->zero(buffer));
  pending_.zeroed.clear();
  return okStatus();
}

Status TrainingSession::runMicroStep(const int32_t *tokens,
                                     const int32_t *targets) {
  KILN_RETURN_IF_ERROR(runPendingZeroes());
  KILN_RETURN_IF_ERROR(writeNow(batchWrites(tokens, targets)));
  return backend_->run(ProgramKind::kStep);
}

Status TrainingSession::runMicroStep(const std::vector<NamedInput> &inputs) {
  KILN_RETURN_IF_ERROR(runPendingZeroes());
  KILN_ASSIGN_OR_RETURN(std::vector<BufferWrite> writes, inputWrites(inputs));
  KILN_RETURN_IF_ERROR(writeNow(writes));
  return backend_->run(ProgramKind::kStep);
}

Status TrainingSession::stageMicroStep(const int32_t *tokens,
                                       const int32_t *targets) {
  pending_.microBatches.push_back(batchWrites(tokens, targets));
  return okStatus();
}

Status TrainingSession::stageMicroStep(const std::vector<NamedInput> &inputs) {
  KILN_ASSIGN_OR_RETURN(std::vector<BufferWrite> writes, inputWrites(inputs));
  pending_.microBatches.push_back(std::move(writes));
  return okStatus();
}

Status TrainingSession::runStep(double lr, int64_t updateCount) {
  // Both live in device buffers on a GPU, written before the (graph)
  // replay, so "update" sees this step's values.
  for (auto [buffer, value] :
       {std::pair{roles_.learningRate, static_cast<float>(lr)},
        std::pair{roles_.stepCount, static_cast<float>(updateCount)}})
    if (buffer)
      pending_.updateWrites.push_back({*buffer, keep(&value, sizeof(float)), sizeof(float)});
  Status ran = backend_->runTrainingStep(pending_);
  pending_ = TrainingStepPlan();
  staged_.clear();
  return ran;
}

StatusOr<double> TrainingSession::runEval(const int32_t *tokens,
                                          const int32_t *targets) {
  if (!roles_.evalLoss || !artifact_->program(ProgramKind::kEval))
    return failedPrecondition(artifact_->name(),
                              ": the artifact has no 'eval' program "
                              "(a model without inputs has nothing to validate)");
  KILN_RETURN_IF_ERROR(writeNow(batchWrites(tokens, targets)));
  KILN_RETURN_IF_ERROR(backend_->run(ProgramKind::kEval));
  return static_cast<double>(scalar(*roles_.evalLoss));
}

Status TrainingSession::uploadSlice(uint32_t index, const std::vector<float> &logical) {
  // The whole tensor, padded; this rank keeps its slice of it.
  const schema::Buffer &buffer = artifact_->buffer(index);
  std::vector<float> whole(static_cast<size_t>(shapeElements(wholeShape(buffer))));
  if (isPadded(buffer))
    scatterLogicalRegion(logical.data(), logicalShape(buffer), wholeShape(buffer),
                         whole.data());
  else
    std::copy(logical.begin(), logical.end(), whole.begin());
  const size_t count = static_cast<size_t>(artifact_->bufferInfo(index).elements);
  // This rank's index along the buffer's axis.
  const size_t rank =
      communicator_ ? static_cast<size_t>(artifact_->axisIndex(
                          communicator_->rank(), buffer.shard_axis()->string_view()))
                    : 0;
  float *out = static_cast<float *>(backend_->hostData(index));
  if (buffer.shard_dim() >= 0) // tensor parallelism: block `rank` of a dim
    copyBlock(whole.data(), wholeShape(buffer), buffer.shard_dim(),
              whole.size() / count, rank, out);
  else // ZeRO: slice `rank` of the flattened tensor
    std::copy_n(whole.data() + rank * count, count, out);
  return backend_->upload(index);
}

Status TrainingSession::gatherShards(const std::vector<uint32_t> &buffers) {
  for (uint32_t index : buffers) {
    if (!isShard(artifact_->buffer(index)))
      continue;
    KILN_RETURN_IF_ERROR(backend_->download(index));
    const float *slice = static_cast<const float *>(backend_->hostData(index));
    const size_t count = static_cast<size_t>(artifact_->bufferInfo(index).elements);
    const schema::Buffer &buffer = artifact_->buffer(index);
    std::vector<float> &whole = gathered_[index];
    whole.resize(static_cast<size_t>(shapeElements(wholeShape(buffer))));
    // The ranks of the shard's axis gather it.
    Communicator *comm =
        mesh_ ? mesh_->forAxis(buffer.shard_axis()->string_view()) : communicator_;
    if (!comm) { // one rank: its slice is the whole (verified sizes)
      std::copy_n(slice, count, whole.data());
      continue;
    }
    if (buffer.shard_dim() < 0) { // ZeRO: the slices in rank order
      KILN_RETURN_IF_ERROR(comm->allGatherInto(slice, whole.data(), count));
      continue;
    }
    // Tensor parallelism: every rank's block, then each put back in its
    // place along the split dimension.
    std::vector<float> blocks(whole.size());
    KILN_RETURN_IF_ERROR(comm->allGatherInto(slice, blocks.data(), count));
    placeBlocks(blocks.data(), wholeShape(buffer), buffer.shard_dim(),
                whole.size() / count, whole.data());
  }
  return okStatus();
}

StatusOr<const float *> TrainingSession::wholeTensor(uint32_t index) const {
  if (!isShard(artifact_->buffer(index))) {
    KILN_RETURN_IF_ERROR(backend_->download(index));
    return static_cast<const float *>(backend_->hostData(index));
  }
  auto it = gathered_.find(index);
  if (it == gathered_.end())
    return internalError(artifact_->describeBuffer(index),
                         " is a ZeRO shard that was not gathered (gatherShards)");
  return static_cast<const float *>(it->second.data());
}

StatusOr<TensorView> TrainingSession::tensorView(uint32_t index,
                                                 std::string name) const {
  KILN_ASSIGN_OR_RETURN(const float *whole, wholeTensor(index));
  const schema::Buffer &buffer = artifact_->buffer(index);
  if (name.empty())
    name = bufferName(buffer);
  if (!isPadded(buffer))
    return TensorView{std::move(name), TensorDType::kF32, wholeShape(buffer), whole};
  std::vector<int64_t> logical = logicalShape(buffer);
  std::vector<float> &copy = logicalCopies_[index];
  copy.resize(shapeElements(logical));
  copyLogicalRegion(whole, wholeShape(buffer), logical, copy.data());
  return TensorView{std::move(name), TensorDType::kF32, std::move(logical),
                    copy.data()};
}

Status TrainingSession::checkTensor(const SafetensorsFile &file,
                                    std::string_view name,
                                    uint32_t index) const {
  std::vector<int64_t> shape = logicalShape(artifact_->buffer(index));
  KILN_ASSIGN_OR_RETURN(const SafetensorsEntry *entry, file.lookup(name));
  if (entry->dtype != TensorDType::kF32 || entry->shape != shape)
    return file.readInto(name, TensorDType::kF32, shape, nullptr);
  return okStatus();
}

Status TrainingSession::checkPadding(uint32_t index) const {
  const schema::Buffer &buffer = artifact_->buffer(index);
  if (!isPadded(buffer))
    return okStatus();
  KILN_ASSIGN_OR_RETURN(const float *whole, wholeTensor(index));
  if (paddingIsZero(whole, wholeShape(buffer), logicalShape(buffer)))
    return okStatus();
  return internalError(artifact_->name(), ": the padding of ",
                       artifact_->describeBuffer(index), " (",
                       formatShape(logicalShape(buffer)), " padded to ",
                       formatShape(wholeShape(buffer)),
                       ") is not zero: the compiled step wrote into it");
}

Status TrainingSession::readTensor(const SafetensorsFile &file,
                                   std::string_view name, uint32_t index) {
  const schema::Buffer &buffer = artifact_->buffer(index);
  if (isShard(buffer)) {
    std::vector<int64_t> logical = logicalShape(buffer);
    std::vector<float> values(shapeElements(logical));
    KILN_RETURN_IF_ERROR(
        file.readInto(name, TensorDType::kF32, logical, values.data()));
    return uploadSlice(index, values);
  }
  void *host = backend_->hostData(index);
  if (!isPadded(buffer)) {
    KILN_RETURN_IF_ERROR(
        file.readInto(name, TensorDType::kF32, bufferShape(buffer), host));
    return backend_->upload(index);
  }
  std::vector<int64_t> logical = logicalShape(buffer);
  std::vector<float> values(shapeElements(logical));
  KILN_RETURN_IF_ERROR(
      file.readInto(name, TensorDType::kF32, logical, values.data()));
  scatterLogicalRegion(values.data(), logical, bufferShape(buffer),
                       static_cast<float *>(host));
  return backend_->upload(index);
}

bool TrainingSession::stepWasSkipped() const {
  std::optional<float> norm = gradNorm();
  return !std::isfinite(loss()) || (norm && !std::isfinite(*norm));
}

std::vector<std::pair<std::string, double>> TrainingSession::metrics() const {
  std::vector<std::pair<std::string, double>> values;
  for (uint32_t m : roles_.metrics)
    values.emplace_back(bufferName(artifact_->buffer(m)), scalar(m));
  return values;
}

} // namespace kiln::rt
