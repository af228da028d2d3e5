//===- Metrics.h - Per-step metrics and their JSONL file ------------------===//
//
// Every step produces one StepMetrics record. Two sinks store it: the JSONL
// file here (one JSON object per line, flushed per line, so a killed run
// keeps what it measured and `tail -f` works) and TensorBoard event files
// (metrics/TensorBoardWriter.h). Both take their names and values from one
// mapping, stepMetricFields, so the two can never disagree about what a step
// measured. The console view is metrics/ProgressPrinter.h.
//
// Naming: a metric has a JSON key and a TensorBoard tag.
//
//   JSON key            TensorBoard tag        present
//   step                (the event's step)     always
//   loss                train/loss             always
//   lr                  train/lr               always
//   grad_norm           train/grad_norm        when the artifact computes it
//   update_norm         train/update_norm      when measured
//   param_norm          train/param_norm       when measured
//   update_ratio        train/update_ratio     when both norms are measured
//   metric/<name>       metric/<name>          one per `metric` line of the model
//   step_ms             perf/step_ms           always
//   device_ms           perf/device_ms         CUDA, a step run as one graph
//   tokens              perf/tokens_per_step   always
//   tokens_per_s        perf/tokens_per_s      always
//   mfu                 perf/mfu               when a peak FLOP/s is known
//   peak_memory_bytes   mem/peak_bytes         when measured
//   skipped             train/skipped (0 / 1)  always
//   val_loss            val/loss               on steps where validation ran
//
// The model's `metric NAME = EXPR` lines (activation RMS, a logit mean,
// whatever the model file computes) are flat keys "metric/<name>" in JSON
// too (not a nested object), so a JSON key and its TensorBoard tag read the
// same and `jq '."metric/Block.0.resid_rms"'` finds them. Absent metrics are omitted from
// both sinks; non-finite values (a diverged loss) are JSON null.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_H
#define KILN_RUNTIME_METRICS_H

#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

// A metric identified by a name chosen at run time: a model's `metric` line,
// e.g. "Block.0.resid_rms".
struct NamedScalar {
  std::string name;
  double value = 0;
};

struct StepMetrics {
  int64_t step = 0; // 1-based
  double loss = 0;
  double lr = 0;
  std::optional<double> gradNorm;   // global L2 norm of the gradients
  std::optional<double> updateNorm; // L2 norm of this step's parameter update
  std::optional<double> paramNorm;  // L2 norm of the parameters
  std::vector<NamedScalar> modelMetrics; // the model's `metric` lines
  double stepMs = 0;                     // wall time of the step
  // The device's time for it (Backend::lastStepDeviceSeconds, the step's
  // graph from its first node to its last): stepMs less this is what the
  // host added (batch, staging, launch, synchronization, scalars).
  std::optional<double> deviceMs;
  int64_t tokensPerStep = 0;             // batch * seq (* accumulation)
  double tokensPerSecond = 0;
  std::optional<double> mfu; // model FLOPs utilization in [0, 1]
  std::optional<int64_t> peakMemoryBytes;
  bool skipped = false; // the non-finite guard skipped this step's update
  std::optional<double> valLoss; // set on steps where validation ran

  // updateNorm / paramNorm when both are known (inf when paramNorm is 0).
  std::optional<double> updateRatio() const;
};

// How a value is written as JSON; TensorBoard stores every kind as a float.
enum class MetricKind { kReal, kInteger, kBoolean };

struct MetricField {
  std::string jsonKey;
  std::string tensorBoardTag;
  double value = 0;
  MetricKind kind = MetricKind::kReal;
};

// The metrics present in `m`, in the order of the table above, without
// `step` (it is the JSON object's first key and the TensorBoard event step).
std::vector<MetricField> stepMetricFields(const StepMetrics &m);

// One JSON object (no newline), e.g.
// {"step":1,"loss":5.545,"lr":0.001,"grad_norm":1.2,"step_ms":3.1,
//  "tokens":1024,"tokens_per_s":330000,"skipped":false}
std::string metricsJsonLine(const StepMetrics &m);

// A JSON string literal of `text` (quotes, backslashes and control
// characters escaped): names come from model files and may hold anything.
std::string jsonString(const std::string &text);

// (tag, value) pairs for TensorBoardWriter::addScalars(m.step, ...).
std::vector<std::pair<std::string, double>>
tensorBoardScalars(const StepMetrics &m);

class MetricsFile {
public:
  // Creates (truncates) `path`.
  static StatusOr<MetricsFile> open(const std::string &path);
  // For a run resumed after step `step`: keeps the records of steps up to
  // `step` that an earlier run wrote to `path` (dropping those it logged
  // after its last checkpoint, which the resumed run repeats) and appends.
  // A missing file is created.
  static StatusOr<MetricsFile> openResumed(const std::string &path,
                                           int64_t step);
  MetricsFile(MetricsFile &&other) noexcept;
  MetricsFile &operator=(MetricsFile &&) = delete;
  ~MetricsFile();

  Status write(const StepMetrics &m);

private:
  MetricsFile(FILE *file, std::string path)
      : file_(file), path_(std::move(path)) {}
  FILE *file_ = nullptr;
  std::string path_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_H
