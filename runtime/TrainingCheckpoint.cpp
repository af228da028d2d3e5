//===- TrainingCheckpoint.cpp - A training session to and from checkpoints ===//

#include "runtime/TrainingCheckpoint.h"

#include "runtime/Hash.h"

#include <cstdio>
#include <set>
#include <tuple>

namespace kiln::rt {

namespace {

// The tensors of `file` that are none of `expected`.
std::vector<std::string> tensorsBeyond(const SafetensorsFile &file,
                                       const std::set<std::string> &expected) {
  std::vector<std::string> extra;
  for (const SafetensorsEntry &entry : file.entries())
    if (!expected.count(entry.name))
      extra.push_back(entry.name);
  return extra;
}

// "'a', 'b', 'c' and 4 more".
std::string listNames(const std::vector<std::string> &names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 3; ++i)
    text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 3)
    text += detail::concat(" and ", names.size() - 3, " more");
  return text;
}

// "adam_m.wte": how optimizer state is named in optimizer.safetensors.
std::string stateTensorName(const schema::Buffer &buffer) {
  const char *prefix = buffer.role() == schema::BufferRole_AdamM   ? "adam_m"
                       : buffer.role() == schema::BufferRole_AdamV ? "adam_v"
                                                                   : "momentum";
  return std::string(prefix) + "." + bufferName(buffer);
}

// The run flags a resumed run should repeat (reported, compared).
nlohmann::json runConfig(const RunOptions &o) {
  return {{"lr", o.schedule.peak},
          {"schedule", lrScheduleKindName(o.schedule.kind)},
          {"warmup", o.schedule.warmup},
          {"decay_steps", o.schedule.total},
          {"min_lr_ratio", o.schedule.minRatio},
          {"decay_fraction", o.schedule.decayFraction},
          {"data_format", o.dataFormat},
          {"val_fraction", o.valFraction},
          {"max_skipped_steps", o.maxSkippedSteps}};
}

StatusOr<const nlohmann::json *> member(const nlohmann::json &object,
                                        const char *key,
                                        const std::string &where) {
  auto it = object.find(key);
  if (it == object.end())
    return invalidArgument(where, ": no \"", key, "\"");
  return &*it;
}

StatusOr<int64_t> integerMember(const nlohmann::json &object, const char *key,
                                const std::string &where) {
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *value, member(object, key, where));
  if (!value->is_number_integer() || value->get<int64_t>() < 0)
    return invalidArgument(where, ": \"", key,
                           "\" is not a non-negative integer");
  return value->get<int64_t>();
}

StatusOr<std::string> stringMember(const nlohmann::json &object,
                                   const char *key, const std::string &where) {
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *value, member(object, key, where));
  if (!value->is_string())
    return invalidArgument(where, ": \"", key, "\" is not a string");
  return value->get<std::string>();
}

// "fnv1a64:0123456789abcdef", as trainer_state.json stores hashes.
std::string hashText(uint64_t digest) {
  char text[32];
  std::snprintf(text, sizeof(text), "fnv1a64:%016llx",
                static_cast<unsigned long long>(digest));
  return text;
}

// The artifact's target, "cpu" or "cuda".
std::string targetOf(const Artifact &artifact) {
  return artifact.root().target() ? artifact.root().target()->str() : "";
}

} // namespace

StatusOr<data::DataPosition>
checkpointDataPosition(const LoadedCheckpoint &checkpoint) {
  const std::string where = checkpoint.path + "/" + kCheckpointTrainerStateFile;
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *dataInfo,
                        member(checkpoint.trainerState, "data", where));
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *position,
                        member(*dataInfo, "position", where));
  return data::DataPosition::fromJson(*position, where + ": data.position");
}

std::string artifactHash(const Artifact &artifact) {
  return hashText(fnv1a64(std::string_view(
      reinterpret_cast<const char *>(artifact.bytes().data()), artifact.bytes().size())));
}

// The train settings as the state hash sees them, normalised (parsed and
// printed again). Data parallelism splits each batch between the ranks, so
// an artifact for N ranks of batch B trains exactly like one process of
// batch N * B: the settings count the global batch.
std::string globalTrainSettings(const Artifact &artifact) {
  const flatbuffers::String *text = artifact.root().train()->settings();
  std::string settings = text ? text->str() : "";
  nlohmann::json json = nlohmann::json::parse(settings, nullptr,
                                              /*allow_exceptions=*/false);
  if (!json.is_object())
    return settings;
  if (json.contains("batch") && json["batch"].is_number_integer())
    json["batch"] = json["batch"].get<int64_t>() * artifact.dataRanks();
  // ZeRO changes where the state lives, not what it is: checkpoints hold
  // it whole.
  json.erase("zero");
  return json.dump();
}

