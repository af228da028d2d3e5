//===- TrainingData.h - The data a run reads, opened from its flags --------===//
//
// Turns --data / --data-format / --val-data / --val-fraction into the
// runtime/data pieces for one artifact: the token windows cut for its
// sequence length and checked against its vocabulary, a shuffling sampler
// over the training windows that starts at a saved position (resume), and
// the fixed validation batches. Errors name the data and say what is wrong
// before any kernel is compiled.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAININGDATA_H
#define KILN_RUNTIME_TRAININGDATA_H

#include "runtime/Artifact.h"
#include "runtime/RunOptions.h"
#include "runtime/Status.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/data/DataPosition.h"
#include "runtime/data/ValidationSet.h"

#include <optional>
#include <string>

namespace kiln::rt {

struct TrainingData {
  std::optional<data::BatchSampler> train;           // none: the model reads no inputs
  std::optional<data::ValidationBatches> validation; // --val-data / --val-fraction
  std::string description; // "GPL-3: text (byte tokens), 35149 tokens, 274 windows"
};

// Opens the data `options` names for `artifact`, the sampler starting at
// `start`. An artifact with Input buffers needs --data; one without reads
// none (a given --data is still opened and checked, so a broken file is
// never silently ignored).
StatusOr<TrainingData> openTrainingData(const Artifact &artifact,
                                        const RunOptions &options,
                                        data::DataPosition start = {});

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAININGDATA_H
