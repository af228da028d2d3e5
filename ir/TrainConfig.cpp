//===- TrainConfig.cpp - #kiln.train: verifier, defaults and JSON ---------===//
//
// The train section as one typed attribute. Its verifier holds the rules
// every reader used to check by key: positive shapes, a ZeRO stage of 0 to
// 3, a finite non-negative clip, and no other optimizer's settings. The
// settings the optimizer needs (adam's betas and epsilon, every optimizer's
// weight decay) are asked for by --kiln-optimizer, which reads them; a
// module that stops before it may leave them out. toJson writes the artifact's
// TrainConfig.settings: every present setting, keys sorted, f32 values as
// the shortest decimal that reads back as the same f32.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::kiln;

LogicalResult TrainConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t batch, int64_t seq,
    int64_t gradAccum, FloatAttr clip, Precision, int64_t memoryBudget,
    int64_t zero, RematMode, OptimizerKind optimizer, FloatAttr beta1,
    FloatAttr beta2, FloatAttr epsilon, FloatAttr momentum,
    FloatAttr dampening, BoolAttr nesterov, FloatAttr, BoolAttr,
    BoolAttr, BoolAttr) {
  if (batch <= 0 || seq <= 0)
    return emitError() << "#kiln.train batch and seq must be positive, got "
                       << batch << " and " << seq;
  if (gradAccum <= 0)
    return emitError() << "#kiln.train grad_accum must be positive, got "
                       << gradAccum;
  if (memoryBudget < 0)
    return emitError() << "#kiln.train memory_budget must be >= 0, got "
                       << memoryBudget;
  if (zero < 0 || zero > 3)
    return emitError() << "#kiln.train zero must be 0, 1, 2 or 3, got "
                       << zero;
  if (clip && (!std::isfinite(clip.getValueAsDouble()) ||
               clip.getValueAsDouble() < 0))
    return emitError() << "#kiln.train clip must be finite and non-negative, "
                          "got "
                       << formatShortestFloat(clip.getValue());
  bool sgd = optimizer == OptimizerKind::Sgd;
  StringRef name = stringifyOptimizerKind(optimizer);
  auto refuse = [&](Attribute value, StringRef key) -> LogicalResult {
    if (!value)
      return success();
    return emitError() << "#kiln.train '" << key << "' does not apply to the "
                       << name << " optimizer";
  };
  for (auto [value, key] : {std::pair<Attribute, StringRef>{beta1, "beta1"},
                            {beta2, "beta2"},
                            {epsilon, "epsilon"}})
    if (sgd && failed(refuse(value, key)))
      return failure();
  for (auto [value, key] :
       {std::pair<Attribute, StringRef>{momentum, "momentum"},
        {dampening, "dampening"},
        {nesterov, "nesterov"}})
    if (!sgd && failed(refuse(value, key)))
      return failure();
  return success();
}

double TrainConfigAttr::getClipValue() const {
  return getClip() ? getClip().getValueAsDouble() : 0.0;
}

bool TrainConfigAttr::decaysNorms() const {
  return getDecayNorms() && getDecayNorms().getValue();
}
bool TrainConfigAttr::decaysBiases() const {
  return getDecayBiases() && getDecayBiases().getValue();
}
bool TrainConfigAttr::decaysEmbeddings() const {
  return getDecayEmbeddings() && getDecayEmbeddings().getValue();
}

namespace {

// A JSON string literal.
std::string jsonString(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += llvm::formatv("\\u{0:x-4}", static_cast<unsigned>(c)).str();
    else
      out += c;
  }
  return out + "\"";
}

} // namespace

std::string TrainConfigAttr::toJson() const {
  std::map<std::string, std::string> settings; // sorted by key
  auto integer = [&](const char *key, int64_t value) {
    settings[key] = std::to_string(value);
  };
  auto real = [&](const char *key, FloatAttr value) {
    if (value)
      settings[key] = std::isfinite(value.getValueAsDouble())
                          ? formatShortestFloat(value.getValue())
                          : "null";
  };
  auto flag = [&](const char *key, BoolAttr value) {
    if (value)
      settings[key] = value.getValue() ? "true" : "false";
  };
  auto name = [&](const char *key, StringRef value) {
    settings[key] = jsonString(value);
  };
  integer("batch", getBatch());
  integer("seq", getSeq());
  integer("grad_accum", getGradAccum());
  integer("memory_budget", getMemoryBudget());
  if (getZero() > 0) // absent: replicated, as every artifact before ZeRO
    integer("zero", getZero());
  real("clip", getClip());
  name("precision", stringifyPrecision(getPrecision()));
  name("remat", stringifyRematMode(getRemat()));
  name("optimizer", stringifyOptimizerKind(getOptimizer()));
  real("beta1", getBeta1());
  real("beta2", getBeta2());
  real("epsilon", getEpsilon());
  real("momentum", getMomentum());
  real("dampening", getDampening());
  flag("nesterov", getNesterov());
  real("weight_decay", getWeightDecay());
  flag("decay_norms", getDecayNorms());
  flag("decay_biases", getDecayBiases());
  flag("decay_embeddings", getDecayEmbeddings());
  std::string json = "{";
  for (const auto &[key, text] : settings)
    json += (json.size() > 1 ? "," : "") + jsonString(key) + ":" + text;
  return json + "}";
}
