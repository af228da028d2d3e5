//===- TrainingData.cpp - The data a run reads, opened from its flags ------===//

#include "runtime/TrainingData.h"

#include "runtime/TrainingSession.h"
#include "runtime/data/DataFormat.h"
#include "runtime/data/TokenCorpus.h"
#include "runtime/data/TokenWindows.h"

#include <algorithm>
#include <limits>
#include <vector>

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

// One Input buffer a data source writes.
struct ExpectedInput {
  const char *name;
  schema::DType dtype;
  std::vector<int64_t> shape;
};

std::string describeShape(const std::vector<int64_t> &shape,
                          schema::DType dtype) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += detail::concat(d ? ", " : "", shape[d]);
  return text + "] : " + schema::EnumNameDType(dtype);
}

// Every Input buffer of `artifact` must be one of `produced` with its dtype
// and shape (a source cannot write a buffer it does not know, and a wrong
// shape would overrun or misread it); the first `required` of `produced`
// must all be present.
Status matchInputs(const Artifact &artifact,
                   const std::vector<ExpectedInput> &produced, size_t required,
                   const std::string &source) {
  std::vector<bool> present(produced.size(), false);
  std::string names;
  for (const ExpectedInput &p : produced)
    names += detail::concat(names.empty() ? "" : ", ", p.name, " ",
                            describeShape(p.shape, p.dtype));
  for (uint32_t i : findBufferRoles(artifact).inputs) {
    const schema::Buffer &buffer = artifact.buffer(i);
    std::string name = bufferName(buffer);
    auto it = std::find_if(produced.begin(), produced.end(),
                           [&](const ExpectedInput &p) { return name == p.name; });
    if (it == produced.end())
      return invalidArgument(artifact.name(), ": the model's input '", name,
                             "' is not produced by ", source, " (it provides ",
                             names, ")");
    if (buffer.dtype() != it->dtype || bufferShape(buffer) != it->shape ||
        isPadded(buffer))
      return invalidArgument(
          artifact.name(), ": the model's input '", name, "' is ",
          describeShape(bufferShape(buffer), buffer.dtype()), " but ", source,
          " produces ", describeShape(it->shape, it->dtype));
    present[it - produced.begin()] = true;
  }
  for (size_t p = 0; p < required; ++p)
    if (!present[p])
      return invalidArgument(artifact.name(), ": ", source,
                             " needs the model to read input '",
                             produced[p].name, "' ",
                             describeShape(produced[p].shape, produced[p].dtype),
                             ", and it has none");
  return okStatus();
}

// --data tsp:N_MIN-N_MAX: the inputs are coords, lengths and targets; n_max
// is read from coords (dimension 1) and must hold N_MAX cities. Rank
// `shard` of a data-parallel run generates its rows of each global batch.
StatusOr<TrainingData> openTspData(const Artifact &artifact,
                                   const RunOptions &options,
                                   data::DataPosition start, data::Shard shard) {
  const std::string source = "--data " + options.dataPath;
  KILN_ASSIGN_OR_RETURN(data::TspSizeRange sizes,
                        data::parseTspSpec(options.dataPath));
  if (options.dataFormat != data::dataFormatName(data::DataFormat::kAuto))
    return invalidArgument(source, " is generated: it takes no --data-format (got ",
                           options.dataFormat, ")");
  if (options.valFraction > 0 || !options.valDataPath.empty())
    return invalidArgument(source, ": validation (--val-data, --val-fraction) "
                                   "is not supported for generated TSP data yet");
  int64_t nMax = -1;
  for (uint32_t i : findBufferRoles(artifact).inputs) {
    const schema::Buffer &buffer = artifact.buffer(i);
    std::vector<int64_t> shape = bufferShape(buffer);
    if (bufferName(buffer) == "coords" && shape.size() == 3)
      nMax = shape[1];
  }
  const int64_t batch = artifact.batch();
  // Without a coords [batch, n_max, 2] the message shows N_MAX as n_max.
  const int64_t shownNMax = nMax < 0 ? sizes.maxCities : nMax;
  KILN_RETURN_IF_ERROR(matchInputs(
      artifact,
      {{"coords", schema::DType_F32, {batch, shownNMax, 2}},
       {"lengths", schema::DType_I32, {batch}},
       {"targets", schema::DType_I32, {batch, shownNMax}}},
      /*required=*/3, source));
  if (nMax < sizes.maxCities)
    return invalidArgument(artifact.name(), ": the model's input 'coords' holds ",
                           nMax, " cities per sample but ", source,
                           " draws up to ", sizes.maxCities);
  KILN_ASSIGN_OR_RETURN(
      data::TspSampler sampler,
      data::TspSampler::create(sizes, batch, nMax, options.seed, start, shard));
  TrainingData result;
  result.description = sampler.describe();
  result.tsp.emplace(std::move(sampler));
  return result;
}

} // namespace

StatusOr<TrainingData> openTrainingData(const Artifact &artifact,
                                        const RunOptions &options,
                                        data::DataPosition start,
                                        data::Shard shard) {
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
  if (data::isTspSpec(options.dataPath))
    return openTspData(artifact, options, start, shard);
  // Token data writes [batch, seq] tokens and targets: a model with other
  // inputs (a TSP model given a text file) is refused before it is misfed.
  const std::vector<int64_t> tokenShape = {artifact.batch(), artifact.seq()};
  KILN_RETURN_IF_ERROR(matchInputs(
      artifact,
      {{"tokens", schema::DType_I32, tokenShape},
       {"targets", schema::DType_I32, tokenShape}},
      /*required=*/0, "token data (--data " + options.dataPath + ")"));
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
                                 artifact.batch(), options.seed, start,
                                 shard));
  result.train.emplace(std::move(sampler));
  return result;
}

std::vector<NamedInput> tspInputs(const data::TspBatch &batch) {
  auto bytes = [](const auto &v) { return v.size() * sizeof(v[0]); };
  return {{"coords", batch.coords.data(), bytes(batch.coords)},
          {"lengths", batch.lengths.data(), bytes(batch.lengths)},
          {"targets", batch.targets.data(), bytes(batch.targets)}};
}

} // namespace kiln::rt
