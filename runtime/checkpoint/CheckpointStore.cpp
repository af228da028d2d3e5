//===- CheckpointStore.cpp - Atomic checkpoint directories ----------------===//
//
// save(), in order (a kill between any two steps leaves the previous
// committed checkpoints intact and at most some .tmp-* debris):
//   1. remove .tmp-* debris left by killed runs;
//   2. write model, optimizer and trainer state into DIR/.tmp-step-N-<pid>,
//      each through writeFileAtomically (fsync of file and directory);
//   3. write COMMITTED (step, each file's byte size and content hash),
//      fsynced; load() checks both;
//   4. if step-N exists, rename it to .tmp-delete-step-N-<pid>;
//   5. rename the temp directory to step-N and fsync DIR — the commit;
//   6. remove the replaced directory, then prune to the newest K.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/CheckpointStore.h"

#include "runtime/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::rt {

namespace {

using nlohmann::json;

constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kTmpPrefix = ".tmp-";

// The step of a directory named "step-<digits>", or nullopt.
std::optional<int64_t> parseStepDirName(std::string_view name) {
  if (name.substr(0, kStepPrefix.size()) != kStepPrefix)
    return std::nullopt;
  std::string_view digits = name.substr(kStepPrefix.size());
  if (digits.empty() || digits.size() > 18)
    return std::nullopt; // 18 digits cannot overflow int64
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::string joinPath(const std::string &dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

// Parses `bytes` (the contents of `path`) as a JSON object.
StatusOr<json> parseJsonObject(const std::string &path,
                               const std::vector<uint8_t> &bytes) {
  json value = json::parse(bytes.begin(), bytes.end(), nullptr,
                           /*allow_exceptions=*/false);
  if (value.is_discarded())
    return dataLoss(path, ": not valid JSON");
  if (!value.is_object())
    return dataLoss(path, ": not a JSON object");
  return value;
}

// json::dump throws on strings that are not UTF-8; report that as an error.
StatusOr<std::string> dumpJson(const std::string &path, const json &value) {
  try {
    return value.dump(2) + "\n";
  } catch (const json::exception &e) {
    return invalidArgument(path, ": cannot serialise trainer state (",
                           e.what(), ")");
  }
}

StatusOr<uint64_t> fileSize(const std::string &path) {
  std::error_code error;
  uint64_t size = std::filesystem::file_size(path, error);
  if (error)
    return dataLoss(path, ": cannot stat (", error.message(), ")");
  return size;
}

// An integer field of a JSON object, or nullopt.
std::optional<int64_t> integerField(const json &object, const char *key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer())
    return std::nullopt;
  return it->get<int64_t>();
}

} // namespace

std::string checkpointDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08" PRId64, step);
  return buf;
}

StatusOr<CheckpointStore> CheckpointStore::open(const std::string &dir,
                                                int keepLast, FILE *warnings) {
  if (dir.empty())
    return invalidArgument("checkpoint directory: empty path");
  if (keepLast < 0)
    return invalidArgument(dir, ": cannot keep ", keepLast,
                           " checkpoints (0 keeps all)");
  KILN_RETURN_IF_ERROR(createDirectories(dir));
  return CheckpointStore(dir, keepLast, warnings);
}

StatusOr<std::vector<CheckpointInfo>> CheckpointStore::list() const {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, listDirectory(dir_));
  std::vector<CheckpointInfo> committed;
  for (const std::string &name : names) {
    std::optional<int64_t> step = parseStepDirName(name);
    std::string path = joinPath(dir_, name);
    if (!step || !isDirectory(path))
      continue;
    if (!fileExists(joinPath(path, kCheckpointCommitMarker))) {
      if (warnings_)
        std::fprintf(warnings_,
                     "warning: %s: incomplete checkpoint (no %s marker), "
                     "ignored\n",
                     path.c_str(), kCheckpointCommitMarker);
      continue;
    }
    committed.push_back({*step, path});
  }
  std::sort(committed.begin(), committed.end(),
            [](const CheckpointInfo &a, const CheckpointInfo &b) {
              return a.step < b.step;
            });
  return committed;
}

StatusOr<std::optional<CheckpointInfo>> CheckpointStore::latest() const {
  KILN_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> committed, list());
  if (committed.empty())
    return std::optional<CheckpointInfo>();
  return std::optional<CheckpointInfo>(committed.back());
}

Status CheckpointStore::removeDebris() const {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, listDirectory(dir_));
  for (const std::string &name : names)
    if (name.substr(0, kTmpPrefix.size()) == kTmpPrefix)
      KILN_RETURN_IF_ERROR(removeRecursively(joinPath(dir_, name)));
  return okStatus();
}