std::string trainingStateHash(const Artifact &artifact) {
  const schema::Artifact &root = artifact.root();
  Fnv1a64 h;
  h.updateField(root.model() ? root.model()->string_view() : "");
  h.updateField(globalTrainSettings(artifact));
  // What a checkpoint holds: the parameters, then the optimizer state.
  BufferRoles roles = findBufferRoles(artifact);
  std::vector<uint32_t> saved = roles.parameters;
  saved.insert(saved.end(), roles.optimizerState.begin(), roles.optimizerState.end());
  for (uint32_t i : saved) {
    const schema::Buffer &buffer = artifact.buffer(i);
    h.updateField(bufferName(buffer));
    int64_t kind[2] = {buffer.role(), buffer.dtype()};
    h.update(kind, sizeof(kind));
    std::vector<int64_t> shape = logicalShape(buffer);
    h.updateField(std::string_view(reinterpret_cast<const char *>(shape.data()),
                                   shape.size() * sizeof(int64_t)));
  }
  return hashText(h.digest());
}

StatusOr<CheckpointInfo> saveTrainingCheckpoint(CheckpointStore &store,
                                                const TrainingSession &session,
                                                const RunOptions &options,
                                                const TrainingProgress &progress,
                                                const DataIdentity &data) {
  const Artifact &artifact = session.artifact();
  // Checkpoints hold only the user's region of a padded buffer, so padding
  // that training moved (a compiler bug: pad-dims proved no gradient reaches
  // it) would vanish silently; refuse to write instead.
  for (const std::vector<uint32_t> *group :
       {&session.roles().parameters, &session.roles().optimizerState})
    for (uint32_t index : *group)
      KILN_RETURN_IF_ERROR(session.checkPadding(index));
  CheckpointContents contents;
  contents.step = progress.step;
  for (uint32_t p : session.roles().parameters) {
    KILN_ASSIGN_OR_RETURN(TensorView view, session.tensorView(p));
    contents.model.push_back(std::move(view));
  }
  for (uint32_t s : session.roles().optimizerState) {
    KILN_ASSIGN_OR_RETURN(
        TensorView view, session.tensorView(s, stateTensorName(artifact.buffer(s))));
    contents.optimizer.push_back(std::move(view));
  }
  nlohmann::json train = nlohmann::json::object();
  if (const flatbuffers::String *settings = artifact.root().train()->settings())
    train = nlohmann::json::parse(settings->str(), nullptr,
                                  /*allow_exceptions=*/false);
  contents.trainerState = {
      {"updates", progress.updates},
      {"seed", options.seed},
      {"data",
       {{"spec", options.dataPath},
        {"position", progress.data.toJson()},
        {"files", data.files},
        {"tokens", data.tokens}}},
      {"artifact", {{"path", artifact.name()},
                    {"hash", artifactHash(artifact)},
                    {"target", targetOf(artifact)},
                    {"ranks", artifact.ranks()},
                    {"state_hash", trainingStateHash(artifact)}}},
      {"config", {{"train", train}, {"run", runConfig(options)}}}};
  contents.modelMetadata = {{"kiln_artifact", artifactHash(artifact)},
                            {"kiln_step", std::to_string(progress.step)}};
  return store.save(contents);
}

