//===- Metrics.h - Per-step metrics: JSONL file and console progress ------===//
//
// Every step produces one StepMetrics record. MetricsFile appends it as one
// JSON object per line (flushed per line, so a killed run keeps what it
// measured and `tail -f` works). ProgressPrinter shows progress for people:
// on a terminal a single line rewritten in place with '\r'; in a log file
// (not a TTY) one plain line every `logEvery` steps plus the first and last,
// so CI logs stay readable.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_H
#define KILN_RUNTIME_METRICS_H

#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace kiln::rt {

struct StepMetrics {
  int64_t step = 0;                // 1-based
  double loss = 0;
  double lr = 0;
  std::optional<double> gradNorm;  // absent when the artifact has none
  double stepMs = 0;               // wall time of the step
  int64_t tokensPerStep = 0;       // batch * seq
  double tokensPerSecond = 0;
};

// One JSON object per line, e.g.
// {"step":1,"loss":5.545,"lr":0.001,"grad_norm":1.2,"step_ms":3.1,
//  "tokens":1024,"tokens_per_s":330000}
// Non-finite numbers (a diverged loss) are written as null: JSON has no NaN.
std::string metricsJsonLine(const StepMetrics &m);

class MetricsFile {
public:
  static StatusOr<MetricsFile> open(const std::string &path);
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

class ProgressPrinter {
public:
  // `out` is usually stdout; `interactive` is isatty(out).
  ProgressPrinter(FILE *out, bool interactive, int64_t totalSteps,
                  int64_t logEvery)
      : out_(out), interactive_(interactive), totalSteps_(totalSteps),
        logEvery_(logEvery < 1 ? 1 : logEvery) {}

  void report(const StepMetrics &m);
  // Ends the in-place line on a terminal, so later output starts fresh.
  void finish();

private:
  FILE *out_;
  bool interactive_;
  int64_t totalSteps_;
  int64_t logEvery_;
  bool lineOpen_ = false;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_H
