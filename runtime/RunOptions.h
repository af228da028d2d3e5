//===- RunOptions.h - Command line of kiln-run -----------------------------===//
//
// Parsing lives in the runtime library rather than in the tool's main so the
// unit tests can check every usage error, and so that main stays a thin
// wrapper: parse, run, map errors to exit codes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_RUNOPTIONS_H
#define KILN_RUNTIME_RUNOPTIONS_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

struct RunOptions {
  std::string artifactPath;  // positional OUT.kart
  std::string dataPath;      // --data (required when the model has inputs)
  int64_t steps = 0;         // --steps (>= 1); training only
  int64_t checkGrads = 0;    // --check-grads N: entries checked per
                             // parameter; > 0 runs the gradient check
                             // instead of training
  double lr = 1e-3;          // --lr, constant in this issue
  uint64_t seed = 0;         // --seed
  std::string metricsPath;   // --metrics FILE.jsonl
  std::string saveInitPath;  // --save-init FILE.safetensors
  std::string saveGradsPath; // --save-grads FILE.safetensors
  int64_t logEvery = 10;     // --log-every (non-TTY progress lines)
  bool quiet = false;        // --quiet: only errors and the final line
  bool profile = false;      // --profile: time per schedule entry at the end
};

struct ParsedCommandLine {
  bool help = false; // --help was given: print usage, exit 0
  RunOptions options;
};

// Parses argv[1..]. Usage errors (unknown flag, missing value, bad number,
// missing required argument, a training flag with --check-grads) are
// kInvalidArgument with a one-line message. Whether --data is needed
// depends on the artifact (on its Input buffers), so it is checked when the
// artifact is loaded, not here.
StatusOr<ParsedCommandLine> parseRunCommandLine(
    const std::vector<std::string> &args);

// The usage text printed by --help and after usage errors.
const char *runUsageText();

} // namespace kiln::rt

#endif // KILN_RUNTIME_RUNOPTIONS_H
