//===- TrainingData.h - The data a run reads, opened from its flags --------===//
//
// Turns --data / --data-format / --val-data / --val-fraction into the
// runtime/data pieces for one artifact: the token windows cut for its
// sequence length and checked against its vocabulary, a shuffling sampler
// over the training windows that starts at a saved position (resume), and
// the fixed validation batches; or, for --data tsp:N_MIN-N_MAX, a generator
// of TSP batches (TspSampler.h). The artifact's Input buffers are matched by
// name, shape and dtype against what the source produces. Errors name the
// data and the input and say what is wrong before any kernel is compiled.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAININGDATA_H
#define KILN_RUNTIME_TRAININGDATA_H

#include "runtime/Artifact.h"
#include "runtime/RunOptions.h"
#include "runtime/Status.h"
#include "runtime/TrainingSession.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/data/DataPosition.h"
#include "runtime/data/TspSampler.h"
#include "runtime/data/ValidationSet.h"

#include <optional>
#include <string>

namespace kiln::rt {

struct TrainingData {
  std::optional<data::BatchSampler> train;           // token data
  std::optional<data::TspSampler> tsp;               // --data tsp:N_MIN-N_MAX
  std::optional<data::ValidationBatches> validation; // --val-data / --val-fraction
  std::string description; // "GPL-3: text (byte tokens), 35149 tokens, 274 windows"
};

// Opens the data `options` names for `artifact`, the sampler starting at
// `start`. An artifact with Input buffers needs --data; one without reads
// none (a given --data is still opened and checked, so a broken file is
// never silently ignored). At most one of `train` and `tsp` is set.
// `shard`: this rank's share of each global batch (data parallelism).
StatusOr<TrainingData> openTrainingData(const Artifact &artifact,
                                        const RunOptions &options,
                                        data::DataPosition start = {},
                                        data::Shard shard = {});

// The three inputs of a TSP batch (coords, lengths, targets) for
// TrainingSession::runMicroStep; they point into `batch`.
std::vector<NamedInput> tspInputs(const data::TspBatch &batch);

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAININGDATA_H
