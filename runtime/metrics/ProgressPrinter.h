//===- ProgressPrinter.h - Training progress on the console ---------------===//
//
// Progress for people watching a run. On a terminal: one line rewritten in
// place with '\r' — a bar, step/total, loss, lr, tokens/s and an ETA from
// the mean step time so far. In a log file (not a TTY): one plain line every
// `logEvery` steps plus the first and the last, so CI logs stay readable.
// Steps whose update the non-finite guard skipped, and validation results,
// always get a line of their own that stays on screen.
//
// The in-place line fits the terminal's width (one column spare, so it
// never wraps): the bar narrows to what is left (24 cells at most), or goes
// below 8; then the learning rate, the MFU, the tokens/s and the ETA go, in
// that order, and what is still too long is cut.
//
// Colour (the bar and the skipped note) only on a terminal, and never when
// NO_COLOR is set to a non-empty value (https://no-color.org). In a
// multi-process run only rank 0 prints; the others print nothing, so N ranks
// do not interleave N progress bars.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_PROGRESSPRINTER_H
#define KILN_RUNTIME_METRICS_PROGRESSPRINTER_H

#include "runtime/Metrics.h"
#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace kiln::rt {

// Reads one environment variable; returns null when it is unset.
using EnvironmentLookup = std::function<const char *(const char *name)>;

// This process's rank in a multi-process run, from the first variable set
// (and non-empty) of RANK (torchrun), OMPI_COMM_WORLD_RANK (Open MPI's
// mpirun), SLURM_PROCID (srun); 0 when none is. A value that is not a
// non-negative integer is an error naming the variable.
StatusOr<int64_t> rankFromEnvironment(const EnvironmentLookup &lookup);
StatusOr<int64_t> rankFromEnvironment(); // the process environment

// "42s", "3m05s", "1h02m" (hours keep counting past a day: "27h00m");
// "?" for a negative or non-finite estimate. Rounds to whole seconds.
std::string formatEta(double seconds);

// What the console allows, decided once at start-up.
struct ConsoleEnvironment {
  bool noColor = false; // NO_COLOR is set and non-empty
  int64_t rank = 0;
  // The terminal's width: current() asks the terminal on stdout, else reads
  // COLUMNS (a positive integer; anything else is ignored), else 80.
  int64_t columns = 80;

  static StatusOr<ConsoleEnvironment> fromLookup(const EnvironmentLookup &);
  static StatusOr<ConsoleEnvironment> current(); // the process environment
};

class ProgressPrinter {
public:
  // `out` is usually stdout; `interactive` is isatty(fileno(out)).
  // `totalSteps` <= 0 means unknown: no bar and no ETA.
  ProgressPrinter(FILE *out, bool interactive, int64_t totalSteps,
                  int64_t logEvery, ConsoleEnvironment environment);

  // Shows step `m` (and, when m.valLoss is set, its validation line).
  void report(const StepMetrics &m);
  // A line of its own: "val loss 2.31 at step 500".
  void reportValidation(int64_t step, double valLoss);
  // Ends the in-place line on a terminal, so later output starts fresh.
  void finish();

  bool usesColor() const { return color_; }

private:
  void printInteractive(const StepMetrics &m, double etaSeconds);
  void printPlain(const StepMetrics &m, double etaSeconds);

  FILE *out_;
  bool interactive_;
  bool color_;
  bool silent_; // not rank 0
  int64_t columns_; // the terminal's width
  int64_t totalSteps_;
  int64_t logEvery_;
  bool lineOpen_ = false;
  size_t openLineWidth_ = 0; // visible characters of the in-place line
  double stepMsSum_ = 0;
  int64_t stepsSeen_ = 0;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_PROGRESSPRINTER_H
