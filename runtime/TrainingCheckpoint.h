//===- TrainingCheckpoint.h - A training session to and from checkpoints ---===//
//
// What a checkpoint of a run holds (the files and their atomicity are
// checkpoint/CheckpointStore's business):
//   model.safetensors      every Parameter under its true name and shape
//   optimizer.safetensors  every optimizer-state buffer as "<role>.<param>"
//                          (adam_m.wte, adam_v.wte, momentum.wte)
//   trainer_state.json     {"updates", "seed", "data": {"spec", "position"},
//                           "artifact": {"path", "hash"}, "config": {"train",
//                           "run"}} (+ "step", "format", "version")
// That is everything a step reads besides the data, so a resumed run is the
// uninterrupted one bit for bit on the CPU. A checkpoint written by another
// artifact (hash), with other shapes or another data seed is refused with a
// message naming the file, before anything is overwritten.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAININGCHECKPOINT_H
#define KILN_RUNTIME_TRAININGCHECKPOINT_H

#include "runtime/RunOptions.h"
#include "runtime/Status.h"
#include "runtime/TrainingSession.h"
#include "runtime/checkpoint/CheckpointStore.h"
#include "runtime/data/DataPosition.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

// Where a run stands between two steps.
struct TrainingProgress {
  int64_t step = 0;    // steps completed
  int64_t updates = 0; // updates applied (steps minus skipped ones)
  data::DataPosition data;
};

// The data position saved in `checkpoint` (needed before the session
// exists: the data is opened first); errors name trainer_state.json.
StatusOr<data::DataPosition>
checkpointDataPosition(const LoadedCheckpoint &checkpoint);

// "fnv1a64:0123456789abcdef" of the artifact's bytes.
std::string artifactHash(const Artifact &artifact);

// "fnv1a64:..." of what a checkpoint's contents mean, whatever the target:
// the model name, the train settings, and every parameter's and optimizer
// state's name, role, dtype and logical shape. The same model compiled with
// the same -D for the CPU and for CUDA has one state hash, so a run saved on
// one backend resumes on the other.
std::string trainingStateHash(const Artifact &artifact);

// What --data resolved to: the files' real paths and their token count
// (empty for random tokens and TSP instances, which the spec alone names).
// It tells the same data spelled another way ('./train.bin') from other data
// behind the same spelling (a file replaced, a glob matching more shards).
struct DataIdentity {
  std::vector<std::string> files;
  int64_t tokens = 0;
};

// Writes the session's parameters, optimizer state, `progress` and `data`.
StatusOr<CheckpointInfo> saveTrainingCheckpoint(CheckpointStore &store,
                                                const TrainingSession &session,
                                                const RunOptions &options,
                                                const TrainingProgress &progress,
                                                const DataIdentity &data);

// Checks `checkpoint` against the session's artifact, `options` and the data
// this run opened, then overwrites parameters and optimizer state from it;
// returns its progress.
StatusOr<TrainingProgress>
restoreTrainingCheckpoint(const LoadedCheckpoint &checkpoint, TrainingSession &session,
                          const RunOptions &options, const DataIdentity &data);

// The run flags (schedule, data format, ...) that differ from those the
// checkpoint was written with, one sentence each: resuming with them is
// allowed (a new schedule is a common choice) but is no longer the same run.
std::vector<std::string> runConfigDifferences(const LoadedCheckpoint &checkpoint,
                                              const RunOptions &options);

// --init-from: every parameter from `path` (a model.safetensors), by name;
// a missing tensor, another dtype or shape is an error naming the file.
// Returns the names of the file's tensors the model has no parameter for
// (a deeper model's layers, say), which the caller reports.
StatusOr<std::vector<std::string>> loadParameters(const std::string &path,
                                                  TrainingSession &session);

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAININGCHECKPOINT_H