Status CheckpointStore::writeCheckpointFiles(
    const std::string &tmp, const CheckpointContents &contents) const {
  std::string modelPath = joinPath(tmp, kCheckpointModelFile);
  std::string optimizerPath = joinPath(tmp, kCheckpointOptimizerFile);
  std::string statePath = joinPath(tmp, kCheckpointTrainerStateFile);
  KILN_RETURN_IF_ERROR(
      writeSafetensors(modelPath, contents.model, contents.modelMetadata));
  KILN_RETURN_IF_ERROR(writeSafetensors(optimizerPath, contents.optimizer));

  if (!contents.trainerState.is_object())
    return invalidArgument(statePath, ": trainer state must be a JSON object");
  json state = contents.trainerState;
  state["format"] = kTrainerStateFormat;
  state["version"] = kTrainerStateVersion;
  state["step"] = contents.step;
  KILN_ASSIGN_OR_RETURN(std::string stateText, dumpJson(statePath, state));
  KILN_RETURN_IF_ERROR(writeFileAtomically(statePath, {stateText}));

  // The marker records what a complete checkpoint looks like: each file's
  // size (a truncation) and content hash (a flipped byte, read back from
  // what was written).
  json marker = {{"step", contents.step},
                 {"files", json::object()},
                 {"checksums", json::object()}};
  for (const std::string &path : {modelPath, optimizerPath, statePath}) {
    KILN_ASSIGN_OR_RETURN(uint64_t size, fileSize(path));
    KILN_ASSIGN_OR_RETURN(std::string checksum, fileContentHash(path));
    marker["files"][path.substr(tmp.size() + 1)] = size;
    marker["checksums"][path.substr(tmp.size() + 1)] = checksum;
  }
  std::string markerText = marker.dump() + "\n";
  KILN_RETURN_IF_ERROR(writeFileAtomically(
      joinPath(tmp, kCheckpointCommitMarker), {markerText}));
  return syncDirectory(tmp);
}

StatusOr<CheckpointInfo>
CheckpointStore::save(const CheckpointContents &contents) {
  if (contents.step < 0)
    return invalidArgument(dir_, ": cannot save a checkpoint for step ",
                           contents.step);
  KILN_RETURN_IF_ERROR(removeDebris());

  const std::string name = checkpointDirName(contents.step);
  const std::string pid = std::to_string(::getpid());
  const std::string tmp = joinPath(dir_, ".tmp-" + name + "-" + pid);
  const std::string final = joinPath(dir_, name);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    return invalidArgument(tmp, ": cannot create directory (",
                           std::strerror(errno), ")");
  Status written = writeCheckpointFiles(tmp, contents);
  if (!written.ok()) {
    (void)removeRecursively(tmp); // best effort; the error is `written`
    // The message names the file in the temporary directory, which is gone
    // now: say which checkpoint it was and that nothing of it remains.
    return written.withPrefix("checkpoint " + final + " not written (nothing of it kept): ");
  }

  // Commit. An existing checkpoint of this step moves aside first: rename
  // cannot replace a non-empty directory.
  std::string replaced;
  if (fileExists(final)) {
    replaced = joinPath(dir_, ".tmp-delete-" + name + "-" + pid);
    KILN_RETURN_IF_ERROR(renamePath(final, replaced));
  }
  KILN_RETURN_IF_ERROR(renamePath(tmp, final));
  KILN_RETURN_IF_ERROR(syncDirectory(dir_));
  if (!replaced.empty())
    KILN_RETURN_IF_ERROR(removeRecursively(replaced));

  KILN_RETURN_IF_ERROR(prune(contents.step));
  return CheckpointInfo{contents.step, final};
}

Status CheckpointStore::prune(int64_t justSaved) const {
  if (keepLast_ == 0)
    return okStatus();
  KILN_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> committed, list());
  // Never prune what was just written, even if older steps exist above it
  // (a run resumed from an earlier checkpoint).
  committed.erase(std::remove_if(committed.begin(), committed.end(),
                                 [&](const CheckpointInfo &c) {
                                   return c.step == justSaved;
                                 }),
                  committed.end());
  size_t keepOthers = static_cast<size_t>(keepLast_) - 1;
  if (committed.size() <= keepOthers)
    return okStatus();
  committed.resize(committed.size() - keepOthers); // the oldest: victims
  const std::string pid = std::to_string(::getpid());
  std::vector<std::string> doomed;
  for (const CheckpointInfo &victim : committed) {
    std::string doomedPath = joinPath(
        dir_, ".tmp-delete-" + checkpointDirName(victim.step) + "-" + pid);
    KILN_RETURN_IF_ERROR(renamePath(victim.path, doomedPath));
    doomed.push_back(doomedPath);
  }
  KILN_RETURN_IF_ERROR(syncDirectory(dir_));
  for (const std::string &path : doomed)
    KILN_RETURN_IF_ERROR(removeRecursively(path));
  return okStatus();
}

