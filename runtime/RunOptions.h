//===- RunOptions.h - Command line of kiln-run -----------------------------===//
//
// Parsing lives in the runtime library rather than in the tool's main so the
// unit tests can check every usage error, and so that main stays a thin
// wrapper: parse, run, map errors to exit codes. Every flag is one entry of
// a table in RunOptions.cpp (name, value, help, what it sets), from which
// both the parser and the --help text are made, so they cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_RUNOPTIONS_H
#define KILN_RUNTIME_RUNOPTIONS_H

#include "runtime/AttentionDispatch.h"
#include "runtime/GemmAlgorithms.h"
#include "runtime/LrSchedule.h"
#include "runtime/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

struct RunOptions {
  std::string artifactPath;  // positional OUT.kart

  // Data.
  std::string dataPath;      // --data PATH|GLOB|random|tsp:N_MIN-N_MAX (required when the model has inputs)
  std::string dataFormat = "auto"; // --data-format auto|text|llmc|nanogpt
  std::string valDataPath;   // --val-data PATH|GLOB
  double valFraction = 0;    // --val-fraction F: hold out the last F of --data
  int64_t valEvery = 0;      // --val-every N (0: only after the last step)
  int64_t valBatches = 20;   // --val-batches M

  // Training.
  int64_t steps = 0;         // --steps (>= 1); training only
  LrSchedule schedule;       // --lr, --schedule, --warmup, --decay-steps,
                             // --min-lr-ratio, --decay-fraction
  bool decayStepsGiven = false;
  uint64_t seed = 0;         // --seed
  int64_t maxSkippedSteps = 5; // --max-skipped-steps M
  int64_t commTimeout = 600; // --comm-timeout SECONDS (data-parallel runs)
  bool commOverlap = true;   // false: --no-comm-overlap

  // Checkpoints.
  std::string checkpointDir; // --checkpoint-dir D
  int64_t checkpointEvery = 0; // --checkpoint-every N (0: only at the end)
  int64_t keepCheckpoints = 3; // --keep-checkpoints K (0: keep all)
  bool resume = false;       // --resume
  std::string initFrom;      // --init-from FILE.safetensors

  // Reports.
  std::string metricsPath;   // --metrics FILE.jsonl
  std::string tensorboardDir; // --tensorboard DIR
  int64_t logEvery = 10;     // --log-every (non-TTY progress lines)
  std::optional<double> peakTflops; // --peak-tflops (MFU without a known GPU)
  std::optional<double> peakGbps;   // --peak-gbps (--profile's roofline)
  bool quiet = false;        // --quiet: only errors and the final line
  bool profile = false;      // --profile: time per schedule entry at the end
  std::string tracePath;     // --trace FILE.json: Chrome trace events
  int64_t traceFirst = 1, traceLast = 20; // --trace-steps A..B (inclusive)

  // Debugging.
  int64_t checkGrads = 0;    // --check-grads N: entries checked per
                             // parameter; > 0 runs the gradient check
                             // instead of training
  double gradStep = 0;       // --grad-step H: its central differences' step
                             // (0: GradientCheckOptions' default, 1e-2)
  std::string saveInitPath;  // --save-init FILE.safetensors
  std::string saveGradsPath; // --save-grads FILE.safetensors
  std::string saveBatchesPath; // --save-batches FILE.safetensors

  // CUDA.
  bool compileOnly = false;  // --compile-only: JIT-compile the kernels (no GPU
                             // needed), report registers/spills, exit
  std::vector<std::string> archs; // --arch sm_80,sm_90a (with --compile-only;
                             // default: the artifact's archs)
  bool tf32 = false;         // --tf32: fp32 GEMMs on TF32 tensor cores
  AttentionDispatch attention = AttentionDispatch::kAuto; // --attention auto|kiln|cudnn
  GemmAlgorithms gemmAlgorithms = GemmAlgorithms::kHeuristic; // --gemm-algos
};

struct ParsedCommandLine {
  bool help = false; // --help was given: print usage, exit 0
  bool version = false; // --version: print the versions, exit 0
  RunOptions options;
};

// Parses argv[1..]. Usage errors (unknown flag, missing value, bad number,
// missing required argument, flags that contradict each other, a training
// flag with --check-grads) are kInvalidArgument with a one-line message.
// Whether --data is needed depends on the artifact (on its Input buffers),
// so it is checked when the artifact is loaded, not here.
StatusOr<ParsedCommandLine> parseRunCommandLine(
    const std::vector<std::string> &args);

// The usage text printed by --help (a usage error prints one line instead).
std::string runUsageText();

} // namespace kiln::rt

#endif // KILN_RUNTIME_RUNOPTIONS_H