StatusOr<TrainingProgress>
restoreTrainingCheckpoint(const LoadedCheckpoint &checkpoint, TrainingSession &session,
                          const RunOptions &options, const DataIdentity &data) {
  const Artifact &artifact = session.artifact();
  const nlohmann::json &state = checkpoint.trainerState;
  const std::string where = checkpoint.path + "/" + kCheckpointTrainerStateFile;

  // Everything is checked before the first byte of the session changes.
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *artifactInfo,
                        member(state, "artifact", where));
  KILN_ASSIGN_OR_RETURN(std::string hash,
                        stringMember(*artifactInfo, "hash", where));
  // Another artifact is accepted only when it is the same model and train
  // settings (the state hash) compiled otherwise: for the other backend (a
  // CUDA run continued on the CPU, or the reverse), for another number of
  // data-parallel ranks with the same global batch (2 ranks of batch 4
  // continued as 1 of batch 8), for another ZeRO stage (checkpoints hold
  // whole tensors whatever the stage): the same state, other kernels. The
  // data position is global either way.
  const bool sameState =
      artifactInfo->value("state_hash", "") == trainingStateHash(artifact);
  if (hash != artifactHash(artifact) && !sameState)
    return failedPrecondition(
        where, ": written by another artifact (", hash, ", ",
        artifactInfo->value("path", "?"), "), not ", artifact.name(), " (",
        artifactHash(artifact), "); refusing to resume. To start from its "
        "weights with this artifact, use --init-from ", checkpoint.path, "/",
        kCheckpointModelFile);
  KILN_ASSIGN_OR_RETURN(int64_t seed, integerMember(state, "seed", where));
  if (static_cast<uint64_t>(seed) != options.seed)
    return failedPrecondition(where, ": the run used --seed ", seed,
                              ", this one --seed ", options.seed,
                              "; the data order would differ, so resume with "
                              "--seed ", seed);
  TrainingProgress progress;
  progress.step = checkpoint.step;
  KILN_ASSIGN_OR_RETURN(progress.updates, integerMember(state, "updates", where));
  KILN_ASSIGN_OR_RETURN(progress.data, checkpointDataPosition(checkpoint));
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *dataInfo,
                        member(state, "data", where));
  // The same files and tokens (however --data spells them), else the same
  // spec for data that has no files; checkpoints from before files were
  // recorded compare the spec.
  const std::string spec = dataInfo->value("spec", "");
  const bool recorded = dataInfo->contains("files") && (*dataInfo)["files"].is_array();
  if (recorded && !data.files.empty()) {
    std::vector<std::string> files;
    for (const nlohmann::json &f : (*dataInfo)["files"])
      files.push_back(f.is_string() ? f.get<std::string>() : std::string("?"));
    int64_t tokens = dataInfo->value("tokens", int64_t{-1});
    if (files != data.files || tokens != data.tokens)
      return failedPrecondition(
          where, ": the run read ", files.size(), " file", files.size() == 1 ? "" : "s",
          " of ", tokens, " tokens (--data '", spec, "'", files.empty() ? "" : ", " + files[0],
          files.size() > 1 ? ", ..." : "", "); this one's --data '", options.dataPath,
          "' is ", data.files.size(), " file", data.files.size() == 1 ? "" : "s", " of ",
          data.tokens, " tokens (", data.files[0], data.files.size() > 1 ? ", ..." : "",
          "): other data, so its data position would be meaningless");
  } else if (spec != options.dataPath) {
    return failedPrecondition(where, ": the run read --data '", spec, "', this one '",
                              options.dataPath, "'; its data position would be "
                              "meaningless");
  }
  // Exactly this model's tensors: one the model lacks means the files are
  // another model's (or were edited), not this run's state.
  std::set<std::string> parameterNames, stateNames;
  for (uint32_t p : session.roles().parameters)
    parameterNames.insert(bufferName(artifact.buffer(p)));
  for (uint32_t s : session.roles().optimizerState)
    stateNames.insert(stateTensorName(artifact.buffer(s)));
  for (auto [file, expected, name] :
       {std::tuple{&checkpoint.model, &parameterNames, kCheckpointModelFile},
        std::tuple{&checkpoint.optimizer, &stateNames, kCheckpointOptimizerFile}}) {
    std::vector<std::string> extra = tensorsBeyond(*file, *expected);
    if (!extra.empty())
      return failedPrecondition(checkpoint.path, "/", name, ": holds ", extra.size(),
                                " tensor", extra.size() == 1 ? "" : "s",
                                " this model does not have (", listNames(extra),
                                "); refusing to resume from another model's state");
  }
  // Tensors hold the user's shapes (a padded buffer's logical region).
  for (uint32_t p : session.roles().parameters)
    KILN_RETURN_IF_ERROR(session.checkTensor(
        checkpoint.model, bufferName(artifact.buffer(p)), p));
  for (uint32_t s : session.roles().optimizerState)
    KILN_RETURN_IF_ERROR(session.checkTensor(
        checkpoint.optimizer, stateTensorName(artifact.buffer(s)), s));
  for (uint32_t p : session.roles().parameters)
    KILN_RETURN_IF_ERROR(session.readTensor(
        checkpoint.model, bufferName(artifact.buffer(p)), p));
  for (uint32_t s : session.roles().optimizerState)
    KILN_RETURN_IF_ERROR(session.readTensor(
        checkpoint.optimizer, stateTensorName(artifact.buffer(s)), s));
  return progress;
}

std::vector<std::string> runConfigDifferences(const LoadedCheckpoint &checkpoint,
                                              const RunOptions &options) {
  std::vector<std::string> differences;
  const nlohmann::json &state = checkpoint.trainerState;
  if (!state.contains("config") || !state["config"].is_object() ||
      !state["config"].contains("run"))
    return differences;
  const nlohmann::json &saved = state["config"]["run"];
  const nlohmann::json current = runConfig(options);
  for (auto &[key, value] : current.items())
    if (!saved.contains(key) || saved[key] != value)
      differences.push_back(detail::concat(
          "run setting '", key, "' is ", value.dump(), " but was ",
          saved.contains(key) ? saved[key].dump() : "absent", " in ",
          checkpoint.path, " (the resumed run differs from the original)"));
  return differences;
}

StatusOr<std::vector<std::string>> loadParameters(const std::string &path,
                                                  TrainingSession &session) {
  KILN_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  const Artifact &artifact = session.artifact();
  // Check every tensor first, so a bad file changes nothing. Tensors have the
  // user's shapes: a file from an unpadded artifact fits a padded one.
  for (uint32_t p : session.roles().parameters)
    KILN_RETURN_IF_ERROR(
        session.checkTensor(file, bufferName(artifact.buffer(p)), p));
  std::set<std::string> names;
  for (uint32_t p : session.roles().parameters) {
    KILN_RETURN_IF_ERROR(
        session.readTensor(file, bufferName(artifact.buffer(p)), p));
    names.insert(bufferName(artifact.buffer(p)));
  }
  return tensorsBeyond(file, names);
}

} // namespace kiln::rt