StatusOr<LoadedCheckpoint> CheckpointStore::load(const std::string &path) {
  std::string markerPath = joinPath(path, kCheckpointCommitMarker);
  if (!isDirectory(path))
    return notFound(path, ": no such checkpoint directory");
  if (!fileExists(markerPath))
    return failedPrecondition(path, ": not a committed checkpoint (no ",
                              kCheckpointCommitMarker, " marker)");

  // --- The marker: step and the size of every file. ---
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> markerBytes,
                        readFileBytes(markerPath));
  KILN_ASSIGN_OR_RETURN(json marker, parseJsonObject(markerPath, markerBytes));
  std::optional<int64_t> step = integerField(marker, "step");
  auto files = marker.find("files");
  if (!step || files == marker.end() || !files->is_object())
    return dataLoss(markerPath, ": not a checkpoint marker (needs \"step\" "
                    "and \"files\")");
  std::string base = std::filesystem::path(path).filename().string();
  std::optional<int64_t> namedStep = parseStepDirName(base);
  if (namedStep && *namedStep != *step)
    return dataLoss(markerPath, ": records step ", *step,
                    " but the directory is named ", base);
  for (const char *name : {kCheckpointModelFile, kCheckpointOptimizerFile,
                           kCheckpointTrainerStateFile}) {
    std::string filePath = joinPath(path, name);
    auto expected = files->find(name);
    if (expected == files->end() || !expected->is_number_unsigned())
      return dataLoss(markerPath, ": no size recorded for ", name);
    if (!fileExists(filePath))
      return dataLoss(filePath, ": missing from a committed checkpoint");
    KILN_ASSIGN_OR_RETURN(uint64_t size, fileSize(filePath));
    if (size != expected->get<uint64_t>())
      return dataLoss(filePath, ": has ", size, " bytes, but ", markerPath,
                      " recorded ", expected->get<uint64_t>());
    // Markers written before checksums were recorded have none.
    auto checksums = marker.find("checksums");
    if (checksums == marker.end() || !checksums->is_object())
      continue;
    auto recorded = checksums->find(name);
    if (recorded == checksums->end() || !recorded->is_string())
      return dataLoss(markerPath, ": no checksum recorded for ", name);
    KILN_ASSIGN_OR_RETURN(std::string checksum, fileContentHash(filePath));
    if (checksum != recorded->get<std::string>())
      return dataLoss(filePath, ": its content hash is ", checksum, " but ", markerPath,
                      " recorded ", recorded->get<std::string>(),
                      ": the file changed after the checkpoint was written");
  }

  LoadedCheckpoint loaded;
  loaded.step = *step;
  loaded.path = path;
  KILN_ASSIGN_OR_RETURN(loaded.model,
                        SafetensorsFile::open(joinPath(path, kCheckpointModelFile)));
  KILN_ASSIGN_OR_RETURN(
      loaded.optimizer,
      SafetensorsFile::open(joinPath(path, kCheckpointOptimizerFile)));

  // --- trainer_state.json: ours, this version, this step. ---
  std::string statePath = joinPath(path, kCheckpointTrainerStateFile);
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> stateBytes,
                        readFileBytes(statePath));
  KILN_ASSIGN_OR_RETURN(loaded.trainerState,
                        parseJsonObject(statePath, stateBytes));
  auto format = loaded.trainerState.find("format");
  if (format == loaded.trainerState.end() || !format->is_string() ||
      format->get<std::string>() != kTrainerStateFormat)
    return dataLoss(statePath, ": not a Kiln trainer state (\"format\" is "
                    "not \"", kTrainerStateFormat, "\")");
  std::optional<int64_t> version = integerField(loaded.trainerState, "version");
  if (!version || *version != kTrainerStateVersion)
    return failedPrecondition(statePath, ": trainer state version ",
                              version ? std::to_string(*version) : "missing",
                              ", this runtime reads version ",
                              kTrainerStateVersion);
  std::optional<int64_t> stateStep = integerField(loaded.trainerState, "step");
  if (!stateStep || *stateStep != *step)
    return dataLoss(statePath, ": \"step\" is ",
                    stateStep ? std::to_string(*stateStep) : "missing",
                    " but the checkpoint is for step ", *step);
  return loaded;
}

} // namespace kiln::rt
