//===- CheckpointStore.h - Checkpoint directories that survive kill -9 ----===//
//
// A checkpoint directory holds one subdirectory per saved step:
//
//   DIR/step-00000100/model.safetensors      parameters, true names, F32
//                    /optimizer.safetensors  optimizer state (adam_m.<param>…)
//                    /trainer_state.json     caller's JSON object + format,
//                                            version and step
//                    /COMMITTED              written and fsynced last
//
// Why it survives a kill at any instant: a checkpoint is built under
// DIR/.tmp-step-00000100-<pid>, every file fsynced, the marker written last,
// the directory fsynced, and only then renamed to step-00000100 (rename is
// atomic) and DIR fsynced. So a `step-*` directory is complete by
// construction and the marker double-checks it (it records the byte size of
// each file, which load() compares). Pruning renames a victim to
// .tmp-delete-* before removing it, so a kill mid-removal never leaves a
// half-deleted `step-*`. Anything named `.tmp-*` is debris of a killed run:
// never read, removed by the next save().
//
// One writer per directory at a time (a training job's rank 0): save()
// removes every .tmp-* entry, whoever made it. Readers (latest(), load())
// may run at any time; a checkpoint pruned under them is a "not found"
// error, never a torn read (an opened SafetensorsFile keeps its mapping).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CHECKPOINT_CHECKPOINTSTORE_H
#define KILN_RUNTIME_CHECKPOINT_CHECKPOINTSTORE_H

#include "runtime/Safetensors.h"
#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

// File names inside one checkpoint directory.
inline constexpr const char *kCheckpointModelFile = "model.safetensors";
inline constexpr const char *kCheckpointOptimizerFile = "optimizer.safetensors";
inline constexpr const char *kCheckpointTrainerStateFile = "trainer_state.json";
inline constexpr const char *kCheckpointCommitMarker = "COMMITTED";
// trainer_state.json carries these so a foreign JSON file is refused.
inline constexpr const char *kTrainerStateFormat = "kiln-trainer-state";
inline constexpr int kTrainerStateVersion = 1;

// A committed checkpoint on disk.
struct CheckpointInfo {
  int64_t step = 0;
  std::string path; // DIR/step-00000100
};

// A committed checkpoint, opened and validated.
struct LoadedCheckpoint {
  int64_t step = 0;
  std::string path;
  SafetensorsFile model;
  SafetensorsFile optimizer;
  // The caller's object plus "format", "version" and "step".
  nlohmann::json trainerState;
};

// What one save() writes.
struct CheckpointContents {
  int64_t step = 0;                   // >= 0; names the directory
  std::vector<TensorView> model;      // F32 parameters, true names and shapes
  std::vector<TensorView> optimizer;  // e.g. adam_m.<param>, adam_v.<param>
  nlohmann::json trainerState = nlohmann::json::object(); // a JSON object
  SafetensorsMetadata modelMetadata;  // extra __metadata__ (format is "pt")
};

// "step-00000100".
std::string checkpointDirName(int64_t step);

class CheckpointStore {
public:
  // Opens (creating if needed) the checkpoint directory `dir`. Keeps the
  // newest `keepLast` committed checkpoints after each save (0: keep all).
  // Warnings (incomplete step directories) go to `warnings` (nullptr:
  // silent).
  static StatusOr<CheckpointStore> open(const std::string &dir, int keepLast,
                                        FILE *warnings = stderr);

  const std::string &directory() const { return dir_; }

  // Writes one checkpoint atomically (see the file banner), replacing an
  // existing one of the same step, then prunes. Returns where it is.
  StatusOr<CheckpointInfo> save(const CheckpointContents &contents);

  // Committed checkpoints, oldest (lowest step) first. Step directories
  // without the marker are reported as incomplete on `warnings` and left
  // out.
  StatusOr<std::vector<CheckpointInfo>> list() const;

  // The committed checkpoint with the highest step, or nullopt when there
  // is none.
  StatusOr<std::optional<CheckpointInfo>> latest() const;

  // Opens and validates the checkpoint at `path` (a step directory): the
  // marker, both safetensors files, and trainer_state.json (a JSON object
  // with the right format and version and the step of the marker). Errors
  // name the offending file.
  static StatusOr<LoadedCheckpoint> load(const std::string &path);

private:
  CheckpointStore(std::string dir, int keepLast, FILE *warnings)
      : dir_(std::move(dir)), keepLast_(keepLast), warnings_(warnings) {}

  Status removeDebris() const;
  Status writeCheckpointFiles(const std::string &tmp,
                              const CheckpointContents &contents) const;
  Status prune(int64_t justSaved) const;

  std::string dir_;
  int keepLast_ = 0;
  FILE *warnings_ = nullptr;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_CHECKPOINT_CHECKPOINTSTORE_H
