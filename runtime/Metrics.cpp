//===- Metrics.cpp - Per-step metrics and their JSONL file ----------------===//

#include "runtime/Metrics.h"

#include "runtime/FileIO.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>

namespace kiln::rt {

namespace {

// Nine significant digits round-trip a float32 and are plenty for a metric;
// null for NaN/inf, which JSON cannot express.
std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

std::string jsonValue(const MetricField &field) {
  switch (field.kind) {
  case MetricKind::kBoolean:
    return field.value != 0 ? "true" : "false";
  case MetricKind::kInteger:
    if (!std::isfinite(field.value))
      return "null";
    return std::to_string(static_cast<long long>(field.value));
  case MetricKind::kReal:
    break;
  }
  return jsonNumber(field.value);
}


} // namespace

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::optional<double> StepMetrics::updateRatio() const {
  if (!updateNorm || !paramNorm)
    return std::nullopt;
  return *updateNorm / *paramNorm;
}

std::vector<MetricField> stepMetricFields(const StepMetrics &m) {
  using K = MetricKind;
  std::vector<MetricField> fields;
  auto add = [&](const char *key, const char *tag, double value,
                 K kind = K::kReal) {
    fields.push_back(MetricField{key, tag, value, kind});
  };
  add("loss", "train/loss", m.loss);
  add("lr", "train/lr", m.lr);
  if (m.gradNorm)
    add("grad_norm", "train/grad_norm", *m.gradNorm);
  if (m.updateNorm)
    add("update_norm", "train/update_norm", *m.updateNorm);
  if (m.paramNorm)
    add("param_norm", "train/param_norm", *m.paramNorm);
  if (std::optional<double> ratio = m.updateRatio())
    add("update_ratio", "train/update_ratio", *ratio);
  for (const NamedScalar &metric : m.modelMetrics) {
    std::string name = "metric/" + metric.name;
    fields.push_back(MetricField{name, name, metric.value, K::kReal});
  }
  add("step_ms", "perf/step_ms", m.stepMs);
  if (m.deviceMs)
    add("device_ms", "perf/device_ms", *m.deviceMs);
  add("tokens", "perf/tokens_per_step", double(m.tokensPerStep), K::kInteger);
  add("tokens_per_s", "perf/tokens_per_s", m.tokensPerSecond);
  if (m.mfu)
    add("mfu", "perf/mfu", *m.mfu);
  if (m.peakMemoryBytes)
    add("peak_memory_bytes", "mem/peak_bytes", double(*m.peakMemoryBytes),
        K::kInteger);
  add("skipped", "train/skipped", m.skipped ? 1 : 0, K::kBoolean);
  if (m.valLoss)
    add("val_loss", "val/loss", *m.valLoss);
  return fields;
}

std::string metricsJsonLine(const StepMetrics &m) {
  std::string line = "{\"step\":" + std::to_string(m.step);
  for (const MetricField &field : stepMetricFields(m))
    line += "," + jsonString(field.jsonKey) + ":" + jsonValue(field);
  line += "}";
  return line;
}

std::vector<std::pair<std::string, double>>
tensorBoardScalars(const StepMetrics &m) {
  std::vector<std::pair<std::string, double>> scalars;
  for (MetricField &field : stepMetricFields(m))
    scalars.emplace_back(std::move(field.tensorBoardTag), field.value);
  return scalars;
}

StatusOr<MetricsFile> MetricsFile::open(const std::string &path) {
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return invalidArgument("metrics file ", path, ": cannot create (",
                           std::strerror(errno), ")");
  return MetricsFile(file, path);
}

StatusOr<MetricsFile> MetricsFile::openResumed(const std::string &path,
                                               int64_t step) {
  std::string kept;
  if (FILE *old = std::fopen(path.c_str(), "r")) {
    char *line = nullptr;
    size_t capacity = 0;
    while (getline(&line, &capacity, old) > 0) {
      nlohmann::json record =
          nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      // A torn last line (the earlier run was killed mid-write) is dropped.
      if (record.is_object() && record.contains("step") &&
          record["step"].is_number_integer() && record["step"].get<int64_t>() <= step)
        kept += line;
    }
    std::free(line);
    std::fclose(old);
  }
  KILN_RETURN_IF_ERROR(writeFileAtomically(path, {std::string_view(kept)}));
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    return invalidArgument("metrics file ", path, ": cannot open (",
                           std::strerror(errno), ")");
  return MetricsFile(file, path);
}

MetricsFile::MetricsFile(MetricsFile &&other) noexcept
    : file_(other.file_), path_(std::move(other.path_)) {
  other.file_ = nullptr;
}

MetricsFile::~MetricsFile() {
  if (file_)
    std::fclose(file_);
}

Status MetricsFile::write(const StepMetrics &m) {
  std::string line = metricsJsonLine(m) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0)
    return invalidArgument("metrics file ", path_, ": write failed (",
                           std::strerror(errno), ")");
  return okStatus();
}

} // namespace kiln::rt
