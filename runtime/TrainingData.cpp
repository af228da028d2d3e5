//===- TrainingData.cpp - The data a run reads, opened from its flags ------===//

#include "runtime/TrainingData.h"

#include "runtime/TrainingSession.h"
#include "runtime/data/DataFormat.h"
#include "runtime/data/TokenCorpus.h"
#include "runtime/data/TokenWindows.h"

#include <limits>

namespace kiln::rt {

namespace {

// Token ids must index the model's embedding; an artifact that does not
// say (vocab_size 0) still needs ids that fit the i32 input buffers.
int64_t vocabularyOf(const Artifact &artifact) {
  int64_t vocab = artifact.root().train()->vocab_size();
  return vocab > 0 ? vocab : std::numeric_limits<int32_t>::max();
}

StatusOr<data::TokenWindows> openWindows(const Artifact &artifact,
                                         const std::string &spec,
                                         data::DataFormat format,
                                         uint64_t seed) {
  int64_t vocab = artifact.root().train()->vocab_size();
  if (spec == data::kRandomDataSpec && vocab <= 0)
    return invalidArgument(artifact.name(),
                           ": --data random needs a model whose tokens index "
                           "a vocabulary (an embedding or cross-entropy)");
  KILN_ASSIGN_OR_RETURN(data::TokenCorpus corpus,
                        data::TokenCorpus::open(spec, format, vocab, seed));
  return data::TokenWindows::create(std::move(corpus), artifact.seq(),
                                    vocabularyOf(artifact));
}

} // namespace

StatusOr<TrainingData> openTrainingData(const Artifact &artifact,
                                        const RunOptions &options,
                                        data::DataPosition start) {
  TrainingData result;
  if (options.dataPath.empty()) {
    BufferRoles roles = findBufferRoles(artifact);
    if (roles.inputs.empty())
      return result;
    std::string names;
    for (uint32_t i : roles.inputs)
      names += (names.empty() ? "" : ", ") + bufferName(artifact.buffer(i));
    return invalidArgument(artifact.name(), ": the model reads inputs (",
                           names, "), so --data SPEC is required");
  }
  KILN_ASSIGN_OR_RETURN(data::DataFormat format,
                        data::parseDataFormat(options.dataFormat));
  KILN_ASSIGN_OR_RETURN(
      data::TokenWindows windows,
      openWindows(artifact, options.dataPath, format, options.seed));
  data::WindowRange trainRange = windows.all();
  if (options.valFraction > 0) {
    KILN_ASSIGN_OR_RETURN(
        data::TrainValidationSplit split,
        data::splitOffValidation(windows, options.valFraction,
                                 artifact.batch()));
    trainRange = split.train;
    KILN_ASSIGN_OR_RETURN(
        data::ValidationBatches validation,
        data::ValidationBatches::create(windows, split.validation,
                                        artifact.batch()));
    result.validation.emplace(std::move(validation));
  } else if (!options.valDataPath.empty()) {
    // A different seed stream for random validation tokens.
    KILN_ASSIGN_OR_RETURN(data::TokenWindows valWindows,
                          openWindows(artifact, options.valDataPath, format,
                                      ~options.seed));
    data::WindowRange all = valWindows.all();
    KILN_ASSIGN_OR_RETURN(
        data::ValidationBatches validation,
        data::ValidationBatches::create(std::move(valWindows), all,
                                        artifact.batch()));
    result.validation.emplace(std::move(validation));
  }
  result.description = detail::concat(
      windows.corpus().describe(), ", ", trainRange.size(),
      " training windows of ", artifact.seq(), " tokens",
      result.validation
          ? detail::concat(", ", result.validation->range().size(),
                           " validation windows")
          : std::string());
  KILN_ASSIGN_OR_RETURN(
      data::BatchSampler sampler,
      data::BatchSampler::create(std::move(windows), trainRange,
                                 artifact.batch(), options.seed, start));
  result.train.emplace(std::move(sampler));
  return result;
}

} // namespace kiln::rt
