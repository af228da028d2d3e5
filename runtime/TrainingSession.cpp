//===- TrainingSession.cpp - An artifact made ready to run training steps -===//

#include "runtime/TrainingSession.h"

#include "runtime/PaddedLayout.h"
#include "runtime/ParamInit.h"

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
  for (uint32_t p : session->roles_.parameters) {
    const schema::Buffer &buffer = artifact->buffer(p);
    if (!isPadded(buffer)) {
      initializeParameter(*buffer.init(), bufferName(buffer), seed,
                          static_cast<float *>(session->backend_->hostData(p)),
                          artifact->bufferInfo(p).elements);
    } else {
      // Padded by the compiler: draw exactly the values the unpadded model
      // would (same count, same order), then place them; the padding is zero.
      std::vector<int64_t> logical = logicalShape(buffer);
      std::vector<float> values(shapeElements(logical));
      initializeParameter(*buffer.init(), bufferName(buffer), seed,
                          values.data(), static_cast<int64_t>(values.size()));
      scatterLogicalRegion(values.data(), logical, bufferShape(buffer),
                           static_cast<float *>(session->backend_->hostData(p)));
    }
    // Every parameter, padded or not: on a GPU the host view is only a
    // mirror, and the device arena holds zeros until this copy.
    KILN_RETURN_IF_ERROR(session->backend_->upload(p));
  }
  session->artifact_ = std::move(artifact);
  return session;
}

Status TrainingSession::writeBatch(const int32_t *tokens,
                                   const int32_t *targets) {
  const int64_t n = artifact_->batch() * artifact_->seq();
  for (auto [buffer, data] : {std::pair{roles_.tokens, tokens},
                              std::pair{roles_.targets, targets}}) {
    if (!buffer)
      continue;
    std::copy(data, data + n, static_cast<int32_t *>(backend_->hostData(*buffer)));
    KILN_RETURN_IF_ERROR(backend_->upload(*buffer));
  }
  return okStatus();
}

Status TrainingSession::writeScalar(std::optional<uint32_t> buffer,
                                    float value) {
  if (!buffer)
    return okStatus();
  *static_cast<float *>(backend_->hostData(*buffer)) = value;
  return backend_->upload(*buffer);
}

Status TrainingSession::writeDropoutRng() {
  if (!roles_.dropoutRng)
    return okStatus();
  auto *state = static_cast<int64_t *>(backend_->hostData(*roles_.dropoutRng));
  state[0] = static_cast<int64_t>(seed_);
  state[1] = dropoutOffset_++;
  return backend_->upload(*roles_.dropoutRng);
}

Status TrainingSession::beginStep(int64_t step) {
  dropoutOffset_ = step * artifact_->gradAccum();
  if (artifact_->gradAccum() == 1)
    return okStatus(); // "step" overwrites loss and gradients
  KILN_RETURN_IF_ERROR(backend_->zero(roles_.loss));
  for (uint32_t g : roles_.gradients)
    KILN_RETURN_IF_ERROR(backend_->zero(g));
  return okStatus();
}

Status TrainingSession::runMicroStep(const int32_t *tokens,
                                     const int32_t *targets) {
  KILN_RETURN_IF_ERROR(writeBatch(tokens, targets));
  KILN_RETURN_IF_ERROR(writeDropoutRng());
  return backend_->run(ProgramKind::kStep);
}

Status TrainingSession::runMicroStep(const std::vector<NamedInput> &inputs) {
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
    std::memcpy(backend_->hostData(*it), input.data, input.bytes);
    KILN_RETURN_IF_ERROR(backend_->upload(*it));
  }
  KILN_RETURN_IF_ERROR(writeDropoutRng());
  return backend_->run(ProgramKind::kStep);
}

Status TrainingSession::runUpdate(double lr, int64_t updateCount) {
  // Both live in device buffers on a GPU, written before the (graph)
  // replay, so a captured "update" sees this step's values.
  KILN_RETURN_IF_ERROR(writeScalar(roles_.learningRate, static_cast<float>(lr)));
  KILN_RETURN_IF_ERROR(
      writeScalar(roles_.stepCount, static_cast<float>(updateCount)));
  return backend_->run(ProgramKind::kUpdate);
}

StatusOr<double> TrainingSession::runEval(const int32_t *tokens,
                                          const int32_t *targets) {
  if (!roles_.evalLoss || !artifact_->program(ProgramKind::kEval))
    return failedPrecondition(artifact_->name(),
                              ": the artifact has no 'eval' program "
                              "(a model without inputs has nothing to validate)");
  KILN_RETURN_IF_ERROR(writeBatch(tokens, targets));
  KILN_RETURN_IF_ERROR(backend_->run(ProgramKind::kEval));
  return static_cast<double>(scalar(*roles_.evalLoss));
}

StatusOr<TensorView> TrainingSession::tensorView(uint32_t index,
                                                 std::string name) const {
  KILN_RETURN_IF_ERROR(backend_->download(index));
  const schema::Buffer &buffer = artifact_->buffer(index);
  if (name.empty())
    name = bufferName(buffer);
  if (!isPadded(buffer))
    return TensorView{std::move(name), TensorDType::kF32, bufferShape(buffer),
                      backend_->hostData(index)};
  std::vector<int64_t> logical = logicalShape(buffer);
  std::vector<float> &copy = logicalCopies_[index];
  copy.resize(shapeElements(logical));
  copyLogicalRegion(static_cast<const float *>(backend_->hostData(index)),
                    bufferShape(buffer), logical, copy.data());
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
  KILN_RETURN_IF_ERROR(backend_->download(index));
  if (paddingIsZero(static_cast<const float *>(backend_->hostData(index)),
                    bufferShape(buffer), logicalShape(buffer)))
    return okStatus();
  return internalError(artifact_->name(), ": the padding of ",
                       artifact_->describeBuffer(index), " (",
                       formatShape(logicalShape(buffer)), " padded to ",
                       formatShape(bufferShape(buffer)),
                       ") is not zero: the compiled step wrote into it");
}

Status TrainingSession::readTensor(const SafetensorsFile &file,
                                   std::string_view name, uint32_t index) {
  const schema::Buffer &buffer = artifact_->buffer(index);
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
