//===- Metrics.cpp - Per-step metrics: JSONL file and console progress ----===//

#include "runtime/Metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace kiln::rt {

namespace {

// Shortest round-trippable-enough text for a metric; null for NaN/inf.
std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

} // namespace

std::string metricsJsonLine(const StepMetrics &m) {
  std::string line = "{\"step\":" + std::to_string(m.step);
  line += ",\"loss\":" + jsonNumber(m.loss);
  line += ",\"lr\":" + jsonNumber(m.lr);
  line += ",\"grad_norm\":" + (m.gradNorm ? jsonNumber(*m.gradNorm) : "null");
  line += ",\"step_ms\":" + jsonNumber(m.stepMs);
  line += ",\"tokens\":" + std::to_string(m.tokensPerStep);
  line += ",\"tokens_per_s\":" + jsonNumber(m.tokensPerSecond);
  line += "}";
  return line;
}

StatusOr<MetricsFile> MetricsFile::open(const std::string &path) {
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return invalidArgument("metrics file ", path, ": cannot create (",
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

void ProgressPrinter::report(const StepMetrics &m) {
  if (interactive_) {
    // Trailing spaces erase leftovers of a longer previous line.
    std::fprintf(out_, "\rstep %lld/%lld | loss %.4f | %.0f tok/s | %.1f ms   ",
                 static_cast<long long>(m.step),
                 static_cast<long long>(totalSteps_), m.loss,
                 m.tokensPerSecond, m.stepMs);
    std::fflush(out_);
    lineOpen_ = true;
    return;
  }
  bool due = m.step == 1 || m.step == totalSteps_ || m.step % logEvery_ == 0;
  if (!due)
    return;
  std::fprintf(out_, "step %lld/%lld loss %.6f lr %.3g", 
               static_cast<long long>(m.step),
               static_cast<long long>(totalSteps_), m.loss, m.lr);
  if (m.gradNorm)
    std::fprintf(out_, " grad_norm %.4f", *m.gradNorm);
  std::fprintf(out_, " %.2f ms %.0f tok/s\n", m.stepMs, m.tokensPerSecond);
  std::fflush(out_);
}

void ProgressPrinter::finish() {
  if (lineOpen_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    lineOpen_ = false;
  }
}

} // namespace kiln::rt
